#!/usr/bin/env bash
# A language model from token files (data/tokens.h): gpt/tiny learns sequences it can only predict by
# looking back, a 2-stage pipeline (the head tied to the token embedding on both ends) and 2-process
# data parallelism end with one process's weights, and token files a model cannot read are refused.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
# Arithmetic sequences mod 64 (a start and a step per row): the next id follows from the last two.
"$py" - "$work" <<'EOF' || { echo "FAIL token-files: numpy"; exit 1; }
import sys
import numpy as np
rng = np.random.default_rng(0)
for name, rows in (("train", 512), ("test", 64)):
    start, step = rng.integers(0, 64, rows), rng.integers(1, 6, rows)
    np.save("%s/%s.npy" % (sys.argv[1], name), ((start[:, None] + step[:, None] * np.arange(33)) % 64).astype(np.int64))
np.save(sys.argv[1] + "/float.npy", np.zeros((4, 33), np.float32))
EOF
lm=(--config /dev/null --set model.name=gpt --set data.name=tokens --set data.train="$work/train.npy"
    --set data.test="$work/test.npy" --set train.mini_batch=16 --set train.threads=1 --set parallel.cluster=cpu-local)
# It learns: AdamW with warm-up and cosine decay, 6 epochs; the next token is right for most positions.
out=$("$bin" train "${lm[@]}" --set runs_dir="$work/runs" --set name=learn --set train.epochs=6 --set optimizer.name=adamw \
      --set optimizer.lr=0.003 --set optimizer.warmup_steps=10 --set optimizer.schedule=cosine 2>&1); rc=$?
acc=$(printf '%s' "$out" | sed -n 's/^test accuracy: \([0-9.]*\)%$/\1/p')
if [ $rc -ne 0 ] || [ -z "$acc" ] || ! python3 -c "import sys; sys.exit(0 if float('$acc') > 80 else 1)"; then
  echo "FAIL learns: exit $rc, test accuracy '$acc'%: $(printf '%s' "$out" | tail -3)"; fails=$((fails+1))
else echo "ok learns: test accuracy $acc% per next token"; passes=$((passes+1)); fi
# Plans: SGD at a modest lr (see Note [Stable trajectories]); the pipeline's stages both hold tok.weight.
sgd=("${lm[@]}" --set train.steps=8 --set train.eval=false --set optimizer.name=sgd --set optimizer.lr=0.1)
"$bin" train "${sgd[@]}" --set runs_dir="$work/runs" --set name=one >/dev/null 2>&1
"$bin" train "${sgd[@]}" --set runs_dir="$work/runs" --set name=pipe --nproc 2 --set parallel.devices=2 \
  --set parallel.partitioner=pipedream --set parallel.max_replicas=1 --set parallel.micro_batch=4 >/dev/null 2>&1
tied=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(sum(any(o in ("tok", "head") for o in s["ops"]) for s in p["stages"]), len(p["stages"]))' "$work/runs/pipe/plan.json" 2>&1)
[ "$tied" = "2 2" ] && passes=$((passes+1)) || { echo "FAIL pipeline-ties-two-stages: $tied"; fails=$((fails+1)); }
same_weights pipeline-equals-one "$work/runs/one" "$work/runs/pipe" --rtol 0 --atol 1e-5
"$bin" train "${sgd[@]}" --set runs_dir="$work/runs" --set name=dp --nproc 2 --set parallel.devices=2 \
  --set parallel.partitioner=dp >/dev/null 2>&1
same_weights data-parallel-equals-one "$work/runs/one" "$work/runs/dp" --rtol 0 --atol 1e-5
# Token files a model cannot read: one line, exit 2.
check tokens-for-a-classifier 2 "token files train a model with a label per position" -- train --config /dev/null \
  --set model.name=mlp --set data.name=tokens --set data.train="$work/train.npy" --set data.test="$work/test.npy"
check tokens-missing 2 "data.test = '$work/none.npy': no such file" -- train "${lm[@]}" --set data.test="$work/none.npy"
check tokens-float 2 "float.npy: holds Float [4, 33]; model 'gpt' reads int64 token ids [N, 33]" -- \
  train "${lm[@]}" --set data.train="$work/float.npy"
finish
