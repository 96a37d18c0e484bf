#!/usr/bin/env bash
# End-to-end checks of `trident`: bad input exits 2 with one line naming the
# field and value; a short run trains, checkpoints and resumes.
set -u
bin=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fails=0; passes=0
check() {  # check NAME EXPECTED_RC NEEDLE -- ARGS...
  local name=$1 want=$2 needle=$3; shift 4
  local err rc
  err=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, want $want: $err"; fails=$((fails+1)); return; fi
  if [ "$want" -ne 0 ]; then
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ "$lines" -ne 1 ]; then echo "FAIL $name: want one line, got: $err"; fails=$((fails+1)); return; fi
  fi
  if ! printf '%s' "$err" | grep -qF -- "$needle"; then echo "FAIL $name: '$needle' not in: $err"; fails=$((fails+1)); return; fi
  passes=$((passes+1))
}
cfg=$src/examples/fmnist-mlp.yaml
check missing-config 2 "cannot read" -- train --config "$work/nope.yaml"
check unknown-key 2 "unknown key 'train.epoch'" -- train --config "$cfg" --set train.epoch=1
check wrong-type 2 "train.mini_batch = 'many'" -- train --config "$cfg" --set train.mini_batch=many
check out-of-range 2 "optimizer.lr = '0'" -- train --config "$cfg" --set optimizer.lr=0
check bad-choice 2 "allowed: sgd, adam" -- train --config "$cfg" --set optimizer.name=lbfgs
check missing-data 2 "dataset-fashion-mnist" -- train --config "$cfg" --set data.path=$work/none
check bad-flag 2 "--bogus" -- train --config "$cfg" --bogus
check bad-model 2 "allowed: mlp" -- graph --model resnet
check resume-nothing 1 "does not exist" -- train --config "$cfg" --set runs_dir=$work/r --resume $work/r/none

# A short real run, then resume it to a longer one.
out=$("$bin" train --config "$cfg" --set runs_dir=$work/runs --set name=cli --set train.steps=30 \
      --set train.epochs=null --set data.train_size=2048 --set data.test_size=500 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "test accuracy:"; then
  echo "FAIL short-run: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
[ -s "$work/runs/cli/checkpoint.pt" ] && [ -s "$work/runs/cli/metrics.jsonl" ] && passes=$((passes+1)) || { echo "FAIL run-files"; fails=$((fails+1)); }
out=$("$bin" train --resume "$work/runs/cli" --set train.steps=40 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "resumed at step 30"; then
  echo "FAIL resume: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
out=$("$bin" graph --model mmt --preset paper --out "$work/g.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! grep -q '"trident-graph/1"' "$work/g.json"; then
  echo "FAIL graph: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
