#!/usr/bin/env bash
# The planner on the command line: plan, simulate, profile, and one-line errors for bad input.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
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
# See Note [Replica shares]: shares that do not sum to the stage's micro-batch.
python3 - "$work/p.json" "$work/bad-shares.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
st = p["stages"][0]
st["shares"] = [1] * len(st["devices"])  # micro_batch 16 or more: a row each does not sum to it
json.dump(p, open(sys.argv[2], "w"))
PY
check simulate-bad-shares 2 "sum to" -- simulate --plan "$work/bad-shares.json"

# Mixed clusters (docs/heterogeneous.md): a plan by class, and bad files named by field.
out=$("$bin" plan --model candle_uno --preset paper --cluster mixed-h200-a100 --devices 8 --mini-batch 128 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "placements (mixed cluster): as-average" ||
   ! printf '%s' "$out" | grep -q "H200-SXM-141GB, "; then
  echo "FAIL plan-mixed: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
cat > "$work/mixed.yaml" <<'YAML'
name: lab
classes:
  - {name: V100, float32_tflops: 15.7, memory_gib: 16, memory_bandwidth_gbs: 900, half_efficiency_gflop: 1, launch_us: 10}
  - {name: A100, float32_tflops: 19.5, memory_gib: 80, memory_bandwidth_gbs: 2039, half_efficiency_gflop: 2, launch_us: 8}
hosts:
  - {devices: {V100: 2}, link: {latency_us: 5, bandwidth_gbs: 50}}
  - {devices: {A100: 2}, link: {latency_us: 3, bandwidth_gbs: 300}}
  - {devices: {A100: 2}, link: {latency_us: 3, bandwidth_gbs: 300}}
links:
  - {from: 0, to: 1, latency_us: 10, bandwidth_gbs: 12.5}
  - {from: 0, to: 2, latency_us: 10, bandwidth_gbs: 12.5}
YAML
check plan-mixed-missing-link 2 "links: no link between host 1 and host 2" -- \
  plan --model mmt --cluster "$work/mixed.yaml" --devices 4 --mini-batch 8
sed -i 's/{A100: 2}, link: {latency_us: 3, bandwidth_gbs: 300}}$/{TPU: 2}}/' "$work/mixed.yaml"
check plan-mixed-unknown-class 2 "'hosts[1].devices.TPU' names an unknown class; the classes are V100, A100" -- \
  plan --model mmt --cluster "$work/mixed.yaml" --devices 4 --mini-batch 8
check plan-placement-one-kind 2 "placement 'one-class' applies to a mixed cluster" -- \
  plan --model mmt --cluster summit-v100 --devices 4 --mini-batch 8 --placement one-class

# Profile this machine, then plan with the measured op times.
out=$("$bin" profile --model mmt --micro-batches 1,4 --repeats 2 --out "$work/profile.json" 2>&1) &&
out=$("$bin" plan --model mmt --cluster cpu-local --devices 2 --mini-batch 32 --profile "$work/profile.json" 2>&1); rc=$?
if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -q "samples/s"; then
  echo "FAIL profile-plan: exit $rc: $out"; fails=$((fails+1)); else passes=$((passes+1)); fi
check profile-bad-rows 2 "must be ascending" -- profile --model mlp --micro-batches 4,2 --out "$work/p2.json"
check plan-wrong-profile 2 "is not in it" -- plan --model mlp --devices 2 --mini-batch 8 --profile "$work/profile.json"
# A captured model whose program is malformed is refused where it enters, naming the op (see Note [ATen programs]).
python3 - "$src/fuzz/corpus/model/regressor-aten.json" "$work/bad-program.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
next(o for o in g["ops"] if o["name"] == "addmm")["attrs"]["calls"][1]["args"][0] = {"float": "x"}
json.dump(g, open(sys.argv[2], "w"))
PY
check plan-bad-program 2 "op 'addmm' (aten) call 1 argument 0: float \"x\" is not one trident reads" -- \
  plan --model-file "$work/bad-program.json" --cluster cpu-local --devices 2 --mini-batch 8
check graph-bad-program 2 "op 'addmm' (aten) call 1 argument 0" -- graph --model-file "$work/bad-program.json"
finish
