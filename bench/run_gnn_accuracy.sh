#!/usr/bin/env bash
# Accuracy of the zoo's GNNs against an MLP on the same nodes and labels
# (docs/gnn.md): generated graphs of falling homophily (csbm, 1,000 nodes,
# 3 classes, 32 features, 20 labels per class; at homophily 1/3 the graph
# says nothing about the labels) and Cora from the `graphdatascience` wheel
# (bench/gnn_cora.py: a seeded Planetoid-shaped split, not the public one).
# Each model trains EPOCHS full-graph epochs (Adam lr 0.01, weight decay
# 5e-4, one process, 2 threads) for each of SEEDS seeds (the seed draws the
# weights, dropout, the generated graph and Cora's split); the accuracy
# reported is the test accuracy at the epoch of best validation accuracy
# (two runs with equal trajectories: one evaluates the validation mask, one
# the test mask). Prints a markdown table: mean ± std over the seeds.
# A model written NAME@K trains in GNNPipe mode (docs/gnn.md): the graph in
# METIS order (@metis=K), its nodes in K chunks (model.graph_chunks=K), one
# process — the same reads as a layer split (GnnPipe.* tests).
# A model written NAME~FANOUTS (sage2~10,10) trains on sampled mini-batches
# (model.fanouts=FANOUTS, SAMPLED_BATCH seed nodes a step, default 32; the
# same epochs, each a pass over the training nodes), evaluated with every
# neighbour (docs/gnn.md).
#   bash bench/run_gnn_accuracy.sh [SEEDS] [EPOCHS] [GRAPHS] [MODELS]
set -u
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
seeds=${1:-5}; epochs=${2:-200}
graphs=${3:-"h0.9 h0.7 h0.5 h0.33 cora"}; models=${4:-"graph_mlp gcn2 sage2 gcnii16 jk_gcn16 appnp"}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
if [[ " $graphs " == *" cora "* ]]; then  # the wheel's parquet files and a reader for them
  py=$(bash scripts/install-peers.sh | tail -1)
  "$py" -m pip install --quiet --progress-bar off --disable-pip-version-check pyarrow >&2
  "$py" -m pip download --quiet --no-deps --dest "$work/wheel" graphdatascience >&2
  (cd "$work/wheel" && /usr/bin/python3 -m zipfile -e ./*.whl . ) >&2
  cora=$(dirname "$(find "$work/wheel" -name cora_nodes.parquet.gzip)")
fi
source_of() {  # GRAPH SEED -> model.graph
  case $1 in
    cora) [ -d "$work/cora$2" ] || "$py" bench/gnn_cora.py "$cora" "$work/cora$2" "$2" 2>/dev/null; echo "$work/cora$2";;
    h*) echo "csbm:nodes=1000,classes=3,features=32,degree=6,signal=0.3,homophily=${1#h},seed=$2";;
  esac
}
echo "| graph | homophily (edges) | $(echo $models | sed 's/ / | /g') |"
echo "|---|---|$(for m in $models; do printf -- '---|'; done)"
for graph in $graphs; do
  row=""
  for model in $models; do
    name=${model%@*} chunks=0 order="" run=${model/@/-chunks} sampled=()
    [ "$name" != "$model" ] && chunks=${model#*@} order="@metis=${model#*@}"
    if [[ $model == *"~"* ]]; then  # sampled mini-batches: NAME~FANOUTS
      name=${model%~*} run=$(echo "$model" | tr '~,' '-_')
      sampled=(--set "model.fanouts=${model#*~}" --set "train.mini_batch=${SAMPLED_BATCH:-32}")
    fi
    for seed in $(seq 0 $((seeds - 1))); do
      for mask in val test; do
        "$bin" train --config examples/graph-gcn2.yaml --set model.name=$name --set "model.graph=$(source_of $graph $seed)$order" \
          --set model.graph_chunks=$chunks "${sampled[@]}" \
          --set name=$graph-$run-$seed-$mask --set runs_dir=$work/runs --set data.eval=$mask --set train.seed=$seed \
          --set train.epochs=$epochs --set train.threads=2 --set train.log_every=1000 --set checkpoint.every=0 \
          > "$work/log" 2>&1 || { echo "FAILED $graph $model $seed $mask: $(tail -2 "$work/log")" >&2; exit 1; }
      done
    done
    row="$row | $(/usr/bin/python3 - "$work/runs" "$graph-$run" "$seeds" <<'PY'
import json, statistics, sys
runs, prefix, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def curve(seed, mask):
    return [l["test_accuracy"] for l in map(json.loads, open(f"{runs}/{prefix}-{seed}-{mask}/metrics.jsonl"))
            if "test_accuracy" in l and "epoch" in l]
best = []
for s in range(seeds):
    val, test = curve(s, "val"), curve(s, "test")
    best.append(100 * test[max(range(len(val)), key=lambda e: val[e])])
print(f"{statistics.mean(best):.1f} ± {statistics.pstdev(best):.1f}", end="")
PY
)"
  done
  homophily=${graph#h}
  if [ "$graph" = cora ]; then  # the share of edges whose ends share a label
    homophily=$("$py" -c "import numpy as np; e = np.load('$work/cora0/edges.npy'); y = np.load('$work/cora0/labels.npy'); print(f'{(y[e[0]] == y[e[1]]).mean():.2f}')")
  fi
  echo "| $graph$row |" | sed "s/^| $graph |/| $graph | $homophily |/"
done
