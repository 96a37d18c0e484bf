#!/usr/bin/env bash
# End to end: `trident train` against a plain PyTorch training script as a
# user writes it (bench/pytorch_train.py: in-memory Fashion-MNIST, DataLoader
# with shuffling, Adam, running accuracy), under Debian's python3-torch 1.13
# and the current torch of the peer environment (scripts/install-peers.sh,
# installed on first use). Batch 128, THREADS threads, no evaluation; ROUNDS
# rounds alternate the three; each keeps the median; every run is printed.
# trident's steps/s: the median of its logged windows after the first.
#   bash bench/run_train.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/tools/trident/trident
peer=$(bash scripts/install-peers.sh | tail -1)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rate() { python3 -c 'import json,sys; print(json.load(sys.stdin)["steps_per_s"])'; }
trident_rate() {  # MODEL STEPS
  "$bin" train --config "examples/fmnist-$1.yaml" --set name=r --set runs_dir="$work" --set train.steps="$2" \
    --set train.epochs=null --set train.eval=false --set train.log_every=$(( $2 / 6 )) --set train.threads="$threads" \
    --set checkpoint.every=0 > "$work/log" 2>&1 || { tail -3 "$work/log" >&2; exit 1; }
  python3 -c 'import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if "samples_per_s" in l][1:]
print(statistics.median(x["samples_per_s"] for x in w)/128)' "$work/r/metrics.jsonl"
  rm -rf "$work/r"
}
echo "| model | threads | trident steps/s | PyTorch 1.13 script | PyTorch $("$peer" -c 'import torch; print(torch.__version__)') script | trident / 1.13 | trident / 2.x |"
echo "|---|---|---|---|---|---|---|"
for spec in mlp:600 cnn:60; do
  IFS=: read -r model steps <<<"$spec"
  t=(); a=(); b=()
  for _ in $(seq "$rounds"); do
    t+=("$(trident_rate "$model" "$steps")")
    a+=("$(/usr/bin/python3 bench/pytorch_train.py "$model" "$threads" "$steps" | rate)")
    b+=("$("$peer" bench/pytorch_train.py "$model" "$threads" "$steps" 2>/dev/null | rate)")
  done
  python3 - "$model" "$threads" "${t[*]}" "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
model, threads = sys.argv[1], sys.argv[2]
t, a, b = ([float(x) for x in arg.split()] for arg in sys.argv[3:6])
mt, ma, mb = statistics.median(t), statistics.median(a), statistics.median(b)
print("| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f |" % (model, threads, mt, ma, mb, mt / ma, mt / mb))
print("|  | runs | %s | %s | %s |  |  |" % tuple(" ".join("%.1f" % x for x in v) for v in (t, a, b)), file=sys.stderr)
PY
done
