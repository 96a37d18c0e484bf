#!/usr/bin/env bash
# Does the planner rank plans as they run? inception/tiny on 4 local
# processes, mini-batch 128, parallel.cluster: auto (calibrated first if
# needed), default threads: the graphpipe plan, pipedream's with one replica
# per stage (a pure pipeline: graphpipe's and pipedream's own picks are the
# same plan here), data parallelism on all 4, and two hand-written plans
# (bench/plans/), each trained for
# real; measured iteration = the median of the logged windows after the
# first; ROUNDS rounds alternate the plans, each keeping its median.
#   bash bench/run_ranking.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}; rounds=${2:-3}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin" calibrate --if-missing > /dev/null
here=$(pwd)
declare -A plans=(
  [graphpipe]=graphpipe [pipedream]=pipedream [dp]=dp
  [hand-branches]=$here/bench/plans/inception-branches-4.plan.json
  [hand-halves]=$here/bench/plans/inception-halves-4.plan.json)
for round in $(seq "$rounds"); do
  for name in graphpipe pipedream dp hand-branches hand-halves; do
    extra=(); [ "$name" = pipedream ] && extra=(--set parallel.max_replicas=1)
    "$bin" train --config examples/fmnist-inception.yaml --set name=$name --set runs_dir=$work/$round \
      --set train.steps=$steps --set train.epochs=null --set train.eval=false --set train.log_every=10 \
      --set checkpoint.every=0 --set train.threads=0 --set parallel.cluster=auto --set parallel.devices=4 \
      --set parallel.partitioner=${plans[$name]} "${extra[@]}" > "$work/$name.log" 2>&1 || { echo "FAILED $name"; tail -3 "$work/$name.log"; }
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
rows = []
for name in ["graphpipe", "pipedream", "dp", "hand-branches", "hand-halves"]:
    runs = [os.path.join(work, str(r), name) for r in range(1, rounds + 1)]
    plan = json.load(open(os.path.join(runs[0], "plan.json")))
    def iteration(d):
        w = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if "samples_per_s" in l][1:]
        return plan["mini_batch"] / statistics.median(x["samples_per_s"] for x in w)
    measured = statistics.median(iteration(d) for d in runs)
    desc = "%d stages, devices %s" % (len(plan["stages"]), "; ".join(",".join(map(str, s["devices"])) for s in plan["stages"]))
    rows.append((name, desc, plan["predicted"]["iteration_s"], measured))
by_pred = [r[0] for r in sorted(rows, key=lambda r: r[2])]
by_meas = [r[0] for r in sorted(rows, key=lambda r: r[3])]
print("| plan | stages | simulated ms | measured ms (median of %d) | simulated rank | measured rank |" % rounds)
print("|---|---|---|---|---|---|")
for name, desc, sim, meas in rows:
    print("| %s | %s | %.2f | %.2f | %d | %d |" % (name, desc, sim * 1e3, meas * 1e3, by_pred.index(name) + 1, by_meas.index(name) + 1))
best = min(r[3] for r in rows)
gp = [r for r in rows if r[0] == "graphpipe"][0][3]
print("\npredicted order: %s\nmeasured order:  %s\nthe planner's pick (graphpipe) is %.1f%% slower than the measured fastest" %
      (" < ".join(by_pred), " < ".join(by_meas), 100 * (gp / best - 1)))
PY
