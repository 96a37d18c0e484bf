#!/usr/bin/env bash
# Neighbour sampling's throughput (gnn/sampling.h): GraphSAGE's fan-outs
# (15, 10, 5), batches of 1024 seed nodes, on an R-MAT graph of 2^20 nodes
# and mean degree 16 (gnn/rmat.h), on 1 and 2 threads. Prints a Markdown
# table. No peer yet: DGL's CPU sampler is the one issue 56 names.
#   bash bench/run_sampler.sh [NODES] [BATCHES]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
nodes=${1:-1048576}; batches=${2:-20}
cmake --build "${BUILD:-build}" --target bench_sampler >/dev/null  # left out of the default build
bin=${BUILD:-build}/bench/bench_sampler
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; rmat:nodes=$nodes,degree=16; fan-outs 15,10,5; batch 1024; $batches batches"
echo
echo "| threads | graph edges | generate s | sampled edges per batch | input nodes per batch | sampled edges/s | batches/s |"
echo "|---|---|---|---|---|---|---|"
for t in 1 2; do
  out=$("$bin" "rmat:nodes=$nodes,degree=16,classes=8" 15,10,5 1024 "$batches" "$t")
  printf '| %s | %s | %.1f | %s | %s | %.3g | %.1f |\n' "$t" "$(echo "$out" | field edges)" "$(echo "$out" | field generate_s)" \
    "$(echo "$out" | field edges_per_batch)" "$(echo "$out" | field input_nodes_per_batch)" \
    "$(echo "$out" | field sampled_edges_per_s)" "$(echo "$out" | field batches_per_s)"
done
