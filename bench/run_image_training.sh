#!/usr/bin/env bash
# End to end from JPEGs: a branched CNN (inception/tiny) trained from
# Fashion-MNIST re-encoded as 56x56 JPEGs in class folders (resized back to
# 28 and normalised by the loader) beside the same model trained from the
# in-memory arrays: the same samples, seed, steps and optimizer. Reports test
# accuracy, samples/s and the mean data_wait_s of both. Prints a Markdown
# table.
#   bash bench/run_image_training.sh [TRAIN] [TEST] [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
train=${1:-10000}; test=${2:-2000}; epochs=${3:-2}
dir=${TRIDENT_BENCH_DIR:-/tmp/trident-bench-fmnist-jpeg}
bin=${BUILD:-build}/tools/trident/trident
peer=$(bash scripts/install-peers.sh | tail -1)
if [ ! -f "$dir/done-$train-$test" ]; then
  rm -rf "$dir"; mkdir -p "$dir"
  "$peer" - "$dir" "$train" "$test" <<'PYEOF'
import gzip, os, sys
import numpy as np
from PIL import Image
root, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = "/usr/share/datasets/fashion-mnist"
def read(name, offset):
    return np.frombuffer(gzip.open(os.path.join(src, name)).read(), np.uint8, offset=offset)
for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
    x = read(prefix + "-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)[:n]
    y = read(prefix + "-labels-idx1-ubyte.gz", 8)[:n]
    for i in range(n):
        path = "%s/%s/%d/%05d.jpg" % (root, split, y[i], i)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(x[i]).resize((56, 56), Image.BICUBIC).save(path, quality=92)
PYEOF
  touch "$dir/done-$train-$test"
fi
common=(--config /dev/null --set model.name=inception --set train.epochs="$epochs" --set train.mini_batch=64
        --set train.threads=2 --set train.log_every=20 --set optimizer.name=sgd --set optimizer.lr=0.05
        --set optimizer.momentum=0.9 --set checkpoint.every=0 --set runs_dir="$dir/runs")
"$bin" train "${common[@]}" --set name=arrays --set data.name=fashion-mnist --set data.train_size="$train" \
  --set data.test_size="$test" > "$dir/arrays.out" 2>&1
tf='[{resize: [28, 28]}, {normalize: {mean: [0.2860], std: [0.3530]}}]'
"$bin" train "${common[@]}" --set name=jpeg --set data.name=images --set data.train="$dir/train" --set data.test="$dir/test" \
  --set "data.transforms=$tf" --set "data.eval_transforms=$tf" > "$dir/jpeg.out" 2>&1
summary() {  # summary RUN: test accuracy, mean samples/s, mean data_wait_s
  python3 - "$dir/runs/$1/metrics.jsonl" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l for l in lines if "samples_per_s" in l]
acc = [l["test_accuracy"] for l in lines if "test_accuracy" in l][-1]
print("%.2f%% | %.0f | %.4f" % (100 * acc, sum(l["samples_per_s"] for l in train) / len(train),
                                 sum(l["data_wait_s"] for l in train) / len(train)))
PYEOF
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; inception/tiny, $train train and $test test samples, $epochs epochs, batch 64, SGD lr 0.05 momentum 0.9, 2 threads"
echo
echo "| data | test accuracy | samples/s | data_wait_s per step |"
echo "|---|---|---|---|"
echo "| Fashion-MNIST arrays in memory | $(summary arrays) |"
echo "| the same images as 56x56 JPEGs, decoded and resized to 28 by the loader | $(summary jpeg) |"
