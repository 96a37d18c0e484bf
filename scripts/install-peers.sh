#!/usr/bin/env bash
# The project environment (Note [One LibTorch], docs/design.md): a virtual
# environment with the `torch` wheel from the Python package index,
# torchvision (with pillow) and numpy. The default build links that wheel's
# LibTorch, and the tests, the exporter (tools/export) and the PyTorch peers
# of the benchmarks run its Python, so both sides are one PyTorch version.
# It lives in $TRIDENT_PEERS, default ~/.cache/trident/peers, outside any
# checkout, so clean clones and `make clean` keep it (about 5 GB: the wheel
# on the index is the CUDA one, with its nvidia-* libraries; a CPU run loads
# none of them). Idempotent: when the environment already imports the wanted
# torch it only prints the version. TRIDENT_PEERS_TORCH is the pip
# requirement of the wheel, default torch==2.15.0 (the version trident is
# tested with); an environment with another torch is made again. Prints the
# environment's python on its last line.
#   bash scripts/install-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${TRIDENT_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/trident/peers}
py=$dir/bin/python
want=${TRIDENT_PEERS_TORCH:-torch==2.15.0}
pinned=""
case $want in torch==*) pinned=${want#torch==} ;; torch) ;;
  *) echo "install-peers: TRIDENT_PEERS_TORCH='$want': give torch or torch==VERSION" >&2; exit 2 ;; esac
has_wanted_torch() {
  [ -z "$pinned" ] || [ "$("$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$pinned" ]
}
if [ -x "$py" ] && "$py" -c 'import torch, numpy' 2>/dev/null && has_wanted_torch; then
  if ! "$py" -c 'import torchvision' 2>/dev/null; then  # bench/run_aten.sh's resnet18 (added later)
    "$py" -m pip install --quiet --progress-bar off --disable-pip-version-check torchvision pillow >&2
  fi
  echo "install-peers: $dir has torch $("$py" -c 'import torch; print(torch.__version__)')" >&2
  echo "$py"
  exit 0
fi
# Debian's python3 makes the environment (python3-venv gives it pip).
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq python3-venv >&2
fi
rm -rf "$dir"
/usr/bin/python3 -m venv "$dir"
echo "install-peers: installing torch and numpy from the Python package index into $dir (about 3 GB, a few minutes)" >&2
"$py" -m pip install --quiet --progress-bar off --disable-pip-version-check "$want" torchvision pillow numpy >&2
echo "install-peers: $dir has torch $("$py" -c 'import torch; print(torch.__version__)')" >&2
echo "$py"
