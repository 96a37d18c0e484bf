#!/usr/bin/env bash
# trident vs PyTorch, single-process training step, same model sizes, batch,
# threads and optimizer. Runs each side ROUNDS times alternately and keeps
# the best steps/s of each (the machine is noisy). Prints a Markdown table.
# OpenBLAS gets the same thread count on both sides: trident sets it itself
# (runtime::set_threads); PyTorch 1.13 does not, so it gets OPENBLAS_NUM_THREADS.
#   bash bench/run.sh [THREADS] [ROUNDS]     (make bench)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_step
echo "| model | batch | threads | trident steps/s | PyTorch steps/s | ratio |"
echo "|---|---|---|---|---|---|"
for spec in mlp:128:200 cnn:128:20 inception:128:20 mmt:64:100; do
  IFS=: read -r model batch steps <<<"$spec"
  best_t=0; best_p=0
  for _ in $(seq "$rounds"); do
    t=$("$bin" "$model" "$batch" "$threads" "$steps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps_per_s"])')
    p=$(OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["steps_per_s"])')
    best_t=$(python3 -c "print(max($best_t, $t))"); best_p=$(python3 -c "print(max($best_p, $p))")
  done
  python3 -c "print(f'| $model | $batch | $threads | {$best_t:.2f} | {$best_p:.2f} | {$best_t/$best_p:.3f} |')"
done
