#!/usr/bin/env bash
# Mixed clusters, simulated and emulated (issue 43; Note [Class-aware
# placement] in planner/planner.h): paper-size mmt, dlrm, candle_uno,
# inception and transformer on the presets mixed-v100-a100 (8 V100 + 8 A100)
# and mixed-h200-a100 (4 H200 + 12 A100), DEVICES devices (default 16), 16
# samples per device, graphpipe, Adam. For each, `trident plan --placement`
# gives the class-aware plan and the two baselines — planned as if every
# device were the average one, and the best cluster of one class alone —
# and the table shows their simulated samples/s and the class-aware plan's
# gain over the better baseline. With EMULATE=1 each of the three plans is
# also run emulated on DEVICES local processes (Note [Emulation], modelled
# times dilated to about TARGET_S seconds an iteration), emulated beside
# simulated.
#   [EMULATE=1] [TARGET_S=0.3] [MODELS="..."] [CLUSTERS="..."] bash bench/run_mixed.sh [DEVICES] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-16}; steps=${2:-8}
mini=$((16 * devices))
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/emu.yaml" <<YAML
name: emu
model: {name: mmt, preset: paper}
data: {name: synthetic, train_size: $mini, test_size: 16}
train: {steps: $steps, mini_batch: $mini, seed: 0, threads: 1}
optimizer: {name: adam, lr: 0.001}
parallel: {devices: $devices, partitioner: graphpipe, grad_sync: hybrid, timeout_s: 120}
YAML
kinds=(class-aware as-average one-class)
if [ -n "${EMULATE:-}" ]; then
  echo "| cluster | model | placement | stages | simulated samples/s | emulated samples/s | emulated / simulated |"
  echo "|---|---|---|---|---|---|---|"
else
  echo "| cluster | model | as-average | one-class | class-aware | class-aware / best baseline |"
  echo "|---|---|---|---|---|---|"
fi
for cluster in ${CLUSTERS:-mixed-v100-a100 mixed-h200-a100}; do
  for model in ${MODELS:-mmt dlrm candle_uno inception transformer}; do
    declare -A rate=()
    for kind in "${kinds[@]}"; do
      "$bin" plan --model "$model" --preset paper --cluster "$cluster" --devices "$devices" --mini-batch "$mini" \
        --partitioner graphpipe --placement "$kind" --out "$work/$kind.json" > "$work/plan.log" 2>&1 ||
        { rate[$kind]=-; continue; }
      read -r predicted iteration stages < <(python3 -c "
import json; p=json.load(open('$work/$kind.json')); print(p['predicted']['samples_per_s'], p['predicted']['iteration_s'], len(p['stages']))")
      rate[$kind]=$predicted
      [ -n "${EMULATE:-}" ] || continue
      dil=$(python3 -c "print(max(1, min(20, round(${TARGET_S:-0.3} / $iteration))))")
      name=$model-$kind-$RANDOM
      "$bin" train --config "$work/emu.yaml" --emulate "$cluster" --dilation "$dil" --set model.name="$model" \
        --set parallel.partitioner="$work/$kind.json" --set runs_dir="$work/runs" --set name="$name" \
        > "$work/out" 2>&1 || { tail -3 "$work/out"; exit 1; }
      python3 -c "
import json; m=json.loads(open('$work/runs/$name/metrics.jsonl').readline())
emulated = $mini / m['iteration_s']
print('| $cluster | $model | $kind | $stages | %.0f | %.0f | %.3f |' % ($predicted, emulated, m['predicted_iteration_s'] / m['iteration_s']))"
    done
    [ -n "${EMULATE:-}" ] && continue
    python3 -c "
r = {k: (None if v == '-' else float(v)) for k, v in zip(['ca', 'avg', 'one'], '${rate[class-aware]} ${rate[as-average]} ${rate[one-class]}'.split())}
f = lambda v: '-' if v is None else '%.0f' % v
base = max(v for v in (r['avg'], r['one']) if v is not None)
print('| $cluster | $model | %s | %s | %s | %.2f |' % (f(r['avg']), f(r['one']), f(r['ca']), r['ca'] / base))"
  done
done
