#!/usr/bin/env bash
# Delayed pipelines (parallel.pipeline_delay: 1, PipeDream-2BW; Note [Delayed pipelines]): runs equal the
# one-process delayed run, resume exactly from checkpoints of both weight versions, hold two versions,
# and bad settings are refused; `trident plan` shows both predictions.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
. "$(dirname "$0")/../pipeline_args.sh"  # icfg, pcommon (SGD at lr 0.05: Note [Stable trajectories])
dcommon=("${pcommon[@]}" --set train.profile_ops=false --set parallel.pipeline_delay=1 --set parallel.cluster=cpu-local)
big=(--set train.mini_batch=128 --set parallel.micro_batch=32)  # the demo plan's batch
# The one-process references: the delayed rule on one stage, every step.
"$bin" train "${dcommon[@]}" --set parallel.devices=1 --set runs_dir=$work/one >/dev/null 2>&1
"$bin" train "${dcommon[@]}" "${big[@]}" --set parallel.devices=1 --set runs_dir=$work/one-big >/dev/null 2>&1
# The demo's hand-written plan (5 processes: a fork into two branch stages, a join, a stage of two
# replicas under hybrid sync) and a planned 4-stage pipedream chain, both with a checkpoint at step 6
# (a drain and a fill mid-run); 12 steps end within rounding of the reference (atol 1e-5 + rtol 1e-4,
# as the synchronous pipelines; measured 3.0e-8 and 1.5e-8).
delayed_run() {  # NAME REFERENCE DEVICES PARTITIONER [FLAGS]
  local name=$1 ref=$2 n=$3 part=$4 out rc; shift 4
  out=$("$bin" train "${dcommon[@]}" "$@" --set parallel.devices=$n --set parallel.partitioner=$part \
        --set parallel.max_replicas=1 --set checkpoint.every=6 --set runs_dir=$work/$name 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -q "pipeline delay 1"; then
    echo "FAIL delayed-$name: exit $rc: $out"; fails=$((fails+1)); fi
  same_weights delayed-$name "$work/$ref/fmnist-inception" "$work/$name/fmnist-inception" --rtol 1e-4 --atol 1e-5
}
delayed_run branches one-big 5 inception-branches.plan.json "${big[@]}"
delayed_run pipedream one 4 pipedream
stages=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["stages"]))' "$work/pipedream/fmnist-inception/plan.json")
if [ "$stages" -lt 3 ]; then echo "FAIL delayed-pipedream-stages: $stages"; fails=$((fails+1)); else passes=$((passes+1)); fi
# At most two weight versions per stage, and two where a stage forwards the next mini-batch early.
if ! python3 - "$work/branches/fmnist-inception/metrics.jsonl" <<'PY'
import json, sys
mem = [json.loads(l)["memory"] for l in open(sys.argv[1]) if '"memory"' in l][-1]
v = [r["weight_versions"] for r in mem]
assert max(v) == 2 and all(0 <= x <= 2 for x in v), v
PY
then echo "FAIL delayed-versions: $(grep memory "$work/branches/fmnist-inception/metrics.jsonl")"; fails=$((fails+1)); else passes=$((passes+1)); fi
# Checkpoints hold both versions: 6 steps, resumed to 12 on another plan (the pipedream chain), equal 12 straight.
"$bin" train "${dcommon[@]}" "${big[@]}" --set parallel.devices=5 --set parallel.partitioner=inception-branches.plan.json \
  --set train.steps=6 --set runs_dir=$work/half >/dev/null 2>&1
out=$("$bin" train --resume "$work/half/fmnist-inception" --set train.steps=12 --set parallel.devices=4 \
      --set parallel.partitioner=pipedream 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 6"; then
  echo "FAIL delayed-resume: exit $rc: $out"; fails=$((fails+1)); fi
same_weights delayed-resume "$work/one-big/fmnist-inception" "$work/half/fmnist-inception" --rtol 1e-4 --atol 1e-5
# The delay changes what trains: the synchronous pipeline ends elsewhere.
"$bin" train "${dcommon[@]}" --set parallel.pipeline_delay=0 --set parallel.devices=1 --set runs_dir=$work/sync >/dev/null 2>&1
if "$bin" diff "$work/one/fmnist-inception" "$work/sync/fmnist-inception" --rtol 1e-4 --atol 1e-5 >/dev/null 2>&1; then
  echo "FAIL delayed-differs: the delayed and synchronous runs ended alike"; fails=$((fails+1)); else passes=$((passes+1)); fi
# `trident plan` prints the other mode's prediction, labelled.
out=$("$bin" plan --model inception --devices 4 --mini-batch 64 --micro-batch 16 --max-replicas 1 --cluster cpu-local --schedule graph-1f1b 2>&1)
if ! printf '%s' "$out" | grep -q "delayed (parallel.pipeline_delay=1, PipeDream-2BW)"; then
  echo "FAIL plan-delayed: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$("$bin" plan --model inception --devices 4 --mini-batch 64 --micro-batch 16 --max-replicas 1 --cluster cpu-local --pipeline-delay 1 2>&1)
if ! printf '%s' "$out" | grep -q "synchronous (pipeline_delay 0)"; then
  echo "FAIL plan-synchronous: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
check delay-two 2 "parallel.pipeline_delay" -- train "${dcommon[@]}" --set parallel.pipeline_delay=2
check delay-staleness 2 "two asynchronies" -- train "${dcommon[@]}" --set parallel.devices=2 --set parallel.partitioner=dp \
  --set parallel.grad_sync=ps --set parallel.staleness=1
check delay-zero-bubble 2 "parallel.schedule = zb-h1" -- train "${dcommon[@]}" --set parallel.devices=4 \
  --set parallel.partitioner=pipedream --set parallel.schedule=zb-h1
check delay-clip 2 "optimizer.clip_norm" -- train "${dcommon[@]}" --set optimizer.clip_norm=1
finish
