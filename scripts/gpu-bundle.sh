#!/usr/bin/env bash
# What the CUDA build needs beyond what a GPU machine has (its PyTorch, CUDA
# toolkit, CMake, ninja and compiler), for a GPU machine that reaches no
# package registry: Debian 12's packages of yaml-cpp, nlohmann-json, CLI11,
# GoogleTest and zlib, downloaded here and unpacked into DIR (default
# build/gpu-deps, a few MB). Carry DIR to the GPU machine and build there
# with TRIDENT_DEPS=DIR (scripts/build-cuda.sh then installs nothing).
#   bash scripts/gpu-bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/gpu-deps}
packages=(libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev zlib1g-dev zlib1g)
debs=$(mktemp -d); trap 'rm -rf "$debs"' EXIT
if ! (cd "$debs" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
  apt-get update -qq && (cd "$debs" && apt-get download "${packages[@]}" >/dev/null)
fi
rm -rf "$dir"; mkdir -p "$dir"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dir"; done
# Links to absolute paths (libz.so -> /lib/...) point into DIR instead.
find "$dir" -type l | while read -r link; do
  target=$(readlink "$link")
  if [ "${target#/}" != "$target" ] && [ -e "$dir$target" ]; then ln -sfnr "$dir$target" "$link"; fi
done
echo "gpu-bundle: $(ls "$debs" | wc -l) packages unpacked into $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: TRIDENT_DEPS=$dir" >&2
