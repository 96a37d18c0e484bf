#!/usr/bin/env bash
# Bounded staleness: SSP accuracy against BSP and the read staleness it reports.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
# Bounded staleness (see Note [Staleness]): with s = 2, 3 data-parallel ranks train mlp on Fashion-MNIST
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
finish
