#!/usr/bin/env bash
# trident data parallel vs PyTorch DDP (Gloo): 2 processes on this machine,
# same model, global batch, threads per process and optimizer. Alternates the
# sides ROUNDS times and keeps each side's best. Prints Markdown tables.
# The peer is the project's PyTorch (scripts/install-peers.sh, the version
# trident links): "same settings" with trident's process settings, "defaults"
# out of the box.
#   bash bench/run_dp.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_dp
cmake --build "${BUILD:-build}" --target bench_dp >/dev/null  # left out of the default build
same="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
port=29700
peer=$(bash scripts/install-peers.sh | tail -1)
peer_version=$("$peer" -c 'import torch; print(torch.__version__)')
# run2 CMD...: runs CMD as ranks 0 and 1, prints rank 0's JSON line
run2() {
  port=$((port + 1))
  local out; out=$(mktemp)
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      GLIBC_TUNABLES=$same OPENBLAS_NUM_THREADS=$threads "$@" > "$out.$r" 2>&1 &
  done
  wait
  cat "$out.0"; rm -f "$out" "$out.0" "$out.1"
}
# run2_plain CMD...: the same without trident's process settings (a peer out of the box)
run2_plain() {
  port=$((port + 1))
  local out; out=$(mktemp)
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" > "$out.$r" 2>&1 &
  done
  wait
  cat "$out.0"; rm -f "$out" "$out.0" "$out.1"
}
field() { python3 -c "import json,sys; print(json.loads([l for l in sys.stdin.read().splitlines() if l.startswith('{')][-1])['$1'])"; }
echo "| model | global batch | threads/process | trident ms/iteration | DDP $peer_version, same settings, ms/iteration | DDP / trident | DDP $peer_version defaults ms/iteration | DDP defaults / trident |"
echo "|---|---|---|---|---|---|---|---|"
for spec in mlp:128:300 cnn:128:30 inception:128:20; do
  IFS=: read -r model batch steps <<<"$spec"
  bt=1e9; bp=1e9; bn=1e9
  for _ in $(seq "$rounds"); do
    t=$(run2 "$bin" "$model" "$batch" "$threads" "$steps" allreduce | field iteration_ms)
    p=$(run2 "$peer" bench/pytorch_ddp.py "$model" "$batch" "$threads" "$steps" | field iteration_ms)
    n=$(run2_plain "$peer" bench/pytorch_ddp.py "$model" "$batch" "$threads" "$steps" | field iteration_ms)
    bt=$(python3 -c "print(min($bt, $t))"); bp=$(python3 -c "print(min($bp, $p))"); bn=$(python3 -c "print(min($bn, $n))")
  done
  python3 -c "print(f'| $model | $batch | $threads | {$bt:.2f} | {$bp:.2f} | {$bp/$bt:.2f} | {$bn:.2f} | {$bn/$bt:.2f} |')"
done
echo
echo "| sync (wide_fc 4096x4096, 2 processes, global batch 16) | ms/iteration | bytes sent/iteration (rank 0) | exposed ms |"
echo "|---|---|---|---|"
for s in "allreduce 0" "allreduce 1" "ps 1" "sfb 1"; do
  read -r meth wfbp <<<"$s"
  line=$(run2 "$bin" wide_fc 16 "$threads" 20 "$meth" "$wfbp")
  name="$meth"; [ "$meth" = allreduce ] && name="allreduce, WFBP $([ "$wfbp" = 1 ] && echo on || echo off)"
  python3 -c "import json; d=json.loads('''$line'''.strip().splitlines()[-1]); print(f\"| $name | {d['iteration_ms']:.2f} | {d['bytes_sent']:.0f} | {d['exposed_ms']:.2f} |\")"
done
