#!/usr/bin/env bash
# Restarts (`--max-restarts`, docs/reliability.md): a worker killed with
# SIGKILL mid-run makes the launcher start every worker again from the newest
# complete checkpoint, and the run ends with the weights of a run that was
# never interrupted; after N restarts it gives up naming every failure.
# Workers kill themselves through TRIDENT_TEST_KILL_AT=RANK:STEP[:every].
. "$(dirname "$0")/lib.sh" "$@"  # bin, src, work, counters; check, same_weights
cfg=$src/examples/fmnist-mlp.yaml
common=(--config "$cfg" --set train.steps=24 --set train.epochs=null --set train.threads=1 --set data.train_size=2048
        --set data.test_size=200 --set train.eval=false --set checkpoint.every=5 --set parallel.timeout_s=10)
# restarted NAME KILL_AT SAYS RUN_ARGS...: the run whose rank:step KILL_AT is killed once recovers with
# one restart, rank 0 saying SAYS when it starts again.
restarted() {
  local name=$1 kill_at=$2 says=$3 out err rc; shift 3
  out=$(TRIDENT_TEST_KILL_AT=$kill_at timeout 300 "$bin" train "${common[@]}" "$@" --max-restarts 1 \
        --set runs_dir="$work/$name" 2>"$work/$name.err"); rc=$?
  err=$(cat "$work/$name.err")
  if [ $rc -ne 0 ] || ! printf '%s' "$err" | grep -q "launch: rank ${kill_at%%:*} was killed by signal 9" ||
     ! printf '%s' "$err" | grep -q "launch: restart 1 of 1: starting all" ||
     ! printf '%s' "$out" | grep -q "\[rank 0\] restart 1: .*$says"; then
    echo "FAIL $name: exit $rc: $out $err"; fails=$((fails+1)); else passes=$((passes+1)); fi
}
# Data parallel on 2 processes: killed after step 12, continues from step 10.
"$bin" train "${common[@]}" --nproc 2 --set runs_dir="$work/dp" >/dev/null 2>&1
restarted dp-restart 1:12 "continuing from the checkpoint of step 10" --nproc 2
same_weights dp-restart-weights "$work/dp/fmnist-mlp" "$work/dp-restart/fmnist-mlp" --rtol 0 --atol 1e-6
# Killed before the first checkpoint: the restart starts over.
restarted dp-restart-early 0:3 "has no complete checkpoint yet; starting over" --nproc 2
same_weights dp-restart-early-weights "$work/dp/fmnist-mlp" "$work/dp-restart-early/fmnist-mlp" --rtol 0 --atol 1e-6
# A 2-stage pipeline: the last stage's rank killed after step 7.
pipe=(--set parallel.devices=2 --set parallel.partitioner=pipedream --set parallel.max_replicas=1 --set parallel.micro_batch=32)
"$bin" train "${common[@]}" "${pipe[@]}" --set runs_dir="$work/pp" >/dev/null 2>&1
restarted pipeline-restart 1:7 "continuing from the checkpoint of step 5" "${pipe[@]}"
same_weights pipeline-restart-weights "$work/pp/fmnist-mlp" "$work/pipeline-restart/fmnist-mlp" --rtol 0 --atol 1e-6
# One process restarts too.
"$bin" train "${common[@]}" --set runs_dir="$work/one" >/dev/null 2>&1
restarted one-restart 0:8 "continuing from the checkpoint of step 5"
same_weights one-restart-weights "$work/one/fmnist-mlp" "$work/one-restart/fmnist-mlp" --rtol 0 --atol 1e-6
# A rank that dies on every start: the launcher gives up after 2 restarts, naming each failure.
out=$(TRIDENT_TEST_KILL_AT=1:2:every timeout 300 "$bin" train "${common[@]}" --nproc 2 --max-restarts 2 \
      --set runs_dir="$work/give-up" 2>&1); rc=$?
if [ $rc -ne 1 ] || ! printf '%s' "$out" | grep -q "gave up after 2 restarts; failures: start 1: rank 1 was killed by signal 9" ||
   [ "$(printf '%s' "$out" | grep -o "start [0-9]: rank 1 was killed by signal 9" | sort -u | wc -l)" -ne 3 ]; then
  echo "FAIL give-up: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
# A full disk while checkpointing: exit 1 with one line naming the shard, and the previous
# checkpoint stays complete and readable. Needs a small tmpfs (root); skipped, saying so, without one.
small=$work/small; mkdir -p "$small"
if mount -t tmpfs -o size=5m tmpfs "$small" 2>/dev/null; then
  trap 'umount "$small" 2>/dev/null; rm -rf "$work"' EXIT
  err=$(timeout 120 "$bin" train "${common[@]}" --set train.steps=30 --set checkpoint.keep=3 --set runs_dir="$small" 2>&1 >/dev/null)
  rc=$?
  out=$("$bin" export "$small/fmnist-mlp" --out "$work/step5.pt" 2>&1); erc=$?
  if [ $rc -ne 1 ] || [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ] ||
     ! printf '%s' "$err" | grep -q "cannot write checkpoint shard .*/.step-10.partial/rank-0.bin: disk full" ||
     [ $erc -ne 0 ] || ! printf '%s' "$out" | grep -q "step 5"; then
    echo "FAIL disk-full: exit $rc: $err; export: exit $erc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
  umount "$small"
else
  echo "SKIP disk-full: cannot mount a tmpfs here (needs root)"
fi
check restarts-negative 2 "--max-restarts -1 must be >= 0" -- train --config "$cfg" --max-restarts -1
check launch-restarts-negative 2 "--max-restarts -1: must be >= 0" -- launch --nproc 2 --max-restarts -1 -- train --config "$cfg"
check restarts-emulate 2 "--max-restarts does not apply to --emulate" -- train --config "$cfg" --max-restarts 1 --emulate summit-v100
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
