#!/usr/bin/env bash
# Emulated paper-size models (see Note [Emulation] in executor/stage_executor.h):
# mmt, candle_uno and dlrm on 8 and 16 emulated summit-v100 devices with
# graphpipe and pipedream plans, 16 samples per device. Each run is the real
# runtime on DEVICES local processes with modelled compute and transfer
# times; the modelled times are dilated so that a dilated iteration takes
# about TARGET_S seconds (default 0.3, at most MAX_DILATION, default 20), which keeps this 2-core machine's
# per-message scheduling cost small against them. Prints a Markdown table:
# measured iteration next to the simulator's, and GPP/SPP measured and
# simulated. Each plan runs under `parallel.schedule: auto` (the column says
# what it chose); with ZB=1 under the partitioner's base schedule and its
# zero-bubble one instead (graph-1f1b and graph-zb for graphpipe, 1f1b and
# zb-h1 for pipedream), GPP/SPP then comparing the zero-bubble runs.
#   [TARGET_S=0.3] [MAX_DILATION=20] [ZB=1] [MODELS="mmt candle_uno dlrm"] bash bench/run_emulation.sh [STEPS] [DEVICES...]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}; shift || true
devices=("${@:-8 16}"); [ $# -eq 0 ] && devices=(8 16)
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. bench/lib.sh  # emulation_config
emulation_config "$work/emu.yaml" "$steps"
echo "| model | devices | mini-batch | partitioner | schedule | stages | dilation | emulated ms | simulated ms | emulated / simulated |"
echo "|---|---|---|---|---|---|---|---|---|---|"
declare -A rate sim
for model in ${MODELS:-mmt candle_uno dlrm}; do
  for d in "${devices[@]}"; do
    mini=$((16 * d))
    for p in graphpipe pipedream; do
      schedules=(auto)
      if [ -n "${ZB:-}" ]; then
        schedules=(1f1b zb-h1); [ $p = graphpipe ] && schedules=(graph-1f1b graph-zb)
      fi
      for s in "${schedules[@]}"; do
        "$bin" plan --model $model --preset paper --cluster summit-v100 --devices $d --mini-batch $mini \
          --partitioner $p $([ $s = auto ] || echo --schedule $s) --out "$work/plan.json" > /dev/null
        read -r predicted stages chosen < <(python3 -c "import json; p=json.load(open('$work/plan.json')); print(p['predicted']['iteration_s'], len(p['stages']), p['schedule'])")
        dil=$(python3 -c "print(max(1, min(${MAX_DILATION:-20}, round(${TARGET_S:-0.3} / $predicted))))")
        "$bin" train --config "$work/emu.yaml" --emulate summit-v100 --dilation $dil --set model.name=$model \
          --set parallel.devices=$d --set train.mini_batch=$mini --set parallel.partitioner=$p \
          --set parallel.schedule=$s --set runs_dir=$work/runs --set name=$model-$d-$p-$s > "$work/out" 2>&1 ||
          { cat "$work/out"; exit 1; }
        read -r measured simulated < <(python3 -c "
import json; m=json.loads(open('$work/runs/$model-$d-$p-$s/metrics.jsonl').readline())
print(m['iteration_s'], m['predicted_iteration_s'])")
        rate[$model-$d-$p]=$measured; sim[$model-$d-$p]=$simulated
        python3 -c "print('| $model | $d | $mini | $p | $chosen | $stages | x$dil | %.2f | %.2f | %.3f |' % ($measured*1e3, $simulated*1e3, $measured/$simulated))"
      done
    done
  done
done
echo
echo "| model | devices | GPP/SPP emulated | GPP/SPP simulated |"
echo "|---|---|---|---|"
for model in ${MODELS:-mmt candle_uno dlrm}; do
  for d in "${devices[@]}"; do
    python3 -c "print('| $model | $d | %.2f | %.2f |' % (${rate[$model-$d-pipedream]}/${rate[$model-$d-graphpipe]}, ${sim[$model-$d-pipedream]}/${sim[$model-$d-graphpipe]}))"
  done
done
