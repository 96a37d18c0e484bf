#!/usr/bin/env bash
# Data parallelism: 2 processes train the weights of one (all-reduce, hybrid, PS); thread defaults; a rank killed mid-checkpoint.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
# Data parallel: 2 processes train to the same weights as one. The plan is pinned (parallel.cluster: the
# hybrid rule picks each layer's method by the cluster's costs; see Note [Stable trajectories]). Adam (lr 1e-3,
# 30 steps) over 2 replicas ends within 8.0e-7 of one process (SkylakeX kernels; 2.6e-7 on Prescott's),
# against atol 1e-5 + rtol 1e-4.
common=(--config "$cfg" --set train.steps=30 --set train.epochs=null --set train.threads=1 --set data.test_size=2000
        --set parallel.cluster=cpu-local)
"$bin" train "${common[@]}" --set runs_dir=$work/dp1 >/dev/null 2>&1
for sync in allreduce hybrid; do
  two=$("$bin" train "${common[@]}" --nproc 2 --set parallel.grad_sync=$sync --set runs_dir=$work/dp2-$sync 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL dp-$sync: exit $rc: $two"; fails=$((fails+1)); fi
  same_weights dp-$sync "$work/dp1/fmnist-mlp" "$work/dp2-$sync/fmnist-mlp" --rtol 1e-4 --atol 1e-5
done
# Thread defaults (see Note [Thread defaults]): with train.threads left at 0, each
# of 2 processes takes this host's cores divided by 2, at least 1.
"$bin" train --config "$cfg" --set train.steps=3 --set train.epochs=null --set train.eval=false --nproc 2 \
  --set runs_dir=$work/threads >/dev/null 2>&1
got=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metadata"]["threads"])' \
      "$work/threads/fmnist-mlp/trace.json" 2>&1)
want=$(( $(nproc) / 2 )); [ "$want" -lt 1 ] && want=1
if [ "$got" != "$want" ]; then echo "FAIL thread-default: $got threads per process, want $want"; fails=$((fails+1))
else passes=$((passes+1)); fi
# Parameter server: optimizer state lives on the owners; a checkpoint gathers it, a resume continues.
out=$("$bin" train "${common[@]}" --nproc 2 --set parallel.grad_sync=ps --set train.steps=20 --set runs_dir=$work/ps 2>&1) &&
out=$("$bin" train --resume "$work/ps/fmnist-mlp" --set train.steps=30 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 20"; then
  echo "FAIL ps-resume: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
same_weights ps-resume-weights "$work/ps/fmnist-mlp" "$work/dp1/fmnist-mlp" --rtol 1e-4 --atol 1e-5
# A rank killed (SIGKILL) while writing its shard of the step-10 checkpoint:
# the run fails, step 5 stays the newest complete checkpoint, and a resume
# (as one process: the parameter servers' optimizer-state shards are read by name) continues from it.
out=$(TRIDENT_TEST_KILL_IN_SHARD=1:10 timeout 120 "$bin" train "${common[@]}" --nproc 2 --set parallel.grad_sync=ps \
      --set train.steps=20 --set checkpoint.every=5 --set runs_dir=$work/crash 2>&1); rc=$?
ck=$work/crash/fmnist-mlp/checkpoints
if [ $rc -eq 0 ] || [ ! -s "$ck/step-5/manifest.json" ] || [ -e "$ck/step-10" ] || [ ! -d "$ck/.step-10.partial" ]; then
  echo "FAIL crash-mid-shard: exit $rc: $(ls -a "$ck" 2>&1): $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$(timeout 120 "$bin" train --resume "$work/crash/fmnist-mlp" --set parallel.devices=1 --set train.steps=15 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 5" || [ ! -s "$ck/step-15/manifest.json" ]; then
  echo "FAIL crash-resume: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
finish
