#!/usr/bin/env bash
# Hand-written pipeline plans (stage sizes), their one-line errors, emulation, and a killed stage rank.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
. "$(dirname "$0")/../pipeline_args.sh"  # icfg, pcommon
# The example's hand-written plan (fan-out to two branch stages, a 2-replica stage) runs as given.
out=$("$bin" train --config "$icfg" --set train.steps=4 --set train.epochs=null --set data.train_size=1024 \
      --set data.test_size=200 --set checkpoint.every=0 --set runs_dir=$work/pp-hand 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "hand-written plan of 4 stages"; then
  echo "FAIL pipeline-hand-plan: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# Each stage its own micro-batch (see Note [Micro-batch ratios]): the example's plan with the stem at 16 rows, the
# branch stages at 32 and 64 and the 2-replica join at 128 trains as given; sizes that do not nest exit 2 naming
# the stage.
"$py" - "$src/examples/inception-branches.plan.json" "$work" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
for st, b in zip(plan["stages"], (16, 32, 64, 128)):
    st["micro_batch"] = b
json.dump(plan, open(sys.argv[2] + "/sizes.plan.json", "w"))
plan["mini_batch"] = 96
for st, b in zip(plan["stages"], (32, 48, 32, 32)):
    st["micro_batch"] = b
json.dump(plan, open(sys.argv[2] + "/ratio.plan.json", "w"))
PY
out=$("$bin" train --config "$icfg" --set parallel.partitioner=$work/sizes.plan.json --set train.steps=3 \
      --set train.epochs=null --set data.train_size=512 --set data.test_size=200 --set checkpoint.every=0 \
      --set runs_dir=$work/pp-sizes 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "micro-batches of 16, 32, 64, 128 by stage" \
   || ! printf '%s' "$out" | grep -q "test accuracy"; then
  echo "FAIL pipeline-stage-sizes: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
check plan-ratio 2 "stage 1 has micro_batch 48 and feeds on stage 0 of micro_batch 32" -- train --config "$icfg" \
  --set parallel.partitioner=$work/ratio.plan.json --set train.mini_batch=96
check bad-size-ratio 2 "micro-batch ratio 3 must be a power of two" -- plan --model mmt --preset tiny \
  --cluster cpu-local --devices 4 --mini-batch 64 --micro-batch-ratio 3
check bad-size-ratio-config 2 "parallel.micro_batch_ratio" -- train --config "$icfg" \
  --set parallel.partitioner=graphpipe --set parallel.micro_batch_ratio=6
check plan-devices 2 "is for 5 devices" -- train --config "$icfg" --set parallel.devices=4
check plan-missing 2 "parallel.partitioner = $work/none.json" -- train --config "$icfg" --set parallel.partitioner=$work/none.json
check bad-schedule 2 "parallel.schedule = 'zigzag'" -- train --config "$icfg" --set parallel.schedule=zigzag
check report-nothing 2 "is not a directory" -- report "$work/none"
check dilation-alone 2 "--dilation applies only with --emulate" -- train --config "$icfg" --dilation 5
check dilation-range 2 "--dilation 0.500000: allowed 1 to 1000" -- train --config "$icfg" --emulate summit-v100 --dilation 0.5
check emulate-cluster 2 "parallel.cluster = 'tpu-pod'" -- train --config "$icfg" --emulate tpu-pod
# Emulation: a paper-size model on 4 emulated V100s runs and reports beside the simulator.
out=$("$bin" train --config "$icfg" --set model.name=candle_uno --set model.preset=paper --set data.name=synthetic \
      --set data.train_size=128 --set data.test_size=16 --set parallel.devices=4 --set parallel.partitioner=graphpipe \
      --set train.steps=4 --set train.epochs=null --set runs_dir=$work/emu --emulate summit-v100 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "measured/simulated" || [ ! -s "$work/emu/fmnist-inception/trace.json" ]; then
  echo "FAIL emulate: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# Killing a stage's rank: its neighbours stop naming it, and so does the launcher.
kill_rank pipeline-kill-rank 4 8 1 -- "${pcommon[@]}" --set parallel.devices=4 --set parallel.partitioner=pipedream \
finish
