#!/usr/bin/env bash
# End-to-end checks of `trident`: bad input exits 2 with one line naming the
# field and value; a short run trains, checkpoints and resumes.
. "$(dirname "$0")/lib.sh" "$@"  # bin, src, work, counters; check, same_weights
cfg=$src/examples/fmnist-mlp.yaml
check missing-config 2 "cannot read" -- train --config "$work/nope.yaml"
check unknown-key 2 "unknown key 'train.epoch'" -- train --config "$cfg" --set train.epoch=1
check wrong-type 2 "train.mini_batch = 'many'" -- train --config "$cfg" --set train.mini_batch=many
check out-of-range 2 "optimizer.lr = '0'" -- train --config "$cfg" --set optimizer.lr=0
check bad-choice 2 "allowed: sgd, adam" -- train --config "$cfg" --set optimizer.name=lbfgs
check missing-data 2 "dataset-fashion-mnist" -- train --config "$cfg" --set data.path=$work/none
check bad-flag 2 "--bogus" -- train --config "$cfg" --bogus
check bad-model 2 "allowed: mlp" -- graph --model resnet
check resume-nothing 2 "no such run directory" -- train --config "$cfg" --set runs_dir=$work/r --resume $work/r/none
check export-nothing 2 "not a run directory" -- export $work/r/none
# train.device=cuda: the CPU build says how to get the CUDA build; the CUDA build on a machine without a GPU
# names the device it did not find (Note [Placement]). Either way before any rendezvous or data is read.
if "$bin" version | grep -q "CPU build"; then
  check cuda-on-cpu-build 2 "train.device: 'cuda' needs trident's CUDA build" -- train --config "$cfg" --set train.device=cuda
elif [ "$("$bin" version | sed -n 's/.*CUDA devices visible: \([0-9]*\).*/\1/p')" = 0 ]; then
  check cuda-without-gpu 2 "train.device: 'cuda', but this process sees no CUDA device" -- train --config "$cfg" --set train.device=cuda
fi
check bad-device 2 "allowed: cpu, cuda" -- train --config "$cfg" --set train.device=tpu

# A short real run, then resume it to a longer one.
short=(--config "$cfg" --set train.epochs=null --set data.train_size=2048 --set data.test_size=500 --set train.threads=1)
out=$("$bin" train "${short[@]}" --set runs_dir=$work/runs --set name=cli --set train.steps=30 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "test accuracy:"; then
  echo "FAIL short-run: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
[ -s "$work/runs/cli/checkpoints/step-30/manifest.json" ] && [ -s "$work/runs/cli/metrics.jsonl" ] && passes=$((passes+1)) || { echo "FAIL run-files"; fails=$((fails+1)); }
out=$("$bin" train --resume "$work/runs/cli" --set train.steps=40 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 30"; then
  echo "FAIL resume: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# The resumed run's weights and Adam state equal a run that never stopped.
"$bin" train "${short[@]}" --set runs_dir=$work/runs --set name=straight --set train.steps=40 >/dev/null 2>&1
same_weights resume-equals-straight "$work/runs/cli" "$work/runs/straight" --optimizer --rtol 0 --atol 0
check diff-nothing 2 "does not exist" -- diff "$work/runs/none" "$work/runs/cli"
# diff itself: different runs differ (exit 1).
"$bin" diff "$work/runs/cli/checkpoints/step-30" "$work/runs/cli" >/dev/null 2>&1
[ $? -eq 1 ] && passes=$((passes+1)) || { echo "FAIL diff-differs: steps 30 and 40 compared equal"; fails=$((fails+1)); }
# Ctrl-C: a checkpoint is written, exit 130; the resumed run equals a straight one.
"$bin" train "${short[@]}" --set runs_dir=$work/runs --set name=int --set train.steps=100000 --set train.log_every=5 \
  > "$work/int.out" 2>&1 &
int_pid=$!
for _ in $(seq 300); do grep -q "step 10/" "$work/int.out" && break; sleep 0.2; done
kill -INT $int_pid; wait $int_pid; rc=$?
int_step=$(ls "$work/runs/int/checkpoints" 2>/dev/null | grep -o "^step-[0-9]*$" | grep -o "[0-9]*$" | sort -n | tail -1)
if [ $rc -ne 130 ] || [ -z "$int_step" ] || [ "$int_step" -lt 10 ]; then
  echo "FAIL interrupt: exit $rc (want 130), checkpoint step '${int_step}': $(tail -3 "$work/int.out")"; fails=$((fails+1))
else
  passes=$((passes+1))
  "$bin" train --resume "$work/runs/int" --set train.steps=$((int_step + 5)) >/dev/null 2>&1
  "$bin" train "${short[@]}" --set runs_dir=$work/runs --set name=int-straight --set train.steps=$((int_step + 5)) \
    --set train.log_every=5 >/dev/null 2>&1
  same_weights interrupt-resume "$work/runs/int" "$work/runs/int-straight" --optimizer --rtol 0 --atol 0
fi
# Export: plain PyTorch (Debian's python3-torch, weights_only as 2.6+ by default) loads the weights into the
# reference model of bench/ and reaches trident's test accuracy.
out=$("$bin" export "$work/runs/cli" --out "$work/cli.pt" 2>&1); rc=$?
if [ $rc -ne 0 ]; then echo "FAIL export: exit $rc: $out"; fails=$((fails+1)); else
  theirs=$(/usr/bin/python3 "$src/bench/pytorch_eval.py" "$work/cli.pt" mlp 500 2>&1)
  ours=$(grep test_accuracy "$work/runs/cli/metrics.jsonl" | tail -1)
  if /usr/bin/python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); sys.exit(0 if abs(a["test_accuracy"]-b["test_accuracy"]) <= 1/500 + 1e-9 and a["parameters"] == 6 else 1)' "$theirs" "$ours"; then
    passes=$((passes+1)); else echo "FAIL export-pytorch: $theirs vs $ours"; fails=$((fails+1)); fi
fi
out=$("$bin" graph --model mmt --preset paper --out "$work/g.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! grep -q '"trident-graph/1"' "$work/g.json"; then
  echo "FAIL graph: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi


# Planner: plan, simulate, and one-line errors for bad input.
check plan-bad-model 2 "allowed: mlp" -- plan --model resnet --devices 2 --mini-batch 8
check plan-bad-cluster 2 "unknown name 'summit'" -- plan --model mmt --cluster summit --devices 2 --mini-batch 8
check plan-zero-devices 2 "devices must be >= 1, got 0" -- plan --model mmt --devices 0 --mini-batch 8
check plan-indivisible 2 "micro-batch 3 must divide the mini-batch 8" -- plan --model mmt --devices 2 --mini-batch 8 --micro-batch 3
check plan-partitioner 2 "use graphpipe, pipedream, dp" -- plan --model mmt --devices 2 --mini-batch 8 --partitioner piper
check plan-no-fit 2 "no feasible plan" -- plan --model mmt --preset paper --cluster summit-v100 --devices 1 --mini-batch 8 --device-memory-gb 0.05
check plan-profile 2 "cannot read" -- plan --model mmt --devices 2 --mini-batch 8 --profile $work/none.json
out=$("$bin" plan --model candle_uno --preset paper --cluster summit-v100 --devices 8 --mini-batch 128 --out "$work/p.json" --dot "$work/p.dot" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "samples/s" || ! grep -q '"trident-plan/1"' "$work/p.json" || ! grep -q "digraph" "$work/p.dot"; then
  echo "FAIL plan: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$("$bin" simulate --plan "$work/p.json" --trace "$work/t.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "utilisation" || ! grep -q '"traceEvents"' "$work/t.json"; then
  echo "FAIL simulate: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# A plan file that fails validation: a device used twice.
python3 - "$work/p.json" "$work/bad.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["stages"][1]["devices"] = p["stages"][0]["devices"][:1]
json.dump(p, open(sys.argv[2], "w"))
PY
check simulate-bad-plan 2 "is used by stage 0 and stage 1" -- simulate --plan "$work/bad.json"
check simulate-missing 2 "cannot read" -- simulate --plan "$work/none.json"

# Profile this machine, then plan with the measured op times.
out=$("$bin" profile --model mmt --micro-batches 1,4 --repeats 2 --out "$work/profile.json" 2>&1) &&
out=$("$bin" plan --model mmt --cluster cpu-local --devices 2 --mini-batch 32 --profile "$work/profile.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "samples/s"; then
  echo "FAIL profile-plan: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
check profile-bad-rows 2 "must be ascending" -- profile --model mlp --micro-batches 4,2 --out "$work/p2.json"
check plan-wrong-profile 2 "is not in it" -- plan --model mlp --devices 2 --mini-batch 8 --profile "$work/profile.json"

# Calibration: `trident calibrate` measures this machine into its cache;
# `--cluster auto` then plans with the measured op times and links.
cache=$work/cache
out=$(TRIDENT_CACHE_DIR=$cache "$bin" plan --model mlp --cluster auto --devices 2 --mini-batch 64 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "not calibrated"; then
  echo "FAIL auto-uncalibrated: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$(TRIDENT_CACHE_DIR=$cache "$bin" calibrate --models mlp --repeats 1 --max-processes 2 2>&1); rc=$?
ok=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert "mlp/tiny/1" in c["profiles"], "no mlp profile"
assert c["intra_node"]["measured"]["allreduce"]["2"], "no all-reduce table"
assert c["intra_node"]["measured"]["alltoall"]["2"], "no alltoall table (the PS is priced by it)"
assert c["cores_per_node"] >= 1
t = c["core_throughput"]
assert len(t) == 2 and t[0] == 1 and 0 < t[1] <= 2, t
print("ok")' $cache/calibration-*.json 2>&1)
if [ $rc -ne 0 ] || [ "$ok" != ok ]; then echo "FAIL calibrate: exit $rc: $ok: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$(TRIDENT_CACHE_DIR=$cache "$bin" plan --model mlp --cluster auto --devices 2 --mini-batch 64 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "cluster auto: calibrated"; then
  echo "FAIL auto-calibrated: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$(TRIDENT_CACHE_DIR=$cache "$bin" calibrate --if-missing 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "this machine is calibrated"; then
  echo "FAIL calibrate-if-missing: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
check calibrate-bad-model 2 "nosuch" -- calibrate --models nosuch

# Data parallel: 2 processes train to the same weights as one. The plan is pinned (parallel.cluster: the
# hybrid rule picks each layer's method by the cluster's costs; Note [Stable trajectories]). Adam (lr 1e-3,
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
# Thread defaults (Note [Thread defaults]): with train.threads left at 0, each
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
# Bounded staleness (Note [Staleness]): with s = 2, 3 data-parallel ranks train mlp on Fashion-MNIST
# (3 epochs of 96-sample steps, Adam with a cosine lr) to within 1.5 points of BSP's test accuracy, and
# every metrics line's read_staleness is within [0, 2]. Measured on an idle machine: 0.22-0.37 points
# below BSP (issue 29's target is 0.5; docs/benchmarks.md, "Bounded staleness and accuracy"); the bound
# is looser because under make test's load reads can miss up to 2 updates, which costs 1.2 points
# (bench/ssp_delay.py). A config asking staleness of a pipeline is refused.
scommon=(--config "$cfg" --set train.steps=1875 --set train.epochs=null --set train.threads=1 --set data.test_size=0
         --set train.mini_batch=96 --set parallel.grad_sync=ps --set optimizer.schedule=cosine --set checkpoint.every=0
         --set train.log_every=125)
accuracy() { python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if "test_accuracy" in l][-1]["test_accuracy"])' "$1/fmnist-mlp/metrics.jsonl" 2>&1; }
"$bin" train "${scommon[@]}" --nproc 3 --set runs_dir=$work/bsp >/dev/null 2>&1
out=$("$bin" train "${scommon[@]}" --nproc 3 --set parallel.staleness=2 --set runs_dir=$work/ssp 2>&1); rc=$?
a=$(accuracy "$work/bsp"); b=$(accuracy "$work/ssp")
stale=$(python3 -c 'import json, sys; print(" ".join(str(json.loads(l)["read_staleness"]) for l in open(sys.argv[1]) if "samples_per_s" in l))' "$work/ssp/fmnist-mlp/metrics.jsonl" 2>&1)
if [ $rc -ne 0 ] || ! python3 -c 'import sys; a, b = map(float, sys.argv[1:3]); st = list(map(float, sys.argv[3].split()))
assert abs(a - b) <= 0.015 and st and all(0 <= x <= 2 for x in st), (a, b, st)' "$a" "$b" "$stale"; then
  echo "FAIL ssp-accuracy: exit $rc: BSP $a, SSP $b, read staleness $stale: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
echo "ssp-accuracy: BSP $a, s=2 $b, read staleness $stale"
check ssp-pipeline 2 "parallel.staleness = '2': applies to data-parallel replicas" -- train --config "$cfg" --nproc 2 \
  --set parallel.grad_sync=ps --set parallel.staleness=2 --set parallel.partitioner=pipedream
check dp-indivisible 2 "must divide train.mini_batch = 128" -- train --config "$cfg" --nproc 3
# A worker of another job at this job's rendezvous (same MASTER_PORT) is refused, naming both jobs.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRIDENT_JOB_ID=job-a timeout 60 "$bin" train --config "$cfg" \
  --set parallel.devices=2 --set parallel.timeout_s=5 --set runs_dir=$work/job-a >/dev/null 2>&1 &
job_a=$!
export RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRIDENT_JOB_ID=job-b
check other-job 2 "rank 1 of job 'job-b' reached the rendezvous of job 'job-a' at 127.0.0.1:$port" -- \
  train --config "$cfg" --set parallel.devices=2 --set parallel.timeout_s=5 --set runs_dir=$work/job-b
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT TRIDENT_JOB_ID
kill $job_a 2>/dev/null; wait $job_a 2>/dev/null
check launch-nothing 2 "give the subcommand after --" -- launch --nproc 2
check launch-zero 2 "must be >= 1" -- launch --nproc 0 -- train --config "$cfg"
# kill_rank NAME RANKS STEP MIN -- TRAIN ARGS: starts a run on RANKS processes and kills rank 1 once
# step STEP is logged; the launcher must exit within 20 s naming it, and at least MIN of the other
# ranks must say that rank 1 stopped responding (possibly among others: the launcher stops the
# rest once rank 1 is gone, so a late diagnosis may find, say, "ranks 1, 2 stopped responding").
kill_rank() {
  local name=$1 n=$2 step=$3 min=$4; shift 5
  "$bin" train "$@" > "$work/$name.out" 2> "$work/$name.err" &
  local launcher=$! pid="" rc took start
  for _ in $(seq 300); do  # at most 60 s
    pid=$(grep -o "rank 1/$n on .* (pid [0-9]*" "$work/$name.out" | grep -o "[0-9]*$")
    [ -n "$pid" ] && grep -q "step $step/" "$work/$name.out" && break; sleep 0.2
  done
  if [ -z "$pid" ] || ! grep -q "step $step/" "$work/$name.out"; then
    kill -9 $launcher 2>/dev/null; pkill -9 -P $launcher 2>/dev/null; wait $launcher 2>/dev/null
    echo "FAIL $name: rank 1 or step $step never appeared: $(tail -3 "$work/$name.out" "$work/$name.err")"
    fails=$((fails+1)); return
  fi
  start=$SECONDS; kill -9 "$pid"
  # The launcher must exit within 20 s; after 30 it is killed and the check fails.
  for _ in $(seq 150); do kill -0 $launcher 2>/dev/null || break; sleep 0.2; done
  kill -9 $launcher 2>/dev/null; wait $launcher; rc=$?; took=$((SECONDS - start))
  if [ $rc -eq 0 ] || [ $took -gt 20 ] || ! grep -q "launch: rank 1 was killed by signal 9" "$work/$name.err" ||
     [ "$(grep -cE "ranks? ([0-9]+, )*1(, [0-9]+)* stopped responding" "$work/$name.err")" -lt "$min" ]; then
    echo "FAIL $name: exit $rc after ${took}s: $(cat "$work/$name.err")"; fails=$((fails+1)); else passes=$((passes+1)); fi
}
# Killing one of 3 data-parallel ranks: the other two name it.
kill_rank kill-rank 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill --set parallel.timeout_s=5 --set train.log_every=10
# The same with rank 2 starting its diagnosis 4 s late (as on a loaded machine): rank 0, which hosts the
# store, stays until rank 2 has diagnosed (Note [Rank 0 stays for the diagnosis]), so both still name rank 1.
export TRIDENT_TEST_DIAGNOSE_DELAY=2:4000
kill_rank kill-rank-late 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill-late --set parallel.timeout_s=5 --set train.log_every=10
unset TRIDENT_TEST_DIAGNOSE_DELAY
# The same under bounded staleness, where the fast ranks do not wait for rank 1 every step.
kill_rank kill-rank-ssp 3 20 2 -- --config "$cfg" --nproc 3 --set train.mini_batch=96 --set train.steps=100000 \
  --set train.epochs=null --set train.threads=1 --set runs_dir=$work/kill-ssp --set parallel.timeout_s=5 --set train.log_every=10 \
  --set parallel.grad_sync=ps --set parallel.staleness=2


# Graph pipelines: graphpipe plans under two cluster presets (cpu-local: 2 stages x 2 replicas;
# summit-v100: 4 branch stages) and a pipedream plan (4 stages, gpipe) on 4 processes train to the
# weights of one process; the report reads a run. Note [Stable trajectories]: SGD with momentum at a
# constant lr 0.05, where 12 steps end within 1.5e-7 of one process (SkylakeX kernels; 7.7e-7 on
# Prescott's) against atol 1e-5 + rtol 1e-4. Adam was not stable here: it turns the rounding of a
# near-zero gradient summed over other row splits into a step of up to lr (9.5e-5 measured).
icfg=$src/examples/fmnist-inception.yaml
pcommon=(--config "$icfg" --set train.steps=12 --set train.epochs=null --set train.mini_batch=64 --set parallel.micro_batch=16
         --set data.train_size=2048 --set data.test_size=500 --set train.log_every=4 --set checkpoint.every=0
         --set train.profile_ops=true --set optimizer.name=sgd --set optimizer.lr=0.05 --set optimizer.momentum=0.9
         --set optimizer.schedule=constant --set optimizer.warmup_steps=0)
"$bin" train "${pcommon[@]}" --set parallel.devices=1 --set runs_dir=$work/pp1 >/dev/null 2>&1
for variant in "graphpipe 2 auto cpu-local" "graphpipe 2 auto summit-v100" "pipedream 1 gpipe cpu-local"; do
  set -- $variant
  name=$1; [ "$4" = summit-v100 ] && name=$1-summit
  out=$("$bin" train "${pcommon[@]}" --set parallel.devices=4 --set parallel.partitioner=$1 --set parallel.max_replicas=$2 \
        --set parallel.schedule=$3 --set parallel.cluster=$4 --set runs_dir=$work/pp-$name 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -q "$1 plan of"; then
    echo "FAIL pipeline-$name: exit $rc: $out"; fails=$((fails+1)); fi
  same_weights pipeline-$name "$work/pp1/fmnist-inception" "$work/pp-$name/fmnist-inception" --rtol 1e-4 --atol 1e-5
done
# The two graphpipe checks mean two plans (contract 14: they must not depend on which machine plans them).
layout() { python3 -c 'import json,sys; print([(len(s["ops"]), len(s["devices"])) for s in json.load(open(sys.argv[1]))["stages"]])' "$1"; }
a=$(layout "$work/pp-graphpipe/fmnist-inception/plan.json"); b=$(layout "$work/pp-graphpipe-summit/fmnist-inception/plan.json")
if [ "$a" = "$b" ]; then echo "FAIL pipeline-two-plans: cpu-local and summit-v100 planned alike: $a"; fails=$((fails+1)); else passes=$((passes+1)); fi
run=$work/pp-graphpipe/fmnist-inception
out=$("$bin" report "$run" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "bubble" || [ ! -s "$run/timeline.svg" ] || [ ! -s "$run/report.html" ] ||
   [ "$(grep -o '"pid":[0-9]*' "$run/trace.json" | sort -u | wc -l)" -ne 4 ]; then
  echo "FAIL report: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# train.profile_ops: ops.json holds every rank's op self times over steps 2-12; every rank ran
# convolutions, and no rank's ops add up to more than its steps took.
if ! python3 - "$run/ops.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["steps"] == 11 and [r["rank"] for r in d["ranks"]] == [0, 1, 2, 3], (d["steps"], d["ranks"])
for r in d["ranks"]:
    ops = {o["op"]: o for o in r["ops"]}
    assert ops["aten::convolution"]["calls_per_step"] > 0, r["rank"]
    assert 0 < r["op_self_ms_per_step"] <= r["step_ms"], r
    assert abs(sum(o["self_ms_per_step"] for o in r["ops"]) - r["op_self_ms_per_step"]) < 1e-6, r["rank"]
PY
then echo "FAIL profile-ops: $(head -c 300 "$run/ops.json")"; fails=$((fails+1)); else passes=$((passes+1)); fi
# Checkpoints are keyed by parameter name: the pipeline run resumes as one process.
out=$("$bin" train --resume "$work/pp-graphpipe/fmnist-inception" --set parallel.devices=1 --set train.steps=14 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 12"; then
  echo "FAIL pipeline-resume-single: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# The example's hand-written plan (fan-out to two branch stages, a 2-replica stage) runs as given.
out=$("$bin" train --config "$icfg" --set train.steps=4 --set train.epochs=null --set data.train_size=1024 \
      --set data.test_size=200 --set checkpoint.every=0 --set runs_dir=$work/pp-hand 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "hand-written plan of 4 stages"; then
  echo "FAIL pipeline-hand-plan: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# Each stage its own micro-batch (Note [Micro-batch ratios]): the example's plan with the stem at 16 rows, the
# branch stages at 32 and 64 and the 2-replica join at 128 trains as given; sizes that do not nest exit 2 naming
# the stage.
/usr/bin/python3 - "$src/examples/inception-branches.plan.json" "$work" <<'PY'
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
  --set parallel.max_replicas=1 --set train.steps=100000 --set parallel.timeout_s=5 --set runs_dir=$work/pkill

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
