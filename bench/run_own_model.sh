#!/usr/bin/env bash
# Own models (docs/own-model.md): how long tools/export takes for each
# example model, and a trident training step of an imported model against the
# same model from the zoo (`cnn` written in PyTorch, bench/own_model/zoo_cnn.py).
# Fashion-MNIST, one process, 1 thread, mini-batch 64, STEPS steps a run
# (evaluation off); ROUNDS rounds alternate the two; each keeps its median
# steps/s (the median of its logged windows after the first).
#   bash bench/run_own_model.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}; rounds=${2:-3}
bin=${BUILD:-build}/tools/trident/trident
py=$(bash scripts/install-peers.sh | tail -1)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export_one() {  # NAME FILE:CLASS INPUTS...
  local name=$1 spec=$2; shift 2
  local args=() t0 t1
  for i in "$@"; do args+=(--input "$i"); done
  t0=$(date +%s.%N)
  $py tools/export/trident_export.py "$spec" "${args[@]}" --out "$work/$name" > /dev/null
  t1=$(date +%s.%N)
  printf '| %s | %s | %.2f s |\n' "$name" "$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['ops']))" "$work/$name/model.json")" "$(echo "$t1 - $t0" | bc)"
}
echo "| model | ops | export (PyTorch $($py -c 'import torch; print(torch.__version__)')) |"
echo "|---|---|---|"
export_one residual_cnn tools/export/examples/residual_cnn.py:ResidualCNN image:1,28,28:float32
export_one two_tower tools/export/examples/two_tower.py:TwoTower history:6:int64 dense:8:float32 tags:4:int64
export_one multimodal tools/export/examples/multimodal.py:MultiModal tokens:10:int64 table:12:float32 picture:3,16,16:float32
export_one unet_like tools/export/examples/unet_like.py:UNetLike image:1,28,28:float32
export_one sequence_bn tools/export/examples/sequence_bn.py:SequenceBN tokens:12:int64
export_one zoo_cnn bench/own_model/zoo_cnn.py:ZooCNN image:1,28,28:float32
run() {  # NAME ROUND MODEL-SETTINGS...
  local name=$1 round=$2; shift 2
  "$bin" train --config examples/fmnist-cnn.yaml --set name=$name --set runs_dir=$work/r$round "$@" \
    --set train.steps=$steps --set train.epochs=null --set train.eval=false --set train.log_every=50 \
    --set train.mini_batch=64 --set train.threads=1 --set checkpoint.every=0 --set parallel.devices=1 \
    --set parallel.partitioner=dp > "$work/$name-$round.log" 2>&1 || { echo "FAILED $name"; tail -3 "$work/$name-$round.log"; exit 1; }
}
cat > "$work/own.yaml" <<YAML
model: {file: $work/zoo_cnn/model.json, weights: $work/zoo_cnn/init.pt}
YAML
for round in $(seq "$rounds"); do
  run zoo "$round"
  "$bin" train --config "$work/own.yaml" --set name=imported --set runs_dir=$work/r$round --set data.name=fashion-mnist \
    --set train.steps=$steps --set train.eval=false --set train.log_every=50 --set train.mini_batch=64 \
    --set train.threads=1 --set checkpoint.every=0 --set parallel.devices=1 --set parallel.partitioner=dp \
    --set optimizer.name=adam --set optimizer.lr=0.001 --set optimizer.schedule=cosine > "$work/imported-$round.log" 2>&1 || { echo "FAILED imported"; tail -3 "$work/imported-$round.log"; exit 1; }
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def rate(name, r):
    w = [json.loads(l) for l in open("%s/r%d/%s/metrics.jsonl" % (work, r, name)) if "samples_per_s" in l][1:]
    return statistics.median(x["samples_per_s"] for x in w) / 64
zoo = statistics.median(rate("zoo", r) for r in range(1, rounds + 1))
imp = statistics.median(rate("imported", r) for r in range(1, rounds + 1))
print("\n| model | steps/s (median of %d) |\n|---|---|" % rounds)
print("| zoo `cnn` | %.1f |\n| the same written in PyTorch, imported | %.1f |" % (zoo, imp))
print("\nimported / zoo: %.3f" % (imp / zoo))
PY
