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

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
