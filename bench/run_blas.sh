#!/usr/bin/env bash
# The BLAS a Debian 12 user can put under LibTorch 1.13, timed with trident's
# training step (bench_step) beside PyTorch 2.x (its own MKL/oneDNN), in one
# run, medians of ROUNDS alternating rounds (see Note [BLAS kernel] in
# lib/process/include/trident/process/blas.h; docs/benchmarks.md):
# - Debian's OpenBLAS 0.3.21 with the kernel it detects, and with each x86-64
#   kernel family forced (OPENBLAS_CORETYPE; Prescott is the fallback of a CPU
#   it does not know);
# - BLIS 0.9.0 (Debian, libblis4-pthread), Intel MKL 2020.4 (Debian non-free,
#   libmkl-rt), each put in front of libblas.so.3 by LD_LIBRARY_PATH;
# - a current OpenBLAS (the scipy-openblas32 wheel from the Python package
#   index; Debian 13's 0.3.29 needs glibc 2.38), through blas_prefix_shim.
# Nothing is installed system-wide: the packages are unpacked under
# build/blas-alternatives.
#   bash bench/run_blas.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-1}; rounds=${2:-3}
build=${BUILD:-build}
cmake --build "$build" --target bench_step blas_prefix_shim >/dev/null  # the shim is left out of the default build
bin=$build/bench/bench_step
alt=$build/blas-alternatives
peer=$(bash scripts/install-peers.sh | tail -1)
if [ ! -d "$alt/x" ]; then
  mkdir -p "$alt/lists/partial" "$alt/debs" "$alt/x"
  echo "deb http://deb.debian.org/debian bookworm main non-free" > "$alt/sources.list"
  o=(-o Dir::Etc::SourceList="$PWD/$alt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$PWD/$alt/lists")
  apt-get "${o[@]}" update -qq >&2
  mkl=(rt intel-lp64 gf-lp64 gnu-thread sequential core def avx2 avx512 vml-def vml-avx512 locale)
  (cd "$alt/debs" && apt-get "${o[@]}" download -qq libblis4-pthread "${mkl[@]/#/libmkl-}" >&2 2>/dev/null)
  for f in "$alt"/debs/*.deb; do dpkg -x "$f" "$alt/x"; done
  "$peer" -m pip download --quiet --no-deps scipy-openblas32 -d "$alt/wheels" >&2
  python3 -m zipfile -e "$alt"/wheels/scipy_openblas32-*.whl "$alt/wheels/x"
fi
lib=$PWD/$alt/x/usr/lib/x86_64-linux-gnu
current=$(ls "$PWD/$alt"/wheels/x/scipy_openblas32/lib/libscipy_openblas*.so | head -1)
current_version=$(basename "$alt"/wheels/scipy_openblas32-*.whl | cut -d- -f2 | cut -d. -f1-3)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
detected=$("$build/tools/trident/trident" version | sed -n 's/^BLAS: //p')
peer_version=$("$peer" -c 'import torch; print(torch.__version__)')
rate() { field steps_per_s; }
# column name | environment
columns=(
  "OpenBLAS 0.3.21 as detected|"
  "0.3.21 Prescott|OPENBLAS_CORETYPE=Prescott"
  "0.3.21 Haswell|OPENBLAS_CORETYPE=Haswell"
  "0.3.21 SkylakeX|OPENBLAS_CORETYPE=SkylakeX"
  "0.3.21 Cooperlake|OPENBLAS_CORETYPE=Cooperlake"
  "BLIS 0.9.0|LD_LIBRARY_PATH=$lib/blis-pthread"
  "MKL 2020.4|LD_LIBRARY_PATH=$lib/mkl:$lib MKL_THREADING_LAYER=GNU MKL_INTERFACE_LAYER=GNU,LP64"
  "OpenBLAS $current_version|LD_PRELOAD=$PWD/$build/bench/libblas_prefix_shim.so BLAS_PREFIX_SHIM_LIBRARY=$current"
)
echo "CPU: $cpu; trident's BLAS: $detected; $threads thread(s); steps/s, medians of $rounds rounds"
echo
header="| model | batch |"; rule="|---|---|"
for c in "${columns[@]}"; do header+=" ${c%%|*} |"; rule+="---|"; done
echo "$header PyTorch $peer_version |"; echo "$rule---|"
for spec in mlp:128:400 transformer:64:60; do
  IFS=: read -r model batch steps <<<"$spec"
  declare -A runs=()
  for _ in $(seq "$rounds"); do
    for i in "${!columns[@]}"; do
      env_spec=${columns[$i]#*|}
      runs[$i]+="$(env $env_spec "$bin" "$model" "$batch" "$threads" "$steps" | rate) "
    done
    runs[peer]+="$("$peer" bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate) "
  done
  row="| $model | $batch |"
  for i in "${!columns[@]}"; do row+=" $(python3 -c 'import statistics,sys; print("%.1f" % statistics.median(map(float, sys.argv[1:])))' ${runs[$i]}) |"; done
  row+=" $(python3 -c 'import statistics,sys; print("%.1f" % statistics.median(map(float, sys.argv[1:])))' ${runs[peer]}) |"
  echo "$row"
  row="|  | runs |"
  for i in "${!columns[@]}" peer; do row+=" $(printf '%.0f ' ${runs[$i]})|"; done
  echo "$row"
  unset runs
done
