#!/usr/bin/env bash
# Before and after a LibTorch move (Note [One LibTorch], docs/design.md):
# the training step of the bench models (tiny presets, fp32 and bf16) in two
# builds of trident on this machine — OLD (default build-old: e.g. another
# project environment, `TRIDENT_PEERS=DIR TRIDENT_PEERS_TORCH=torch==X make
# build BUILD=build-old`; the figures of issue 53 compared Debian's LibTorch
# 1.13, a variant removed since, commit 33b2340 and before) and NEW (default
# build), whose float32 products run on OpenBLAS (Note [One LibTorch]) — and
# NEW once more with the
# wheel's own MKL doing them (libtorch_cpu preloaded, so its sgemm_ comes
# first; `trident version` then says "LibTorch's products: MKL").
# Same batch, threads and steps; rounds alternate the three; each cell is the
# median of ROUNDS runs. Prints a Markdown table.
#   bash bench/run_libtorch.sh [THREADS] [ROUNDS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-2}; rounds=${2:-3}; batch=${3:-64}; steps=${STEPS:-100}
old=${OLD:-build-old}; new=${NEW:-build}
for b in "$old" "$new"; do
  [ -x "$b/bench/bench_step" ] || { echo "run_libtorch: no $b/bench/bench_step (cmake --build $b --target bench_step)" >&2; exit 2; }
done
rate() { field samples_per_s; }
v() { "$1/tools/trident/trident" version | head -2 | tr '\n' ' '; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $threads threads; batch $batch"
echo "OLD: $(v "$old")"
echo "NEW: $(v "$new")"
echo
mkl=$(grep -m1 '^TRIDENT_TORCH_DIR:' "$new/CMakeCache.txt" | cut -d= -f2)/lib/libtorch_cpu.so
echo "NEW+MKL: $(LD_PRELOAD=$mkl "$new/tools/trident/trident" version | sed -n 2p)"
echo
echo "| model | precision | OLD samples/s | NEW samples/s | NEW+MKL samples/s | NEW / OLD | NEW+MKL / NEW | runs (OLD; NEW; NEW+MKL) |"
echo "|---|---|---|---|---|---|---|---|"
for model in mlp cnn transformer mmt; do
  for precision in fp32 bf16; do
    a=(); b=(); c=()
    for _ in $(seq "$rounds"); do
      a+=("$("$old/bench/bench_step" "$model" "$batch" "$threads" "$steps" tiny cpu "$precision" | rate)")
      b+=("$("$new/bench/bench_step" "$model" "$batch" "$threads" "$steps" tiny cpu "$precision" | rate)")
      c+=("$(LD_PRELOAD=$mkl "$new/bench/bench_step" "$model" "$batch" "$threads" "$steps" tiny cpu "$precision" | rate)")
    done
    python3 -c 'import sys; m, p, ra, rb, rc = sys.argv[1:]
f = lambda s: ", ".join("%.0f" % float(x) for x in s.split())
med = lambda s: sorted(map(float, s.split()))[(len(s.split()) - 1) // 2]
a, b, c = med(ra), med(rb), med(rc)
print("| %s | %s | %.0f | %.0f | %.0f | %.2f | %.2f | %s; %s; %s |" % (m, p, a, b, c, b / a, c / b, f(ra), f(rb), f(rc)))' \
      "$model" "$precision" "${a[*]}" "${b[*]}" "${c[*]}"
  done
done
