#!/usr/bin/env bash
# What sampled GraphSAGE pulls (docs/benchmarks/gnn.md): on 1, 2 and 4
# processes, the feature bytes a step per process that `trident plan`
# estimates (Note [Row store]; 8 batches sampled with a generator of its
# own) against what rank 0's pulls received (metrics.jsonl `sampled`,
# averaged over STEPS steps), the input rows and the share pulled from
# other processes, and each process's share of the features and resident
# memory at the end. sage2, fan-outs 10,5, 512 seed nodes a step, one
# thread per process, on an R-MAT graph (random node order, so a process
# owns about 1/P of any neighbourhood).
#   bash bench/run_sampled_bytes.sh [NODES] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-262144}; steps=${2:-20}
bin=${BUILD:-build}/tools/trident/trident
cmake --build "${BUILD:-build}" --target trident >/dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
src="rmat:nodes=$nodes,degree=16,classes=8,features=64,train_per_class=4096,val=1000,test=1000"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $src; sage2, fan-outs 10,5, 512 seeds a step; $(date -u +%F)"
echo
echo "| processes | input rows a pull | from others (plan / measured) | feature bytes a step per process (plan / measured) | measured / plan | features held per process | resident at end (rank 0) |"
echo "|---|---|---|---|---|---|---|"
for p in 1 2 4; do
  plan=$("$bin" plan --model sage2 --graph "$src" --fanouts 10,5 --devices $p --mini-batch 512 --micro-batch 512 \
         --partitioner dp --cluster cpu-local | grep "^sampled mini-batches")
  cat > "$work/bytes.yaml" <<YAML
model: {name: sage2, graph: "$src", fanouts: [10, 5]}
data: {name: graph}
train: {mini_batch: 512, steps: $steps, threads: 1, eval: false, log_every: 5}
optimizer: {name: adam, lr: 0.003}
checkpoint: {every: 0}
YAML
  "$bin" train --config "$work/bytes.yaml" --set name=bytes$p --set runs_dir=$work/runs --nproc $p \
    > "$work/train$p.log" 2>&1 || { echo "train failed: $(tail -3 "$work/train$p.log")" >&2; exit 1; }
  python3 - "$plan" "$work/runs/bytes$p/metrics.jsonl" "$p" <<'PY'
import json, re, sys
plan, metrics, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
rows = float(re.search(r"about (\d+) input rows a pull", plan).group(1))
remote = re.search(r", (\d+) \(\d+%\) from the", plan)
m = re.search(r": ([\d.]+) (B|KiB|MiB|GiB) of features a step per process", plan)
plan_bytes = float(m.group(1)) * units[m.group(2)] if m else 0.0
lines = [json.loads(l) for l in open(metrics)]
s = [l["sampled"] for l in lines if "sampled" in l][1:] or [l["sampled"] for l in lines if "sampled" in l]  # the first window pays the first pulls' setup alike
measured = sum(x["feature_bytes"] for x in s) / len(s)
local = sum(x["rows_local"] for x in s) / len(s); far = sum(x["rows_remote"] for x in s) / len(s)
mem = [l["memory"] for l in lines if "memory" in l][-1]
held = mem[0].get("feature_bytes_held", 0); rss = mem[0].get("rss_bytes", 0)
mib = lambda b: f"{b / 2**20:.1f} MiB"
ratio = f"{measured / plan_bytes:.3f}" if plan_bytes else "-"
print(f"| {p} | {rows:.0f} / {local + far:.0f} | {remote.group(1) if remote else 0} / {far:.0f} | "
      f"{mib(plan_bytes) if plan_bytes else '0'} / {mib(measured)} | {ratio} | {mib(held)} | {mib(rss)} |")
PY
done
