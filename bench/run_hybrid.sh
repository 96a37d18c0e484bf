#!/usr/bin/env bash
# Does HybComm pick the fastest method? The 4096 x 4096 FC model (wide_fc)
# trained data parallel on 2, 3 and 4 local processes with each gradient
# sync method, and with `hybrid` (HybComm priced on this machine's
# calibration, `trident calibrate`). One thread per process, global batch
# 16, SGD; ms per iteration, the best of ROUNDS alternating runs.
#   bash bench/run_hybrid.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
bin=${BUILD:-build}/bench/bench_dp
cmake --build "${BUILD:-build}" --target bench_dp >/dev/null  # left out of the default build
port=29800
runn() {  # runn N CMD...: CMD as ranks 0..N-1; prints rank 0's JSON line
  local n=$1; shift
  port=$((port + 1))
  local out; out=$(mktemp)
  for r in $(seq $((n - 1)) -1 0); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      OPENBLAS_NUM_THREADS=1 "$@" > "$out.$r" 2>&1 &
  done
  wait
  tail -1 "$out.0"; rm -f "$out"*
}
echo "| processes | allreduce ms | ps ms | sfb ms | hybrid ms (its choice for fc.weight) | fastest |"
echo "|---|---|---|---|---|---|"
for n in 2 3 4; do
  declare -A best=()
  choice=""
  for _ in $(seq "$rounds"); do
    for m in allreduce ps sfb hybrid; do
      line=$(runn "$n" "$bin" wide_fc 16 1 10 "$m")
      ms=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['iteration_ms'])" "$line")
      [ "$m" = hybrid ] && choice=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['choice'])" "$line")
      best[$m]=$(python3 -c "print(min(${best[$m]:-1e9}, $ms))")
    done
  done
  python3 - "$n" "${best[allreduce]}" "${best[ps]}" "${best[sfb]}" "${best[hybrid]}" "$choice" <<'PY'
import sys
n, a, p, s, h, choice = sys.argv[1], *map(float, sys.argv[2:6]), sys.argv[6]
fastest = min((a, "allreduce"), (p, "ps"), (s, "sfb"))[1]
print(f"| {n} | {a:.1f} | {p:.1f} | {s:.1f} | {h:.1f} ({choice}) | {fastest} |")
PY
done
