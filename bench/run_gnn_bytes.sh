#!/usr/bin/env bash
# Bytes per epoch of the two exact modes and of GNNPipe mode (docs/gnn.md), measured: GCNII of
# DEPTHS layers (hidden 64) on GRAPH over 4 processes, once split by layers
# (a pinned plan of 4 stages of equal layer blocks, H0 sent to every stage)
# and once as graph parallelism (partitioner graph: 4 contiguous node
# ranges, halo rows each way at every aggregation). One full-graph epoch is
# one step; the figure is metrics.jsonl's p2p_bytes_per_step (every byte the
# processes sent each other, gradient sync aside), beside what trident plan
# printed for the plan. GNNPipe mode runs the layer split's stages with the
# nodes in CHUNKS chunks (model.graph_chunks, default 8), one per
# micro-batch. GRAPH: cora (the graphdatascience wheel, through
# bench/gnn_cora.py), cora@metis=4 (its nodes in METIS order), or any graph
# source (docs/gnn.md).
#   bash bench/run_gnn_bytes.sh [GRAPH] [DEPTHS]
set -u
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
graph=${1:-cora}; depths=${2:-"2 8 32"}; chunks=${CHUNKS:-8}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
if [[ "$graph" == cora* ]]; then  # cora, or cora@metis=4 (Note [Graphs as data])
  py=$(bash scripts/install-peers.sh | tail -1)
  "$py" -m pip install --quiet --progress-bar off --disable-pip-version-check pyarrow >&2
  "$py" -m pip download --quiet --no-deps --dest "$work/wheel" graphdatascience >&2
  (cd "$work/wheel" && /usr/bin/python3 -m zipfile -e ./*.whl .) >&2
  "$py" bench/gnn_cora.py "$(dirname "$(find "$work/wheel" -name cora_nodes.parquet.gzip)")" "$work/cora" 0 2>/dev/null
  graph=$work/cora${graph#cora}
fi
common=(--config examples/graph-gcn2.yaml --set "model.graph=$graph" --set train.epochs=2 --set train.eval=false
        --set train.threads=1 --set checkpoint.every=0 --set runs_dir=$work/runs --set train.log_every=1
        --set parallel.devices=4 --nproc 4)
measured() { /usr/bin/python3 -c "
import json, sys
v = [l['p2p_bytes_per_step'] for l in map(json.loads, open('$work/runs/$1/metrics.jsonl')) if 'p2p_bytes_per_step' in l]
print(f'{v[-1] / 2**20:.2f} MiB')"; }
echo "GCNII on ${1:-cora}, 4 processes: bytes per epoch (measured; the plan's figure in brackets)"
echo "| layers | layer split | graph partition | GNNPipe mode, $chunks chunks | partition / split | GNNPipe / split |"
echo "|---|---|---|---|---|---|"
for d in $depths; do
  "$bin" graph --model gcnii$d --graph "$graph" --out "$work/g$d.json" > /dev/null
  /usr/bin/python3 bench/gnn_layer_plan.py "$work/g$d.json" gcnii$d 4 "$work/p$d.json"
  "$bin" train "${common[@]}" --set model.name=gcnii$d --set name=split-$d --set parallel.partitioner=$work/p$d.json \
    > "$work/split-$d.log" 2>&1 || { echo "FAILED split $d: $(tail -2 "$work/split-$d.log")"; exit 1; }
  "$bin" train "${common[@]}" --set model.name=gcnii$d --set name=parts-$d --set parallel.partitioner=graph \
    > "$work/parts-$d.log" 2>&1 || { echo "FAILED parts $d: $(tail -2 "$work/parts-$d.log")"; exit 1; }
  /usr/bin/python3 bench/gnn_layer_plan.py "$work/g$d.json" gcnii$d 4 "$work/c$d.json" "$chunks"
  "$bin" train "${common[@]}" --set model.name=gcnii$d --set name=pipe-$d --set parallel.partitioner=$work/c$d.json \
    --set model.graph_chunks=$chunks > "$work/pipe-$d.log" 2>&1 || { echo "FAILED pipe $d: $(tail -2 "$work/pipe-$d.log")"; exit 1; }
  split=$(measured split-$d); parts=$(measured parts-$d); pipe=$(measured pipe-$d)
  pipe_plan=$(grep -o "between stages: [^ ]* [^ ]*" "$work/pipe-$d.log" | head -1 | cut -d' ' -f3-)
  split_plan=$(grep -o "between stages: [^ ]* [^ ]*" "$work/split-$d.log" | head -1 | cut -d' ' -f3-)
  parts_plan=$(grep -o "nodes: [0-9.]* [KMG]iB per step" "$work/parts-$d.log" | head -1 | cut -d' ' -f2-3)
  ratio=$(/usr/bin/python3 -c "print(f'{float(\"${parts% *}\") / float(\"${split% *}\"):.2f}')")
  piped=$(/usr/bin/python3 -c "print(f'{float(\"${pipe% *}\") / float(\"${split% *}\"):.2f}')")
  echo "| $d | $split ($split_plan) | $parts ($parts_plan) | $pipe ($pipe_plan) | $ratio | $piped |"
done
