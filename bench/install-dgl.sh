#!/usr/bin/env bash
# DGL for the sampled-GNN benchmark (bench/run_sampled.sh): a virtual
# environment ($TRIDENT_DGL, default ~/.cache/trident/dgl) with DGL 1.1.3
# from the package index, using the peer environment's torch
# (scripts/install-peers.sh) through a .pth file. DGL 2.1.0 (the newest on
# the index) installs but does not run beside torch 2.15: its dataloading
# loads graphbolt, built only for torch 2.1/2.2 (libgraphbolt_pytorch_2.15.0.so
# is missing); 1.1.3 has no graphbolt and reaches torch through DLPack.
# Idempotent. Prints the environment's python on its last line.
#   bash bench/install-dgl.sh
set -euo pipefail
cd "$(dirname "$0")/.."
peers=$(bash scripts/install-peers.sh | tail -1)
dir=${TRIDENT_DGL:-${XDG_CACHE_HOME:-$HOME/.cache}/trident/dgl}
py=$dir/bin/python
if [ -x "$py" ] && "$py" -c 'import dgl, torch' 2>/dev/null; then
  echo "install-dgl: $dir has dgl $("$py" -c 'import dgl; print(dgl.__version__)' 2>/dev/null)" >&2
  echo "$py"; exit 0
fi
rm -rf "$dir"
/usr/bin/python3 -m venv "$dir" >&2
"$py" -m pip install --quiet --progress-bar off --disable-pip-version-check dgl==1.1.3 "numpy<2" scipy networkx \
  requests tqdm psutil packaging pyyaml pydantic >&2
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$peers" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/trident-peers.pth"
"$py" -c 'import dgl, torch' >&2
echo "install-dgl: $dir has dgl $("$py" -c 'import dgl; print(dgl.__version__)' 2>/dev/null)" >&2
echo "$py"
