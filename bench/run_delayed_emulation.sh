#!/usr/bin/env bash
# Delayed pipelines on emulated paper-size plans (Note [Delayed pipelines] in schedule/delayed.h,
# Note [Emulation] in executor/stage_executor.h): each model's graphpipe plan on DEVICES emulated
# summit-v100 devices (16 samples per device) runs under graph-1f1b, graph-zb (the best synchronous
# schedules on the same stages; SFB parameters all-reduce, as SFB takes no split backward) and
# graph-1f1b with parallel.pipeline_delay=1. Prints a Markdown
# table: emulated and simulated iteration of each, the delayed run's emulated / simulated, and its
# gain over the faster synchronous schedule (emulated and simulated); PER_DEVICE samples per device
# (default 16) make the mini-batch. Modelled times are dilated
# so that an iteration takes about TARGET_S seconds (at most MAX_DILATION).
#   [TARGET_S=0.3] [MAX_DILATION=20] [PER_DEVICE=16] [MODELS="candle_uno dlrm mmt inception"] bash bench/run_delayed_emulation.sh [STEPS] [DEVICES...]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}; shift || true
devices=("${@:-8 16}"); [ $# -eq 0 ] && devices=(8 16)
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. bench/lib.sh  # emulation_config
emulation_config "$work/emu.yaml" "$steps"
echo "| model | devices | stages | graph-1f1b emulated / simulated ms | graph-zb emulated / simulated ms | delayed emulated / simulated ms | delayed emulated / simulated | delayed gain, emulated | delayed gain, simulated |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in ${MODELS:-candle_uno dlrm mmt inception}; do
  for d in "${devices[@]}"; do
    mini=$((${PER_DEVICE:-16} * d))
    declare -A em si
    # One graphpipe plan (graph-1f1b); graph-zb on its stages (actions cleared, the schedule's own made).
    "$bin" plan --model $model --preset paper --cluster summit-v100 --devices $d --mini-batch $mini \
      --partitioner graphpipe --schedule graph-1f1b --out "$work/graph-1f1b.json" > /dev/null
    python3 -c "
import json; p = json.load(open('$work/graph-1f1b.json'))
p['grad_sync'] = {k: ('allreduce' if v == 'sfb' else v) for k, v in p['grad_sync'].items()}  # SFB takes no split backward
json.dump(p, open('$work/graph-1f1b.json', 'w'))
p['schedule'] = 'graph-zb'
for st in p['stages']: st['actions'] = ''
json.dump(p, open('$work/graph-zb.json', 'w'))"
    stages=$(python3 -c "import json; print(len(json.load(open('$work/graph-1f1b.json'))['stages']))")
    for mode in graph-1f1b graph-zb delayed; do
      file=$work/$mode.json; delay=0; [ $mode = delayed ] && file=$work/graph-1f1b.json && delay=1
      "$bin" plan --model $model --preset paper --cluster summit-v100 --devices $d --mini-batch $mini \
        --partitioner graphpipe --schedule graph-1f1b --pipeline-delay $delay --out "$work/tmp.json" > /dev/null
      predicted=$(python3 -c "import json; p=json.load(open('$work/tmp.json')); print(p['predicted']['iteration_s'])")
      dil=$(python3 -c "print(max(1, min(${MAX_DILATION:-20}, round(${TARGET_S:-0.3} / $predicted))))")
      "$bin" train --config "$work/emu.yaml" --emulate summit-v100 --dilation $dil --set model.name=$model \
        --set parallel.devices=$d --set train.mini_batch=$mini --set data.train_size=$((2 * mini)) --set parallel.partitioner=$file \
        --set parallel.pipeline_delay=$delay --set runs_dir=$work/runs --set name=$model-$d-$mode > "$work/out" 2>&1 ||
        { cat "$work/out"; exit 1; }
      read -r measured simulated < <(python3 -c "
import json; m=json.loads(open('$work/runs/$model-$d-$mode/metrics.jsonl').readline())
print(m['iteration_s'], m['predicted_iteration_s'])")
      em[$mode]=$measured; si[$mode]=$simulated
    done
    python3 -c "
e1, ez, ed = ${em[graph-1f1b]}, ${em[graph-zb]}, ${em[delayed]}
s1, sz, sd = ${si[graph-1f1b]}, ${si[graph-zb]}, ${si[delayed]}
print('| $model | $d | $stages | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.3f | %.2fx | %.2fx |' % (
    e1*1e3, s1*1e3, ez*1e3, sz*1e3, ed*1e3, sd*1e3, ed/sd, min(e1, ez)/ed, min(s1, sz)/sd))"
  done
done
