#!/usr/bin/env bash
# The peer environment for benchmarks against a current PyTorch (issue 15):
# a virtual environment under build/peers (or $TRIDENT_PEERS) with the
# default `torch` wheel from the Python package index (it runs on CPU without
# a GPU), torchvision (with pillow) and numpy. Idempotent: when the environment already imports torch it
# only prints the version. `make test` and `make demo` never use it; the peer
# benchmarks call this script on first use. Prints the environment's python
# on its last line. TRIDENT_PEERS_TORCH pins the wheel (a pip requirement,
# e.g. torch==2.15.0, as CI does); an environment with another torch is then
# made again.
#   bash scripts/install-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${TRIDENT_PEERS:-build/peers}
py=$dir/bin/python
want=${TRIDENT_PEERS_TORCH:-torch}
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
