#!/usr/bin/env bash
# What bounded staleness (SSP, see Note [Staleness]) costs in accuracy: mlp on
# Fashion-MNIST, 3 data-parallel processes under the parameter server, one
# thread each, 96 samples per step, Adam lr 0.001, test accuracy on the
# whole test set (10,000 images) at the end. BSP (s = 0) is deterministic
# and runs once; s = 1 and s = 2 depend on timing and run RUNS times each.
# Prints each run's accuracy, the mean, the mean's distance to BSP, and the
# mean read staleness (metrics' read_staleness: updates a read missed
# against BSP).
#   bash bench/run_ssp_accuracy.sh [STEPS] [SCHEDULE] [RUNS]
#   STEPS 1875 = 3 epochs; SCHEDULE constant | cosine (to 0 at the last step);
#   EXTRA="--set optimizer.name=sgd --set optimizer.lr=0.05 --set optimizer.momentum=0.9"
#   adds train flags (here: SGD with momentum instead of Adam).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-1875}
schedule=${2:-cosine}
runs=${3:-3}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
run() {  # run S N: prints "accuracy staleness"
  "$bin" train --config examples/fmnist-mlp.yaml --nproc 3 --set train.steps="$steps" --set train.epochs=null \
    --set train.threads=1 --set train.mini_batch=96 --set data.test_size=0 --set checkpoint.every=0 \
    --set train.log_every=25 --set parallel.grad_sync=ps --set optimizer.schedule="$schedule" \
    --set parallel.staleness="$1" --set runs_dir="$work/s$1-$2" ${EXTRA:-} > /dev/null
  python3 - "$work/s$1-$2/fmnist-mlp/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
acc = [l["test_accuracy"] for l in lines if "test_accuracy" in l][-1]
st = [l["read_staleness"] for l in lines if "read_staleness" in l]
print(f"{100 * acc:.2f} {sum(st) / len(st) if st else 0:.2f}")
PY
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); 3 processes x 1 thread; $steps steps, lr $schedule ${EXTRA:-}"
echo "| staleness | runs: test accuracy % | mean | vs BSP (points) | mean read staleness |"
echo "|---|---|---|---|---|"
read -r bsp _ < <(run 0 0)
echo "| 0 (BSP) | $bsp | $bsp | 0 | 0 |"
for s in 1 2; do
  accs=() stales=()
  for n in $(seq "$runs"); do
    read -r a st < <(run "$s" "$n")
    accs+=("$a") stales+=("$st")
  done
  python3 - "$bsp" "${accs[*]}" "${stales[*]}" "$s" <<'PY'
import sys
bsp, accs, stales, s = float(sys.argv[1]), list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split())), sys.argv[4]
mean = sum(accs) / len(accs)
print(f"| {s} | {', '.join(f'{a:.2f}' for a in accs)} | {mean:.2f} | {mean - bsp:+.2f} | {sum(stales) / len(stales):.2f} |")
PY
done
