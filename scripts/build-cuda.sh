#!/usr/bin/env bash
# Builds trident's CUDA variant (docs/gpu.md) in DIR (default build-cuda)
# against the LibTorch inside a CUDA `torch` wheel:
#   - $TRIDENT_TORCH, that wheel's torch directory — e.g. the PyTorch already
#     on a GPU machine: python -c 'import torch, os; print(os.path.dirname(torch.__file__))'
#   - else the peer environment's (scripts/install-peers.sh installs it from
#     the Python package index on first use).
# The wheel's CMake files look for the CUDA toolkit (nvcc): /usr/local/cuda,
# or $CUDA_HOME. No GPU is needed to compile and link. $TRIDENT_DEPS, a
# prefix made by scripts/gpu-bundle.sh, stands in for the Debian packages on
# a machine without a package registry; $TARGETS builds only those targets.
#   bash scripts/build-cuda.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-cuda}
jobs=${JOBS:-2}
deps_prefix=""
if [ -n "${TRIDENT_DEPS:-}" ]; then
  deps_prefix=";$(cd "$TRIDENT_DEPS" && pwd)/usr"
else
  bash scripts/install-deps.sh
fi
torch_dir=${TRIDENT_TORCH:-}
if [ -z "$torch_dir" ]; then
  py=$(bash scripts/install-peers.sh | tail -1)
  torch_dir=$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
fi
if [ ! -f "$torch_dir/share/cmake/Torch/TorchConfig.cmake" ]; then
  echo "build-cuda: TRIDENT_TORCH=$torch_dir has no share/cmake/Torch/TorchConfig.cmake (give the torch directory of a wheel)" >&2
  exit 2
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "build-cuda: no CUDA toolkit at $cuda (set CUDA_HOME to one with bin/nvcc)" >&2
  exit 2
fi
echo "build-cuda: LibTorch from $torch_dir, CUDA toolkit $cuda, into $dir" >&2
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIDENT_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$torch_dir$deps_prefix" -DCUDAToolkit_ROOT="$cuda" -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" \
  -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-8.0;9.0}" \
  ${CMAKE_FLAGS:-} >/dev/null
cmake --build "$dir" -j"$jobs" ${TARGETS:+--target $TARGETS}
