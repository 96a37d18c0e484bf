#!/usr/bin/env bash
# trident's own cost per micro-batch: an emulated run on bench/zero-cost.yaml
# (every modelled compute and transfer time ~0), so the iteration is only the
# runtime — schedule walking, bookkeeping, p2p messages between the stage
# processes (Gloo over 127.0.0.1) and the per-step all-reduce. A 1F1B
# pipeline of p stages and m micro-batches then has 2(m + p - 1) message hops
# on its critical path.
#   bash bench/run_overhead.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-200}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/ov.yaml" <<YAML
name: ov
model: {name: transformer, preset: tiny}
data: {name: synthetic, train_size: 512, test_size: 16}
train: {steps: $steps, mini_batch: 128, seed: 0, threads: 1}
optimizer: {name: adam, lr: 0.001}
parallel: {devices: 2, partitioner: pipedream, max_replicas: 1, micro_batch: 16, schedule: 1f1b}
YAML
echo "| stages (processes) | micro-batches | iteration ms | per micro-batch ms | per message hop ms |"
echo "|---|---|---|---|---|"
for p in 2 4; do
  for mb in 16 4; do
    m=$((128 / mb))
    "$bin" train --config "$work/ov.yaml" --emulate bench/zero-cost.yaml --set parallel.devices=$p \
      --set parallel.micro_batch=$mb --set runs_dir=$work/runs > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
    python3 -c "
import json; it=json.loads(open('$work/runs/ov/metrics.jsonl').readline())['iteration_s']*1e3
print('| $p | $m | %.2f | %.3f | %.3f |' % (it, it/$m, it/(2*($m+$p-1))))"
  done
done
