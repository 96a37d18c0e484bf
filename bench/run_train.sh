#!/usr/bin/env bash
# End to end: `trident train` against a plain PyTorch training script as a
# user writes it (bench/pytorch_train.py: in-memory Fashion-MNIST, DataLoader
# with shuffling, Adam, running accuracy), under the project's PyTorch
# (scripts/install-peers.sh, the version trident links). Batch 128, THREADS
# threads, no evaluation; ROUNDS rounds alternate the two; each keeps the
# median; every run is printed.
# trident's steps/s: the median of its logged windows after the first.
#   bash bench/run_train.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/tools/trident/trident
peer=$(bash scripts/install-peers.sh | tail -1)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rate() { field steps_per_s; }
trident_rate() {  # MODEL STEPS
  "$bin" train --config "examples/fmnist-$1.yaml" --set name=r --set runs_dir="$work" --set train.steps="$2" \
    --set train.epochs=null --set train.eval=false --set train.log_every=$(( $2 / 6 )) --set train.threads="$threads" \
    --set checkpoint.every=0 > "$work/log" 2>&1 || { tail -3 "$work/log" >&2; exit 1; }
  python3 -c 'import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if "samples_per_s" in l][1:]
print(statistics.median(x["samples_per_s"] for x in w)/128)' "$work/r/metrics.jsonl"
  rm -rf "$work/r"
}
echo "| model | threads | trident steps/s | PyTorch $("$peer" -c 'import torch; print(torch.__version__)') script | trident / PyTorch |"
echo "|---|---|---|---|---|"
for spec in mlp:600 cnn:60; do
  IFS=: read -r model steps <<<"$spec"
  t=(); b=()
  for _ in $(seq "$rounds"); do
    t+=("$(trident_rate "$model" "$steps")")
    b+=("$("$peer" bench/pytorch_train.py "$model" "$threads" "$steps" 2>/dev/null | rate)")
  done
  python3 - "$model" "$threads" "${t[*]}" "${b[*]}" <<'PY'
import statistics, sys
model, threads = sys.argv[1], sys.argv[2]
t, b = ([float(x) for x in arg.split()] for arg in sys.argv[3:5])
mt, mb = statistics.median(t), statistics.median(b)
print("| %s | %s | %.1f | %.1f | %.2f |" % (model, threads, mt, mb, mt / mb))
print("|  | runs | %s | %s |  |" % tuple(" ".join("%.1f" % x for x in v) for v in (t, b)), file=sys.stderr)
PY
done
