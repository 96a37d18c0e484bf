#!/usr/bin/env bash
# A real 2-stage pipeline against one process and against
# torch.distributed.pipelining, on two tiny zoo models:
# - transformer (Fashion-MNIST): a chain of two equal layers; trident's
#   pipedream plan puts one layer on each of 2 processes;
# - mmt (synthetic data): two branches and a head; trident's graphpipe plan
#   puts one branch on each process, and each stage reads its own input, so
#   the branches run at the same time.
# `trident train` with one thread per process, evaluation off; samples/s are
# the median of the logged windows after the first.
# The peer: torch.distributed.pipelining of the current torch
# (bench/pytorch_pipelining.py, scripts/install-peers.sh), the same model
# split the same way on 2 processes over Gloo (mmt as a chain, since
# pipelining feeds only its first stage), the same micro-batches, GPipe and
# 1F1B, one thread per process, on a fixed random batch (no data loading).
# ROUNDS rounds alternate all four; each keeps its median; every run is
# printed under its row.
#   bash bench/run_pipeline.sh [ROUNDS] [MICRO_BATCH] [MINI_BATCH]
# MODELS="transformer" (or "mmt") runs one of the two.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; micro=${2:-64}; mini=${3:-512}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
peer=$(bash scripts/install-peers.sh | tail -1)
port=29900
peer_rate() {  # MODEL SCHEDULE: rank 1's samples/s
  port=$((port + 1))
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$peer" bench/pytorch_pipelining.py "$1" "$2" "$mini" "$micro" 20 > "$work/peer.$r" 2>&1 &
  done
  wait
  python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])['samples_per_s'])" "$work/peer.1"
}
trident_rate() {  # CONFIG NAME [--set ...]: the run's samples/s
  local config=$1 name=$2; shift 2
  "$bin" train --config "$config" --set name="$name" --set train.steps=60 --set train.epochs=null --set train.eval=false \
    --set train.threads=1 --set train.mini_batch="$mini" --set train.log_every=10 --set checkpoint.every=0 \
    --set runs_dir="$work" "$@" > "$work/$name.log" 2>&1 || { tail -3 "$work/$name.log" >&2; exit 1; }
  python3 -c "
import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
print(statistics.median(x['samples_per_s'] for x in w))" "$work/$name/metrics.jsonl"
}
version=$("$peer" -c 'import torch; print(torch.__version__)')
echo "| model | trident plan | mini-batch | micro-batch | 1 process samples/s | 2-stage pipeline samples/s | ratio | pipelining $version GPipe | pipelining 1F1B | trident / best of pipelining |"
echo "|---|---|---|---|---|---|---|---|---|---|"
models=${MODELS:-transformer mmt}
for spec in transformer:examples/fmnist-transformer.yaml:pipedream mmt:examples/synthetic-mmt.yaml:graphpipe; do
  IFS=: read -r model config partitioner <<<"$spec"
  [[ " $models " == *" $model "* ]] || continue
  one=(); two=(); gp=(); fb=()
  for round in $(seq "$rounds"); do
    one+=("$(trident_rate "$config" "$model-one-$round")")
    two+=("$(trident_rate "$config" "$model-two-$round" --set parallel.devices=2 --set parallel.partitioner="$partitioner" \
      --set parallel.max_replicas=1 --set parallel.micro_batch="$micro")")
    gp+=("$(peer_rate "$model" gpipe)")
    fb+=("$(peer_rate "$model" 1f1b)")
  done
  "$bin" report "$work/$model-two-$rounds" > "$work/$model.report"
  python3 - "$model/tiny" "$partitioner" "$mini" "$micro" "${one[*]}" "${two[*]}" "${gp[*]}" "${fb[*]}" <<'PY'
import statistics, sys
model, partitioner, mini, micro = sys.argv[1:5]
runs = [[float(x) for x in arg.split()] for arg in sys.argv[5:9]]
one, two, gp, fb = (statistics.median(r) for r in runs)
print("| %s | %s | %s | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |" % (
    model, partitioner, mini, micro, one, two, two / one, gp, fb, two / max(gp, fb)))
print("|  |  |  | runs | %s | %s |  | %s | %s |  |" % tuple(" ".join("%.0f" % x for x in r) for r in runs))
PY
done
for model in $models; do
  echo; echo "trident report of the last $model pipeline run:"; cat "$work/$model.report"
done
