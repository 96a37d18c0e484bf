#!/usr/bin/env bash
# A delayed pipeline (parallel.pipeline_delay: 1, PipeDream-2BW; Note [Delayed pipelines]) against the
# synchronous schedules on the same stages, for real on this machine: MODEL's (default inception,
# Fashion-MNIST) pipedream plan of 2 stages on 2 processes (one thread each, evaluation off), made
# once under 1f1b, then run under 1f1b, zb-h1 (the zero-bubble schedule on the same stages) and
# 1f1b with the delay. ROUNDS rounds alternate the three. Per mode: samples/s (the median of the
# logged windows after the first, median over rounds), the traced bubble and iteration
# (`trident report`, last round), and each stage's peak resident memory (last round).
#   [MODEL=inception] [CONFIG=examples/fmnist-inception.yaml] bash bench/run_delayed.sh [ROUNDS] [STEPS] [MINI] [MICRO]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}; steps=${2:-80}; mini=${3:-128}; micro=${4:-16}
model=${MODEL:-inception}; config=${CONFIG:-examples/fmnist-inception.yaml}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$bin" plan --model $model --devices 2 --mini-batch $mini --micro-batch $micro --partitioner pipedream --schedule 1f1b \
  --max-replicas 1 --out "$work/1f1b.json" > /dev/null
python3 -c "
import json; p = json.load(open('$work/1f1b.json')); p['schedule'] = 'zb-h1'
for st in p['stages']: st['actions'] = ''
json.dump(p, open('$work/zb-h1.json', 'w'))"
run() {  # MODE ROUND
  local mode=$1 file=$work/$1.json delay=0
  [ $mode = delayed ] && file=$work/1f1b.json && delay=1
  "$bin" train --config "$config" --set name=$mode-$2 --set train.steps=$steps --set train.epochs=null --set train.eval=false \
    --set train.threads=1 --set train.mini_batch=$mini --set train.log_every=10 --set checkpoint.every=0 \
    --set parallel.devices=2 --set parallel.partitioner=$file --set parallel.pipeline_delay=$delay \
    --set runs_dir="$work" > "$work/$mode-$2.log" 2>&1 || { tail -3 "$work/$mode-$2.log" >&2; exit 1; }
  python3 -c "
import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
print(statistics.median(x['samples_per_s'] for x in w))" "$work/$mode-$2/metrics.jsonl"
}
declare -A rates
for round in $(seq "$rounds"); do
  for mode in 1f1b zb-h1 delayed; do rates[$mode]+="$(run $mode $round) "; done
done
echo "| mode | samples/s (per round) | median | traced iteration ms | traced bubble | peak RSS stage 0 / 1 |"
echo "|---|---|---|---|---|---|"
for mode in 1f1b zb-h1 delayed; do
  rep=$("$bin" report "$work/$mode-$rounds" 2>&1)
  it=$(printf '%s\n' "$rep" | awk '/^ *iteration/ {print $2}')
  bub=$(printf '%s\n' "$rep" | awk '/^ *bubble/ {print $2}')
  mem=$(python3 -c "
import json,sys
m=[json.loads(l)['memory'] for l in open(sys.argv[1]) if '\"memory\"' in l][-1]
print(' / '.join('%.0f MiB' % (r['peak_rss_bytes']/2**20) for r in sorted(m, key=lambda r: r['stage'])))" "$work/$mode-$rounds/metrics.jsonl")
  python3 -c "
import statistics, sys; r=[float(x) for x in sys.argv[2].split()]
print('| %s | %s | %.1f | %s | %s | %s |' % (sys.argv[1], ', '.join('%.1f' % x for x in r), statistics.median(r), *sys.argv[3:]))" \
    "$mode" "${rates[$mode]}" "$it" "$bub" "$mem"
done
