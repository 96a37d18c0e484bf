#!/usr/bin/env bash
# Calibration: `trident calibrate` measures this machine into a cache that `--cluster auto` plans with.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
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
# bf16 profiles exactly where the CPU multiplies bf16 (Note [Calibration]).
bf16 = any(f in open("/proc/cpuinfo").read().split() for f in ("avx512_bf16", "amx_bf16"))
assert ("mlp/tiny/1/bf16" in c["profiles"]) == bf16, ("bf16 profile", bf16, sorted(c["profiles"]))
assert c["calibration"]["matmul_512_bf16_s"] > 0 and c["calibration"]["onednn_isa"], c["calibration"]
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
finish
