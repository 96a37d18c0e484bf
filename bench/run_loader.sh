#!/usr/bin/env bash
# trident's image loader vs PyTorch's DataLoader (torchvision ImageFolder,
# RandomResizedCrop(224), flip, ToTensor, Normalize; persistent workers) on
# the same JPEG folder, the same cores, batch 64. Alternates the sides ROUNDS
# times and reports each side's median: images/s, CPU seconds per image,
# time to the first batch; trident's anonymous RSS (peak) and the decode
# ceiling (whole-image decodes/s on one thread). Prints a Markdown table.
# The corpus: IMAGES photo-like JPEGs (smooth random fields with texture
# and noise, 500x375 and 375x500, quality 90, 20 classes), made once in
# $TRIDENT_BENCH_DIR (default /tmp/trident-bench-images).
#   bash bench/run_loader.sh [ROUNDS] [BATCHES] [IMAGES]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-3}; batches=${2:-40}; count=${3:-3000}
dir=${TRIDENT_BENCH_DIR:-/tmp/trident-bench-images}
cmake --build "${BUILD:-build}" --target bench_loader >/dev/null  # left out of the default build
bin=${BUILD:-build}/bench/bench_loader
peer=$(bash scripts/install-peers.sh | tail -1)
if [ ! -f "$dir/done-$count" ]; then
  rm -rf "$dir"; mkdir -p "$dir"
  "$peer" - "$dir" "$count" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
root, count = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
for i in range(count):
    h, w = (375, 500) if i % 3 else (500, 375)
    yy, xx = np.mgrid[0:h, 0:w] / 60.0
    img = np.zeros((h, w, 3))
    for c in range(3):
        for _ in range(4):  # low-frequency structure
            fy, fx, ph = rng.uniform(0.2, 2.0, 2).tolist() + [rng.uniform(0, 6.3)]
            img[..., c] += np.sin(fy * yy + fx * xx + ph)
        img[..., c] += 0.6 * np.sin(rng.uniform(3, 9) * xx) * np.sin(rng.uniform(3, 9) * yy)  # texture
    img = (img - img.min()) / (img.max() - img.min()) * 220 + rng.normal(0, 6, (h, w, 3))
    path = "%s/train/class%02d/%05d.jpg" % (root, i % 20, i)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)
PYEOF
  touch "$dir/done-$count"
fi
corpus_mb=$(du -sm "$dir/train" | cut -f1)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
jpeg=$(dpkg-query -W -f='${Version}' libjpeg62-turbo 2>/dev/null || echo unknown)
echo "CPU: $cpu, $(nproc) cores; libjpeg-turbo $jpeg; torch $("$peer" -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)')"
echo "corpus: $count JPEGs, $corpus_mb MB ($dir/train); batch 64; $batches batches per run; median of $rounds alternating rounds"
echo
echo "| workers | trident images/s | DataLoader images/s | trident / DataLoader | trident CPU s/image | DataLoader CPU s/image | trident first batch s | DataLoader first batch s | trident anon RSS peak MB | decode ceiling images/s (1 thread) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for w in 1 2; do
  t_ips=(); p_ips=(); t_cpu=(); p_cpu=(); t_first=(); p_first=(); rss=(); ceil=()
  for r in $(seq "$rounds"); do
    t=$("$bin" "$dir/train" "$w" "$batches" 64 2 "$dir/cache")
    p=$("$peer" bench/pytorch_loader.py "$dir/train" "$w" "$batches" 64 2>/dev/null | tail -1)
    t_ips+=("$(echo "$t" | field images_per_s)"); p_ips+=("$(echo "$p" | field images_per_s)")
    t_cpu+=("$(echo "$t" | field cpu_s_per_image)"); p_cpu+=("$(echo "$p" | field cpu_s_per_image)")
    t_first+=("$(echo "$t" | field first_batch_s)"); p_first+=("$(echo "$p" | field first_batch_s)")
    rss+=("$(echo "$t" | field anon_rss_peak_mb)"); ceil+=("$(echo "$t" | field decode_ceiling_per_s)")
  done
  ti=$(median "${t_ips[@]}"); pi=$(median "${p_ips[@]}")
  printf '| %s | %.0f | %.0f | %.2f | %.4f | %.4f | %.2f | %.2f | %.0f | %.0f |\n' "$w" "$ti" "$pi" \
    "$(python3 -c "print($ti / $pi)")" "$(median "${t_cpu[@]}")" "$(median "${p_cpu[@]}")" \
    "$(median "${t_first[@]}")" "$(median "${p_first[@]}")" "$(median "${rss[@]}")" "$(median "${ceil[@]}")"
done
