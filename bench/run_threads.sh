#!/usr/bin/env bash
# One pool of workers against two (Note [CPU process settings] in
# lib/process/include/trident/process/process.h): the training step of the bench
# models and of gpt2-124m (bench_step, fp32) in one build, run as it is —
# OpenBLAS's OpenMP build on LibTorch's libgomp, libgomp's default wait — and
# as trident ran until 2026-12-05: OpenBLAS's pthreads build (its own pool,
# put first by LD_LIBRARY_PATH) with OMP_WAIT_POLICY=PASSIVE. Rounds
# alternate the two; each cell is the median of ROUNDS runs. Prints a
# Markdown table.
#   bash bench/run_threads.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-2}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_step
pthreads=/usr/lib/$(gcc -print-multiarch)/openblas-pthread
[ -e "$pthreads/libblas.so.3" ] || { echo "run_threads: no $pthreads/libblas.so.3 (apt-get install libopenblas0-pthread)" >&2; exit 2; }
rate() { field samples_per_s; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $threads threads"
echo "one pool: $("${BUILD:-build}/tools/trident/trident" version | sed -n 's/^BLAS: //p')"
echo "two pools: $(LD_LIBRARY_PATH=$pthreads OMP_WAIT_POLICY=PASSIVE "${BUILD:-build}/tools/trident/trident" version | sed -n 's/^BLAS: //p'), OMP_WAIT_POLICY=PASSIVE"
echo
echo "| model | batch | one pool samples/s | two pools samples/s | one / two | runs (one; two) |"
echo "|---|---|---|---|---|---|"
for spec in mlp:128:400:tiny cnn:128:40:tiny mmt:64:200:tiny transformer:64:60:tiny gpt:1:3:gpt2-124m; do
  IFS=: read -r model batch steps preset <<<"$spec"
  one=(); two=()
  for _ in $(seq "$rounds"); do
    one+=("$("$bin" "$model" "$batch" "$threads" "$steps" "$preset" | rate)")
    two+=("$(LD_LIBRARY_PATH=$pthreads OMP_WAIT_POLICY=PASSIVE "$bin" "$model" "$batch" "$threads" "$steps" "$preset" | rate)")
  done
  a=$(median "${one[@]}"); b=$(median "${two[@]}")
  python3 -c "print('| $model ($preset) | $batch | %.4g | %.4g | %.2f | ${one[*]}; ${two[*]} |' % ($a, $b, $a / $b))"
done
