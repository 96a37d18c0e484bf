#!/usr/bin/env bash
# Zero-bubble pipelines measured (issue 42): the zoo's mlp/paper (8 layers of
# 4096) on 2 processes of 1 thread, 8 micro-batches of 16, Adam.
# - trident: pipedream's 2 stages under 1f1b and zb-h1 (`trident train
#   --nproc 2`, Fashion-MNIST; samples/s the median of the logged windows
#   after the first);
# - the peer, torch.distributed.pipelining of the current torch
#   (bench/pytorch_zero_bubble.py, scripts/install-peers.sh) on a fixed random
#   batch: Schedule1F1B on the same 2 stages, and ScheduleZBVZeroBubble and
#   ScheduleInterleavedZeroBubble on 4 stages of 2 layers, two per process.
# ROUNDS rounds alternate all five; each keeps its median; every run is
# printed under its row.
#   bash bench/run_zero_bubble.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}; steps=${2:-16}
mini=128; micro=16
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
peer=$(bash scripts/install-peers.sh | tail -1)
port=29950
peer_rate() {  # SCHEDULE: samples/s on the process that computes the loss
  port=$((port + 1))
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$peer" bench/pytorch_zero_bubble.py "$1" "$mini" "$micro" "$((steps / 2))" > "$work/peer.$r" 2>&1 &
  done
  wait
  python3 -c "import json,sys; print(json.loads([l for f in sys.argv[1:] for l in open(f) if l.startswith('{')][-1])['samples_per_s'])" \
    "$work/peer.0" "$work/peer.1"
}
trident_rate() {  # SCHEDULE: the run's samples/s
  local name=mlp-$1-$RANDOM
  "$bin" train --config examples/fmnist-mlp.yaml --nproc 2 --set name="$name" --set model.preset=paper \
    --set parallel.devices=2 --set parallel.partitioner=pipedream --set parallel.max_replicas=1 \
    --set parallel.micro_batch=$micro --set train.mini_batch=$mini --set parallel.schedule="$1" \
    --set train.epochs=null --set train.steps="$steps" --set train.log_every=2 --set train.eval=false \
    --set train.threads=1 --set checkpoint.every=0 --set parallel.cluster=cpu-local --set runs_dir="$work" \
    > "$work/$name.log" 2>&1 || { tail -3 "$work/$name.log" >&2; exit 1; }
  python3 -c "
import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
print(statistics.median(x['samples_per_s'] for x in w))" "$work/$name/metrics.jsonl"
}
declare -A runs
for round in $(seq "$rounds"); do
  for s in 1f1b zb-h1; do runs[trident-$s]+="$(trident_rate $s) "; done
  for s in 1f1b zbv interleaved-zb; do runs[peer-$s]+="$(peer_rate $s) "; done
done
median() { python3 -c "import statistics,sys; print('%.1f' % statistics.median(map(float, sys.argv[1:])))" "$@"; }
version=$("$peer" -c 'import torch; print(torch.__version__)')
echo "| system | schedule | stages per process | samples/s (median of $rounds) | runs |"
echo "|---|---|---|---|---|"
for key in trident-1f1b trident-zb-h1 peer-1f1b peer-zbv peer-interleaved-zb; do
  system=trident; [[ $key == peer-* ]] && system="pipelining $version"
  per=1; [[ $key == peer-zbv || $key == peer-interleaved-zb ]] && per=2
  # shellcheck disable=SC2086
  echo "| $system | ${key#*-} | $per | $(median ${runs[$key]}) | ${runs[$key]} |"
done
