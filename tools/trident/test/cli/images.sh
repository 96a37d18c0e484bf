#!/usr/bin/env bash
# Streamed data (docs/data.md): an image folder and the same images as WebDataset tar shards, decoded and
# augmented in C++ threads, give the same batches whatever the workers, plan, process count or restarts
# (compared by TRIDENT_TEST_SAMPLE_LOG's per-sample hashes, Note [Test hooks]); a 3-process graph pipeline
# trains to one process's weights; bad data exits 2 naming the file, or is replaced and counted.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
# Fashion-MNIST re-encoded: 36x36 grey JPEGs (and every fifth a PNG) in class folders, 480 train, 96 test; the
# same train images as 4 tar shards of 120, in the folder's order (class by class, names sorted).
"$py" - "$work" <<'PYEOF' || { echo "FAIL images: PIL"; exit 1; }
import gzip, io, os, sys, tarfile
import numpy as np
from PIL import Image
root, src = sys.argv[1], "/usr/share/datasets/fashion-mnist"
def read(name, offset):
    return np.frombuffer(gzip.open(os.path.join(src, name)).read(), np.uint8, offset=offset)
x = read("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
y = read("train-labels-idx1-ubyte.gz", 8)
def encode(i):
    img = Image.fromarray(x[i]).resize((36, 36), Image.BILINEAR)
    out = io.BytesIO()
    img.save(out, "PNG" if i % 5 == 0 else "JPEG", quality=90)
    return out.getvalue(), "png" if i % 5 == 0 else "jpg"
samples = {}
for split, ids in (("train", range(480)), ("test", range(480, 576))):
    for i in ids:
        data, ext = encode(i)
        path = "%s/%s/c%d/%05d.%s" % (root, split, y[i], i, ext)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(data)
        if split == "train": samples.setdefault(int(y[i]), []).append((i, ext, data))
order = [s + (c,) for c in sorted(samples) for s in sorted(samples[c], key=lambda t: "%05d.%s" % (t[0], t[1]))]
os.makedirs(root + "/shards")
for k in range(4):
    with tarfile.open("%s/shards/train-%03d.tar" % (root, k), "w") as tar:
        for i, ext, data, label in order[120 * k:120 * (k + 1)]:
            for name, payload in (("%05d.%s" % (i, ext), data), ("%05d.cls" % i, str(label).encode())):
                info = tarfile.TarInfo(name); info.size = len(payload); tar.addfile(info, io.BytesIO(payload))
PYEOF
aug='[{random_resized_crop: {size: 28, scale: [0.5, 1]}}, horizontal_flip, {normalize: {mean: [0.5], std: [0.5]}}]'
img=(--config /dev/null --set model.name=cnn --set data.name=images --set data.train="$work/train" --set data.test="$work/test"
     --set "data.transforms=$aug" --set train.mini_batch=24 --set train.threads=1 --set parallel.cluster=cpu-local
     --set optimizer.name=sgd --set optimizer.lr=0.05 --set optimizer.schedule=constant --set optimizer.warmup_steps=0
     --set checkpoint.every=0)
run() {  # run NAME ARGS...: trains with a sample log in $work/log-NAME
  local name=$1; shift
  mkdir -p "$work/log-$name"
  TRIDENT_TEST_SAMPLE_LOG="$work/log-$name" "$bin" train "${img[@]}" --set runs_dir="$work/runs" --set name=$name "$@" \
    > "$work/$name.out" 2>&1 || { echo "FAIL $name: exit $?: $(tail -3 "$work/$name.out")"; fails=$((fails+1)); }
}
# The image lines of a run's sample logs (step, id, field, hash of its bytes), sorted.
samples() { cat "$work/log-$1"/samples.rank*.txt | grep ' image ' | sort; }
same_samples() {  # same_samples NAME A B: the two runs were given the same samples, byte for byte
  if cmp -s <(samples "$2") <(samples "$3"); then passes=$((passes+1)); echo "ok $1: $(samples "$2" | wc -l) samples"
  else echo "FAIL $1: $(diff <(samples "$2") <(samples "$3") | head -4)"; fails=$((fails+1)); fi
}
# It learns from augmented images: 4 epochs, test accuracy well above chance (10 classes).
run learn --set train.epochs=4 --set train.eval=true --set data.workers=2
acc=$(sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p' "$work/learn.out")
if [ -n "$acc" ] && python3 -c "import sys; sys.exit(0 if float('$acc') > 40 else 1)" && grep -q '"data_wait_s"' "$work/runs/learn/metrics.jsonl"; then
  echo "ok learns: test accuracy $acc%"; passes=$((passes+1)); else echo "FAIL learns: '$acc'% $(tail -2 "$work/learn.out")"; fails=$((fails+1)); fi
# Workers change nothing: 1 and 3 decoding threads, the same samples and the same weights.
# Bitwise: one process, one compute thread, the same ops on the same shapes; only the decoding threads differ.
run w1 --set train.steps=10 --set train.eval=false --set data.workers=1
run w3 --set train.steps=10 --set train.eval=false --set data.workers=3 --set data.prefetch=4
same_samples workers-same-samples w1 w3
same_weights workers-same-weights "$work/runs/w1" "$work/runs/w3" --rtol 0 --atol 0
# Tar shards of the same images in the same order: the same samples as the folder.
run tar --set train.steps=10 --set train.eval=false --set data.name=tar --set data.train="$work/shards/train-{000..003}.tar" \
  --set data.test="$work/shards/train-000.tar"
same_samples tar-equals-folder w1 tar
# A 3-process graph pipeline (the branches of inception as stages) trains to one process's weights; its
# first stage reads the images, every stage's rows together are the global batch. See Note [Stable
# trajectories]: SGD at a constant lr 0.05; atol 1e-5 + rtol 1e-4, as cli/pipeline.sh.
run one --set model.name=inception --set train.steps=6 --set train.eval=false
run pipe --set model.name=inception --set train.steps=6 --set train.eval=false --nproc 3 --set parallel.devices=3 \
  --set parallel.partitioner=graphpipe --set parallel.micro_batch=8
grep -q "graphpipe plan of" "$work/pipe.out" && passes=$((passes+1)) || { echo "FAIL pipeline-plan: $(head -2 "$work/pipe.out")"; fails=$((fails+1)); }
same_samples pipeline-same-samples one pipe
# Every stage's rows of a step are the same samples: the images the first stage read, the labels the loss stage read.
ids_of() { cat "$work/log-pipe"/samples.rank*.txt | grep " $1 " | cut -d' ' -f1,2 | sort; }
if [ -n "$(ids_of label)" ] && cmp -s <(ids_of image) <(ids_of label); then passes=$((passes+1))
else echo "FAIL pipeline-stages-read-one-batch: $(diff <(ids_of image) <(ids_of label) | head -3)"; fails=$((fails+1)); fi
same_weights pipeline-equals-one "$work/runs/one" "$work/runs/pipe" --rtol 1e-4 --atol 1e-5
# Exact resume: 4 steps, then a resume to 10, sees the samples of the uninterrupted run, and its weights.
# Bitwise: one process, one thread, the same ops in the same order; a resume reads back exact fp32 weights.
run half --set train.steps=4 --set train.eval=false --set data.workers=1
TRIDENT_TEST_SAMPLE_LOG="$work/log-half" "$bin" train --resume "$work/runs/half" --set train.steps=10 > "$work/half2.out" 2>&1 \
  || { echo "FAIL resume: $(tail -2 "$work/half2.out")"; fails=$((fails+1)); }
same_samples resume-same-samples w1 half
same_weights resume-same-weights "$work/runs/w1" "$work/runs/half" --rtol 0 --atol 0
# Elastic: data parallel on 4, then 2, then 3 processes (a global batch of 24 divides among each) sees
# each step's samples exactly once, as one process does.
run el --set train.steps=3 --set train.eval=false --nproc 4 --set parallel.devices=4
for n in 2 3; do
  steps=$([ $n = 2 ] && echo 6 || echo 10)
  TRIDENT_TEST_SAMPLE_LOG="$work/log-el" "$bin" train --resume "$work/runs/el" --nproc $n --set parallel.devices=$n \
    --set train.steps=$steps > "$work/el$n.out" 2>&1 || { echo "FAIL elastic-$n: $(tail -2 "$work/el$n.out")"; fails=$((fails+1)); }
done
same_samples elastic-4-2-3-same-samples w1 el
# `trident data inspect` sees what training sees.
out=$("$bin" data inspect "$work/shards/train-{000..003}.tar" 2>&1)
printf '%s' "$out" | grep -q "^samples: 480" && passes=$((passes+1)) || { echo "FAIL inspect: $out"; fails=$((fails+1)); }
# `trident plan` sets this machine's calibrated decode rate (here a stand-in: 500 JPEGs/s per thread) beside
# the plan's samples/s: the decoding threads it takes, rounded up.
mkdir -p "$work/lrc"; echo '{"images_per_s_per_thread": 500}' > "$work/lrc/loader-$(hostname).json"
out=$(TRIDENT_CACHE_DIR="$work/lrc" "$bin" plan --model inception --cluster cpu-local --devices 2 --mini-batch 256 2>&1)
note=$(printf '%s\n' "$out" | grep "^image data: this machine decodes 500 JPEGs/s per thread")
if [ -n "$note" ] && python3 - "$note" <<'PYEOF'
import math, re, sys
rate, threads = re.search(r"; ([0-9.]+) samples/s takes ([0-9]+) decoding", sys.argv[1]).groups()
sys.exit(0 if int(threads) == math.ceil(float(rate) / 500) else 1)
PYEOF
then passes=$((passes+1)); else echo "FAIL plan-loader-note: $note"; fails=$((fails+1)); fi
# Bad data: one line, exit 2, naming the file (and the sample, when found while training).
cp -r "$work/train" "$work/bad"
victim=$(ls "$work/bad/c3/"*.jpg | head -1)
head -c 300 "$victim" > "$work/cut.jpg" && mv "$work/cut.jpg" "$victim"
check truncated-image 2 "$victim" -- train "${img[@]}" --set runs_dir="$work/runs" --set name=bad --set data.train="$work/bad" --set train.steps=20 --set train.eval=false
out=$("$bin" train "${img[@]}" --set runs_dir="$work/runs" --set name=skip --set data.train="$work/bad" --set train.steps=20 \
      --set train.eval=false --set data.on_bad_sample=skip --set train.log_every=20 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q '"bad_samples":1' "$work/runs/skip/metrics.jsonl" && grep -q "$victim" "$work/runs/skip/bad_samples.rank0.jsonl" \
   && printf '%s' "$out" | grep -q "1 bad samples were replaced"; then passes=$((passes+1)); else echo "FAIL skip-bad-sample: exit $rc: $out"; fails=$((fails+1)); fi
check inspect-finds-it 2 "$victim" -- data inspect "$work/bad" --check
rm "$victim"; printf 'not an image\n' > "$work/bad/c3/notes.jpg"
check text-as-jpeg 2 "notes.jpg): neither a JPEG nor a PNG" -- train "${img[@]}" --set runs_dir="$work/runs" --set name=bad2 --set data.train="$work/bad" --set train.steps=20 --set train.eval=false
mkdir "$work/bad/c99"
check empty-class 2 "class folder 'c99' holds no image" -- train "${img[@]}" --set data.train="$work/bad"
: > "$work/shards/empty.tar"
check empty-shard 2 "the archive is empty" -- train "${img[@]}" --set data.name=tar --set data.train="$work/shards/empty.tar"
"$py" -c "import tarfile, io, sys
t = tarfile.open(sys.argv[1], 'w'); i = tarfile.TarInfo('k.jpg'); i.size = 3; t.addfile(i, io.BytesIO(b'abc')); t.close()" "$work/shards/nolabel.tar"
check shard-without-label 2 "sample 'k' has an image but no label" -- train "${img[@]}" --set data.name=tar --set data.train="$work/shards/nolabel.tar"
"$py" -c "import tarfile, io, sys
t = tarfile.open(sys.argv[1], 'w')
for name, data in (('k.png', open(sys.argv[2], 'rb').read()), ('k.cls', b'12')):
    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
t.close()" "$work/shards/class12.tar" "$(ls "$work/train/c0/"*.png | head -1)"
check label-outside-classes 2 "has 13 classes but model 'cnn' predicts 10" -- train "${img[@]}" --set data.name=tar --set data.train="$work/shards/class12.tar" --set data.test="$work/shards/class12.tar"
check bad-transform 2 "data.transforms[0] = rotate: unknown transform" -- train "${img[@]}" --set 'data.transforms=[rotate]'
# Resuming on other data would train other batches: refused.
rm "$(ls "$work/train/c0/"* | head -1)"
check resume-changed-data 2 "the training data's samples was 480 at the checkpoint and is 479 now" -- train --resume "$work/runs/half" --set train.steps=12
# Token files: nanoGPT's uint16 .bin trains gpt; an id past the vocabulary and a Megatron .idx that disagrees with its .bin are refused.
"$py" - "$work" <<'PYEOF'
import sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(0)
start, step = rng.integers(0, 64, 300), rng.integers(1, 6, 300)
stream = ((start[:, None] + step[:, None] * np.arange(33)) % 64).astype(np.uint16).ravel()
stream.tofile(w + "/tokens.bin")
n = (len(stream) - 1) // 32  # Note [Token streams]: sample i is ids [32 i, 32 i + 33)
np.save(w + "/windows.npy", np.stack([stream[32 * i:32 * i + 33] for i in range(n)]).astype(np.int64))
bad = np.arange(100, dtype=np.uint16); bad[50] = 64; bad.tofile(w + "/bad.bin")
np.arange(40, dtype=np.int32).tofile(w + "/m.bin")
idx = b"MMIDIDX\x00\x00" + np.uint64(1).tobytes() + np.uint8(4).tobytes() + np.uint64(1).tobytes() + np.uint64(2).tobytes()
idx += np.int32(30).tobytes() + np.int64(0).tobytes() + np.int64(0).tobytes() + np.int64(1).tobytes()
open(w + "/m.idx", "wb").write(idx)
PYEOF
tok=(--config /dev/null --set model.name=gpt --set data.name=tokens --set train.mini_batch=16 --set train.threads=1)
out=$("$bin" train "${tok[@]}" --set data.train="$work/tokens.bin" --set data.test="$work/tokens.bin" --set train.steps=5 \
      --set runs_dir="$work/runs" --set name=tokens 2>&1) && passes=$((passes+1)) || { echo "FAIL token-bin: $out"; fails=$((fails+1)); }
# The .bin's windows written as an .npy [N, 33] train to the same weights.
# Bitwise: one process, one thread, the same ops on the same int64 ids.
"$bin" train "${tok[@]}" --set data.train="$work/windows.npy" --set data.test="$work/windows.npy" --set train.steps=5 \
  --set runs_dir="$work/runs" --set name=windows > /dev/null 2>&1
same_weights token-bin-equals-npy "$work/runs/tokens" "$work/runs/windows" --rtol 0 --atol 0
check token-past-vocabulary 2 "token id 64 at position 50" -- train "${tok[@]}" --set data.train="$work/bad.bin" --set data.test="$work/tokens.bin"
check idx-disagrees 2 "disagrees with its .bin" -- train "${tok[@]}" --set data.train="$work/m.bin" --set data.test="$work/tokens.bin"
finish
