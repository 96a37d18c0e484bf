#!/usr/bin/env bash
# Sampled GraphSAGE beside DGL (docs/benchmarks/gnn.md), on one R-MAT graph
# of NODES nodes (mean degree 16, 128 features, 16 classes, 20,480 training
# nodes: an epoch is 20 batches of 1024) written once as a graph directory:
#  1. neighbour sampling alone, fan-outs 15,10,5, batches of 1024 (the same
#     seeds), 1 and 2 threads: trident's bench_sampler against DGL's
#     NeighborSampler.sample_blocks;
#  2. one training epoch of 3-layer GraphSAGE-mean, hidden 256, Adam, dropout
#     0.5, on 2 threads in one process: `trident train` (sage3, model.fanouts;
#     wall_s of the epoch from metrics.jsonl, loading excluded) against DGL's
#     DataLoader + SAGEConv loop (bench/dgl_sampled.py).
# ROUNDS alternating rounds of each; prints Markdown tables with the medians.
#   bash bench/run_sampled.sh [ROUNDS] [NODES]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-3}; nodes=${2:-1048576}
dgl=$(bash bench/install-dgl.sh | tail -1)
cmake --build "${BUILD:-build}" --target bench_sampler trident >/dev/null
sampler=${BUILD:-build}/bench/bench_sampler bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
src="rmat:nodes=$nodes,degree=16,classes=16,features=128,train_per_class=1280,val=1000,test=1000"
mkdir "$work/g"
"$sampler" "$src" 15,10,5 1024 1 1 "$work/g" > "$work/write.json"
edges=$(field edges < "$work/write.json")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $src ($edges directed edges); $(date -u +%F)"
echo "DGL $("$dgl" -c 'import dgl; print(dgl.__version__)' 2>/dev/null) on torch $("$dgl" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
echo
echo "| threads | trident sampled edges/s | DGL sampled edges/s | ratio | edges per batch (trident / DGL) | input nodes per batch (trident / DGL) |"
echo "|---|---|---|---|---|---|"
for t in 1 2; do
  ours=() theirs=()
  for r in $(seq "$rounds"); do
    a=$("$sampler" "$work/g" 15,10,5 1024 20 "$t"); ours+=("$(echo "$a" | field sampled_edges_per_s)")
    b=$("$dgl" bench/dgl_sampled.py sample "$work/g" 15,10,5 1024 20 "$t" 2>/dev/null); theirs+=("$(echo "$b" | field sampled_edges_per_s)")
  done
  mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
  printf '| %s | %.3g | %.3g | %.2f | %s / %s | %s / %s |\n' "$t" "$mo" "$mt" "$(echo "$mo / $mt" | bc -l)" \
    "$(echo "$a" | field edges_per_batch)" "$(echo "$b" | field edges_per_batch)" \
    "$(echo "$a" | field input_nodes_per_batch)" "$(echo "$b" | field input_nodes_per_batch)"
done
cat > "$work/sage.yaml" <<YAML
name: sage
model: {name: sage3, graph: "$work/g", fanouts: [15, 10, 5], hidden: 256}
data: {name: graph}
train: {epochs: 1, mini_batch: 1024, threads: 2, eval: false, log_every: 1000}
optimizer: {name: adam, lr: 0.003}
checkpoint: {every: 0}
runs_dir: $work/runs
YAML
echo
echo "| system | epoch s (20 steps of 1024, 2 threads) | rounds |"
echo "|---|---|---|"
ours=() theirs=()
for r in $(seq "$rounds"); do
  "$bin" train --config "$work/sage.yaml" --set train.seed=$r --set name=sage$r > "$work/train.log" 2>&1 ||
    { echo "trident train failed: $(tail -3 "$work/train.log")" >&2; exit 1; }
  ours+=("$(grep '"loss"' "$work/runs/sage$r/metrics.jsonl" | tail -1 | field wall_s)")
  b=$("$dgl" bench/dgl_sampled.py train "$work/g" 15,10,5 1024 256 2 $r 2>/dev/null); theirs+=("$(echo "$b" | field epoch_s)")
done
echo "| trident $(git rev-parse --short HEAD) | $(median "${ours[@]}") | ${ours[*]} |"
echo "| DGL | $(median "${theirs[@]}") | ${theirs[*]} |"
