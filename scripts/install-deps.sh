#!/usr/bin/env bash
# Installs every Debian package that trident's build, tests, demo and
# benchmarks need. Idempotent: runs `apt-get update` and `apt-get install`
# only when a package is missing. Needs root (or sudo) on Debian 12.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache g++ make pkg-config
  # LibTorch itself comes from the `torch` wheel of the project environment (scripts/install-peers.sh,
  # Note [One LibTorch] in docs/design.md), which ships no Gloo headers; c10d's Gloo header needs them
  # (Note [Backends] in comm/group.h)
  libgloo-dev
  # fast BLAS, OpenMP build: it shares LibTorch's pool of workers (cmake/openblas.cmake; without it libblas is
  # the reference BLAS, ~30x slower)
  libopenblas0-openmp
  # sgemm for batches of small matrices (see Note [Small batched products]), and the float32 products of
  # LibTorch itself (linked ahead of the wheel's MKL, cmake/wheel.cmake)
  libblas-dev
  # configs, plans, CLI, checkpoint checksums
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev zlib1g-dev
  # fuzzing (scripts/fuzz.sh): clang with libFuzzer, AddressSanitizer and UBSan runtimes
  clang libclang-rt-14-dev
  # tests (the benchmarks in bench/ are plain programs that print JSON beside their PyTorch peers)
  libgtest-dev libgmock-dev
  # data: Fashion-MNIST; JPEG and PNG decoding for image folders and tar shards (lib/images)
  dataset-fashion-mnist libjpeg62-turbo-dev libpng-dev
  # graph partitioning for GNNs' graph parallelism (a METIS node order, docs/gnn.md)
  libmetis-dev
  # the stage-graph picture of `trident report`
  graphviz
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2; exit 2; }
  sudo=sudo
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
