#!/usr/bin/env bash
# A real 2-stage pipeline against one process: the tiny transformer (two
# equal layers) on Fashion-MNIST, `trident train` with one thread per
# process; the planner's pipedream plan puts one layer on each of 2
# processes. Samples/s are the mean of the logged training windows after the
# first (evaluation off). Alternates them ROUNDS times, keeps each best.
# The peer: torch.distributed.pipelining of the current torch
# (bench/pytorch_pipelining.py, scripts/install-peers.sh), the same model
# split the same way on 2 processes over Gloo, the same micro-batches, GPipe
# and 1F1B, one thread per process, on a fixed random batch (no data loading).
#   bash bench/run_pipeline.sh [ROUNDS] [MICRO_BATCH] [MINI_BATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; micro=${2:-64}; mini=${3:-512}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
peer=$(bash scripts/install-peers.sh | tail -1)
port=29900
peer_rate() {  # SCHEDULE: rank 1's samples/s
  port=$((port + 1))
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$peer" bench/pytorch_pipelining.py "$1" "$mini" "$micro" 20 \
      > "$work/peer.$r" 2>&1 &
  done
  wait
  python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])['samples_per_s'])" "$work/peer.1"
}
common=(--config examples/fmnist-transformer.yaml --set train.steps=60 --set train.epochs=null --set train.eval=false
        --set train.threads=1 --set train.mini_batch=$mini --set train.log_every=10 --set checkpoint.every=0 --set runs_dir=$work)
rate() { python3 -c "
import json,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
print(sum(x['samples_per_s'] for x in w)/len(w))" "$1"; }
best1=0; best2=0; bestg=0; bestf=0
for _ in $(seq "$rounds"); do
  "$bin" train "${common[@]}" --set name=one >/dev/null 2>&1
  r1=$(rate $work/one/metrics.jsonl)
  "$bin" train "${common[@]}" --set name=two --set parallel.devices=2 --set parallel.partitioner=pipedream \
    --set parallel.max_replicas=1 --set parallel.micro_batch=$micro >/dev/null 2>&1
  r2=$(rate $work/two/metrics.jsonl)
  best1=$(python3 -c "print(max($best1, $r1))"); best2=$(python3 -c "print(max($best2, $r2))")
  bestg=$(python3 -c "print(max($bestg, $(peer_rate gpipe)))"); bestf=$(python3 -c "print(max($bestf, $(peer_rate 1f1b)))")
done
"$bin" report $work/two > $work/report.txt
echo "| model | mini-batch | micro-batch | 1 process samples/s | 2-stage pipeline samples/s | ratio | pipelining $("$peer" -c 'import torch; print(torch.__version__)') GPipe | pipelining 1F1B | trident / best of pipelining |"
echo "|---|---|---|---|---|---|---|---|---|"
python3 -c "print('| transformer/tiny | $mini | $micro | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |' % ($best1, $best2, $best2/$best1, $bestg, $bestf, $best2/max($bestg, $bestf)))"
echo
echo "trident report of the last pipeline run:"
cat $work/report.txt
