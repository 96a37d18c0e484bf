#!/usr/bin/env bash
# How long the planner's search takes as the cluster grows: graphpipe on the
# paper-size branchy models and the transformer, 16 samples per device, on
# one core (taskset -c 0), 8 to 1024 devices of summit-v100's figures
# (bench/clusters/summit-v100-1024.yaml: the same device and links, 256
# nodes). Prints a Markdown table of the `search` seconds `trident plan`
# reports (the search alone, not the program's start-up).
# RECOMPUTE=auto|never|always sets `--recompute` (default: the planner's, auto);
# RATIO=K sets `--micro-batch-ratio` (default 0: the planner's, 2 for graphpipe).
#   bash bench/run_search_time.sh [DEVICES...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
cluster=bench/clusters/summit-v100-1024.yaml
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(8 16 32 64 128 256 512 1024)
pin=(); command -v taskset > /dev/null && pin=(taskset -c 0)
header="| model |"; rule="|---|"
for d in "${sizes[@]}"; do header+=" $d |"; rule+="---|"; done
echo "$header"; echo "$rule"
for model in mmt dlrm candle_uno transformer; do
  row="| $model |"
  for d in "${sizes[@]}"; do
    out=$("${pin[@]}" "$bin" plan --model "$model" --preset paper --cluster "$cluster" --devices "$d" \
          --mini-batch $((16 * d)) --sync-rows 0 --recompute "${RECOMPUTE:-auto}" --micro-batch-ratio "${RATIO:-0}" 2>&1) || { row+=" failed |"; continue; }
    row+=" $(grep -o 'search [0-9.]* s' <<< "$out" | head -1 | cut -d' ' -f2) s |"
  done
  echo "$row"
done
