#!/usr/bin/env bash
# Predictions against measurements (issue: predictions that hold). Calibrates
# this machine first when it has no calibration (`trident calibrate`), then
# trains each configuration below for real with parallel.cluster: auto and
# the default thread count, and prints the measured iteration (the median of
# the logged windows after the first, evaluation off) beside the planner's
# simulated one.
# ROUNDS rounds alternate the configurations; each keeps its median.
#   bash bench/run_predictions.sh [STEPS] [ROUNDS]   (about 1 minute per round at 40 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}; rounds=${2:-3}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin" plan --model mlp --cluster auto --devices 1 --mini-batch 8 --partitioner dp 2>&1 | grep -q "not calibrated" &&
  "$bin" calibrate
n=0
run() {  # run NAME CONFIG ARGS...
  local name=$1 cfg=$2; shift 2
  n=$((n+1))
  "$bin" train --config "$cfg" --set name=$name --set runs_dir=$work/$round --set train.steps=$steps --set train.epochs=null \
    --set train.eval=false --set train.log_every=10 --set checkpoint.every=0 --set train.threads=0 \
    --set parallel.cluster=auto "$@" > "$work/$name.log" 2>&1 || { echo "FAILED $name"; tail -3 "$work/$name.log"; }
}
for round in $(seq "$rounds"); do
run dp1-mlp examples/fmnist-mlp.yaml
run dp2-mlp examples/fmnist-mlp.yaml --nproc 2
run dp3-cnn examples/fmnist-cnn.yaml --nproc 3 --set train.mini_batch=96
run dp1-inception examples/fmnist-inception.yaml --set parallel.devices=1 --set parallel.partitioner=dp
run pipe2-transformer examples/fmnist-transformer.yaml --set train.mini_batch=512 --set parallel.devices=2 \
  --set parallel.partitioner=pipedream --set parallel.max_replicas=1 --set parallel.micro_batch=64
run demo5-inception examples/fmnist-inception.yaml
run gp4-inception examples/fmnist-inception.yaml --set parallel.devices=4 --set parallel.partitioner=graphpipe
run pd3-mmt examples/synthetic-mmt.yaml --set parallel.devices=3 --set parallel.partitioner=pipedream
run gp4-dlrm examples/synthetic-dlrm.yaml --set parallel.devices=4 --set parallel.partitioner=graphpipe
run dp2-transformer examples/fmnist-transformer.yaml --set train.mini_batch=256 --nproc 2
done
python3 - "$work" "$rounds" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
print("| run | processes | plan | measured ms (median of %d) | simulated ms | simulated / measured |" % rounds)
print("|---|---|---|---|---|---|")
worst = 0
for name in sorted(os.listdir(os.path.join(work, "1"))):
    runs = [os.path.join(work, str(r), name) for r in range(1, rounds + 1)]
    runs = [d for d in runs if os.path.exists(os.path.join(d, "plan.json"))]
    if not runs: continue
    plan = json.load(open(os.path.join(runs[0], "plan.json")))
    def iteration(d):
        w = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if "samples_per_s" in l][1:]
        return plan["mini_batch"] / statistics.median(x["samples_per_s"] for x in w)
    measured = statistics.median(iteration(d) for d in runs)
    sim = plan["predicted"]["iteration_s"]
    worst = max(worst, abs(sim / measured - 1))
    desc = "%s, %d stages" % (plan["partitioner"], len(plan["stages"]))
    print("| %s | %d | %s | %.2f | %.2f | %.2f |" % (name, plan["devices"], desc, measured * 1e3, sim * 1e3, sim / measured))
print("\nlargest error: %.0f%%" % (100 * worst))
PY
