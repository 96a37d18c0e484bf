#!/usr/bin/env bash
# What PipeDream-2BW's delayed update (parallel.pipeline_delay: 1, Note [Delayed pipelines]) costs in
# accuracy: MODELS (default mlp and inception) on Fashion-MNIST, EPOCHS epochs (default 3) of 128
# samples with the example configs' Adam and a cosine rate, SEEDS seeds (default 3), synchronous
# against delayed. The delayed rule is deterministic and the same on any plan (every delayed plan
# equals one process running it: lib/executor/test/delayed_pipeline_test.cc), so each run is one
# process, 2 threads. Prints each run's test accuracy after every epoch and a Markdown table of the
# final accuracies: mean over seeds and delayed − synchronous.
#   [MODELS="mlp inception"] [SEEDS=3] [EPOCHS=3] bash bench/run_delayed_accuracy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
epochs=${EPOCHS:-3}
echo "| model | seed | synchronous accuracy by epoch | delayed accuracy by epoch |"
echo "|---|---|---|---|"
declare -A final
for model in ${MODELS:-mlp inception}; do
  for seed in $(seq 0 $((${SEEDS:-3} - 1))); do
    row="| $model | $seed"
    for delay in 0 1; do
      "$bin" train --config examples/fmnist-$model.yaml --set train.epochs=$epochs --set train.steps=null \
        --set train.seed=$seed --set train.mini_batch=128 --set optimizer.schedule=cosine --set train.threads=2 \
        --set parallel.devices=1 --set parallel.pipeline_delay=$delay --set checkpoint.every=0 \
        --set runs_dir=$work/$model-$seed-$delay > "$work/log" 2>&1 || { tail -3 "$work/log"; exit 1; }
      acc=$(python3 -c "
import json,sys
a=[json.loads(l)['test_accuracy'] for l in open(sys.argv[1]) if 'test_accuracy' in l]
print(' '.join('%.4f' % x for x in a))" "$work/$model-$seed-$delay/fmnist-$model/metrics.jsonl")
      row+=" | $acc"
      final[$model-$delay]+="${acc##* } "
    done
    echo "$row |"
  done
done
echo
echo "| model | synchronous (mean) | delayed (mean) | delayed − synchronous (points) |"
echo "|---|---|---|---|"
for model in ${MODELS:-mlp inception}; do
  python3 -c "
s=[float(x) for x in '${final[$model-0]}'.split()]; d=[float(x) for x in '${final[$model-1]}'.split()]
ms, md = sum(s)/len(s), sum(d)/len(d)
print('| $model | %.2f%% | %.2f%% | %+.2f |' % (100*ms, 100*md, 100*(md-ms)))"
done
