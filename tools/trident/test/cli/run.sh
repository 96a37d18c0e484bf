#!/usr/bin/env bash
# A short run trains, checkpoints, resumes (also after Ctrl-C) and exports to PyTorch; `trident diff` and `graph`.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
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
# Bitwise: both are one process on one thread (train.threads=1) on this machine: the same BLAS decision,
# kernels and shapes; the resumed run only passes through a checkpoint.
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
  # Bitwise: as resume-equals-straight.
  same_weights interrupt-resume "$work/runs/int" "$work/runs/int-straight" --optimizer --rtol 0 --atol 0
fi
# Export: plain PyTorch (the project's, weights_only as 2.6+ by default) loads the weights into the
# reference model of bench/ and reaches trident's test accuracy.
out=$("$bin" export "$work/runs/cli" --out "$work/cli.pt" 2>&1); rc=$?
if [ $rc -ne 0 ]; then echo "FAIL export: exit $rc: $out"; fails=$((fails+1)); else
  theirs=$("$py" "$src/bench/pytorch_eval.py" "$work/cli.pt" mlp 500 2>&1)
  ours=$(grep test_accuracy "$work/runs/cli/metrics.jsonl" | tail -1)
  if "$py" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); sys.exit(0 if abs(a["test_accuracy"]-b["test_accuracy"]) <= 1/500 + 1e-9 and a["parameters"] == 6 else 1)' "$theirs" "$ours"; then
    passes=$((passes+1)); else echo "FAIL export-pytorch: $theirs vs $ours"; fails=$((fails+1)); fi
fi
out=$("$bin" graph --model mmt --preset paper --out "$work/g.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! grep -q '"trident-graph/1"' "$work/g.json"; then
  echo "FAIL graph: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
finish
