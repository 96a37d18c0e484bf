#!/usr/bin/env bash
# A 2-stage pipeline of gpt2-124m on 2 processes (one thread each): trident
# (`trident train --nproc 2`, the zoo's gpt, its pipedream plan on the
# cpu-local preset: stage 0 the embeddings and blocks 0-7, stage 1 the rest
# and the tied head; 1F1B and the zero-bubble zb-h1) against
# torch.distributed.pipelining (bench/pytorch_gpt_pipeline.py: the same
# model and cut, Schedule1F1B, and ScheduleZBVZeroBubble on 4 stages in a V,
# its zero-bubble schedule for 2 processes). Adam; mini-batch MINI of
# 1,024-token sequences in micro-batches of MICRO; trident on synthetic
# token data, the peer on a fixed random batch. Tokens/s: trident's median
# logged window after the first, the peer's STEPS timed steps after one
# warm-up. Rounds alternate the four; each cell is the median.
#   bash bench/run_gpt_pipeline.sh [ROUNDS] [MINI] [MICRO] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}; mini=${2:-4}; micro=${3:-1}; steps=${4:-3}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
peer=$(bash scripts/install-peers.sh | tail -1)
cat > "$work/gpt.yaml" <<YAML
name: gpt
model: {name: gpt, preset: gpt2-124m}
data: {name: synthetic, train_size: $((mini * 4)), test_size: $mini}
train: {mini_batch: $mini, seed: 0}
optimizer: {name: adam, lr: 0.0001}
YAML
port=29950
peer_rate() {  # SCHEDULE: tokens/s
  port=$((port + 1))
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$peer" bench/pytorch_gpt_pipeline.py "$1" "$mini" "$micro" "$steps" > "$work/peer.$r" 2>&1 &
  done
  wait
  python3 -c "import json,sys; print(json.loads([l for l in open(sys.argv[1]) if l.startswith('{')][-1])['tokens_per_s'])" "$work/peer.0" ||
    { tail -n 5 "$work/peer.0" "$work/peer.1" >&2; exit 1; }
}
trident_rate() {  # SCHEDULE NAME: tokens/s
  "$bin" train --config "$work/gpt.yaml" --nproc 2 --set name="$2" --set train.steps=$((steps + 1)) \
    --set train.epochs=null --set train.eval=false --set train.threads=1 --set train.log_every=1 \
    --set checkpoint.every=0 --set runs_dir="$work" --set parallel.devices=2 --set parallel.partitioner=pipedream \
    --set parallel.max_replicas=1 --set parallel.cluster=cpu-local --set parallel.micro_batch="$micro" \
    --set parallel.schedule="$1" > "$work/$2.log" 2>&1 || { tail -n 3 "$work/$2.log" >&2; exit 1; }
  python3 -c "
import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
print(1024 * statistics.median(x['samples_per_s'] for x in w))" "$work/$2/metrics.jsonl"
}
version=$("$peer" -c 'import torch; print(torch.__version__)')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $("$bin" version | head -1); 1 thread per process"
t1=(); tz=(); p1=(); pz=()
for round in $(seq "$rounds"); do
  t1+=("$(trident_rate 1f1b "1f1b-$round")")
  p1+=("$(peer_rate 1f1b)")
  tz+=("$(trident_rate zb-h1 "zb-$round")")
  pz+=("$(peer_rate zbv)")
done
python3 -c "import json; p = json.load(open('$work/1f1b-$rounds/plan.json')); print('trident stages:', [(s['ops'][0], s['ops'][-1]) for s in p['stages']])" || true
echo
echo "| mini-batch × tokens | micro-batch | trident 1F1B | trident zb-h1 | pipelining $version 1F1B | pipelining ZBV | trident best / pipelining best | runs (t 1F1B; t zb-h1; p 1F1B; p ZBV) |"
echo "|---|---|---|---|---|---|---|---|"
python3 - "$mini" "$micro" "${t1[*]}" "${tz[*]}" "${p1[*]}" "${pz[*]}" <<'PY'
import statistics, sys
mini, micro = sys.argv[1:3]
runs = [[float(x) for x in a.split()] for a in sys.argv[3:7]]
t1, tz, p1, pz = (statistics.median(r) for r in runs)
print("| %s × 1024 | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %s |" % (mini, micro, t1, tz, p1, pz, max(t1, tz) / max(p1, pz),
      "; ".join(" ".join("%.0f" % x for x in r) for r in runs)))
PY
