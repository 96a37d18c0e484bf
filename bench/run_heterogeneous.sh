#!/usr/bin/env bash
# A mixed cluster run for real on this machine (issue 43): 2 processes of 1
# thread, rank 1 made a device half as fast (TRIDENT_SLOWDOWN=1:2, Note
# [Slowed processes]); cnn/tiny on Fashion-MNIST, data parallel, one
# micro-batch of MINI rows per step, SGD.
# - the cluster: this machine calibrated (`trident calibrate --models
#   cnn/tiny`), written as a mixed cluster file of two classes, the second
#   with half the first's peak rates (Note [Device classes]);
# - even: the dp plan with an even split (what a class-unaware planner runs);
# - planned: the plan `trident train` makes for the mixed cluster (shares by
#   speed, Note [Replica shares]);
# - alone: rank 0 by itself (the fast device alone, the one-class baseline);
# - unslowed: the even plan without the slow-down, for reference.
# Each run's samples/s is the median of its logged windows after the first;
# the predicted figure is the plan's, on the mixed cluster. ROUNDS rounds
# alternate the runs; each keeps its median.
#   bash bench/run_heterogeneous.sh [ROUNDS] [STEPS] [MINI]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}; steps=${2:-24}; mini=${3:-512}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin" calibrate --models cnn/tiny --max-processes 2 --out "$work/machine.json" > "$work/calibrate.log" 2>&1 ||
  { tail -3 "$work/calibrate.log" >&2; exit 1; }
python3 - "$work/machine.json" "$work/mixed.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
fast = c.pop("device"); c.pop("devices_per_node"); c.pop("nodes")
slow = dict(fast, name=fast["name"] + " slowed 2x")
for k in ("float32_tflops", "float16_tflops", "bfloat16_tflops"):
    slow[k] = fast[k] / 2
c.update(name="this machine, rank 1 slowed 2x", classes=[fast, slow],
         hosts=[{"devices": {fast["name"]: 1, slow["name"]: 1}}])
json.dump(c, open(sys.argv[2], "w"))
EOF
train() {  # NAME NPROC CLUSTER PARTITIONER [SLOWDOWN]: prints "measured predicted"
  local name=$1-$RANDOM
  TRIDENT_SLOWDOWN=${5:-} "$bin" train --config examples/fmnist-mlp.yaml --nproc "$2" --set name="$name" \
    --set model.name=cnn --set model.preset=tiny --set optimizer.name=sgd --set optimizer.lr=0.01 \
    --set parallel.devices="$2" --set parallel.partitioner="$4" --set parallel.cluster="$3" \
    --set parallel.micro_batch="$mini" --set train.mini_batch="$mini" --set train.epochs=null \
    --set train.steps="$steps" --set train.log_every=4 --set train.eval=false --set train.threads=1 \
    --set checkpoint.every=0 --set runs_dir="$work" > "$work/$name.log" 2>&1 ||
    { tail -3 "$work/$name.log" >&2; exit 1; }
  python3 - "$work/$name" <<'EOF'
import json, statistics, sys
run = sys.argv[1]
w = [json.loads(l) for l in open(run + "/metrics.jsonl") if "samples_per_s" in l][1:]
plan = json.load(open(run + "/plan.json"))
shares = [st.get("shares") for st in plan["stages"]]
print("%.1f %.1f %s" % (statistics.median(x["samples_per_s"] for x in w), plan["predicted"]["samples_per_s"],
                        json.dumps(shares).replace(" ", "")))
EOF
}
# The planned plan, and the same stage with an even split, both for the mixed cluster.
read -r _ _ shares <<< "$(train planned 2 "$work/mixed.json" dp 1:2)"
plan=$(ls -d "$work"/planned-*/ | head -1)plan.json
python3 - "$plan" "$work/even.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
for st in p["stages"]:
    st.pop("shares", None); st["actions"] = ""
json.dump(p, open(sys.argv[2], "w"))
EOF
declare -A measured predicted planned_shares
for round in $(seq "$rounds"); do
  for run in even planned alone unslowed; do
    case $run in
      even) out=$(train even 2 "$work/mixed.json" "$work/even.json" 1:2) ;;
      planned) out=$(train planned 2 "$work/mixed.json" dp 1:2) ;;
      alone) out=$(train alone 1 "$work/machine.json" dp) ;;
      unslowed) out=$(train unslowed 2 "$work/machine.json" dp) ;;
    esac
    read -r m p s <<< "$out"
    measured[$run]+="$m "; predicted[$run]=$p; planned_shares[$run]=$s
  done
done
median() { python3 -c "import statistics,sys; print('%.1f' % statistics.median(map(float, sys.argv[1:])))" "$@"; }
echo "cnn/tiny, mini-batch $mini, 2 processes x 1 thread, rank 1 slowed 2x (TRIDENT_SLOWDOWN=1:2); $(lscpu | sed -n 's/^Model name: *//p')"
echo "| run | shares | samples/s measured (median of $rounds) | predicted | measured / predicted | runs |"
echo "|---|---|---|---|---|---|"
for run in even planned alone unslowed; do
  m=$(median ${measured[$run]})
  echo "| $run | ${planned_shares[$run]} | $m | ${predicted[$run]} | $(python3 -c "print('%.2f' % ($m / ${predicted[$run]}))") | ${measured[$run]}|"
done
echo "(alone and unslowed are predicted on this machine's calibration, without the slowed class)"
