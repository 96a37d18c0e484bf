#!/usr/bin/env bash
# ATen's own CPU kernels (elementwise, softmax, norms, reductions, the
# optimizer's arithmetic — what neither the BLAS nor oneDNN computes) at
# AVX2 against AVX-512 (ATEN_CPU_CAPABILITY, read when LibTorch loads), timed
# with trident's training step (bench_step) in fp32 and in bf16, same run,
# medians of ROUNDS alternating rounds (see Note [ATen CPU kernels] in
# lib/process/include/trident/process/process.h; docs/benchmarks/precision.md).
#   bash bench/run_kernels.sh [THREADS] [ROUNDS] [PRESET] [MODEL:BATCH:STEPS ...]
# The first line names the CPU and its AVX-512 and bf16 flags: compare only within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-1}; rounds=${2:-3}; preset=${3:-tiny}; shift $(( $# < 3 ? $# : 3 ))
specs=${*:-mlp:128:40 cnn:64:6 inception:64:4 transformer:64:4}
build=${BUILD:-build}
cmake --build "$build" --target bench_step >/dev/null
bin=$build/bench/bench_step
rate() { field steps_per_s; }
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512(f|bw|vl|dq)|avx512_bf16|amx_bf16)$' | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); flags: ${flags:-no AVX-512}; threads $threads"
echo
echo "| model ($preset, batch) | precision | AVX2 steps/s | AVX-512 steps/s | AVX-512 / AVX2 |"
echo "|---|---|---|---|---|"
for spec in $specs; do
  IFS=: read -r model batch steps <<<"$spec"
  for p in fp32 bf16; do
    a=""; b=""
    for _ in $(seq "$rounds"); do
      a+=" $(ATEN_CPU_CAPABILITY=avx2 "$bin" "$model" "$batch" "$threads" "$steps" "$preset" cpu "$p" | rate)"
      b+=" $(ATEN_CPU_CAPABILITY=avx512 "$bin" "$model" "$batch" "$threads" "$steps" "$preset" cpu "$p" | rate)"
    done
    python3 - "$model ($batch)" "$p" "$a" "$b" <<'PY'
import statistics, sys
a, b = (statistics.median(float(x) for x in s.split()) for s in sys.argv[3:5])
print("| %s | %s | %.2f | %.2f | %.2f |" % (sys.argv[1], sys.argv[2], a, b, b / a))
PY
  done
done
