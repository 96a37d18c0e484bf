#!/usr/bin/env bash
# Bad input exits 2 with one line naming the field, the value and what is allowed.
. "$(dirname "$0")/../lib.sh" "$@"  # bin, src, work, counters; check, same_weights, kill_rank, finish
cfg=$src/examples/fmnist-mlp.yaml
check missing-config 2 "cannot read" -- train --config "$work/nope.yaml"
check unknown-key 2 "unknown key 'train.epoch'" -- train --config "$cfg" --set train.epoch=1
check wrong-type 2 "train.mini_batch = 'many'" -- train --config "$cfg" --set train.mini_batch=many
check out-of-range 2 "optimizer.lr = '0'" -- train --config "$cfg" --set optimizer.lr=0
check bad-choice 2 "allowed: sgd, adam, adamw" -- train --config "$cfg" --set optimizer.name=lbfgs
# The recipe's keys (docs/config.md).
check clip-zero 2 "optimizer.clip_norm = '0'" -- train --config "$cfg" --set optimizer.clip_norm=0
check accumulate-zero 2 "train.accumulate = '0'" -- train --config "$cfg" --set train.accumulate=0
check comm-dtype-allreduce 2 "parallel.comm_dtype = 'bf16'" -- train --config "$cfg" --set parallel.devices=2 --set parallel.comm_dtype=bf16
check comm-dtype-fp16 2 "allowed: fp32, bf16" -- train --config "$cfg" --set parallel.comm_dtype=fp16
check no-such-schedule 2 "optimizer.schedule = 'poly'" -- train --config "$cfg" --set optimizer.schedule=poly
check missing-data 2 "dataset-fashion-mnist" -- train --config "$cfg" --set data.path=$work/none
check bad-flag 2 "--bogus" -- train --config "$cfg" --bogus
check bad-model 2 "allowed: mlp" -- graph --model resnet
check resume-nothing 2 "no such run directory" -- train --config "$cfg" --set runs_dir=$work/r --resume $work/r/none
check export-nothing 2 "not a run directory" -- export $work/r/none
# train.device=cuda: the CPU build says how to get the CUDA build; the CUDA build on a machine without a GPU
# names the device it did not find (see Note [Placement]). Either way before any rendezvous or data is read.
if "$bin" version | grep -q "CPU build"; then
  check cuda-on-cpu-build 2 "train.device: 'cuda' needs trident's CUDA build" -- train --config "$cfg" --set train.device=cuda
elif [ "$("$bin" version | sed -n 's/.*CUDA devices visible: \([0-9]*\).*/\1/p')" = 0 ]; then
  check cuda-without-gpu 2 "train.device: 'cuda', but this process sees no CUDA device" -- train --config "$cfg" --set train.device=cuda
fi
check bad-device 2 "allowed: cpu, cuda" -- train --config "$cfg" --set train.device=tpu
# A captured model's constants are checked when the file is read, by graph, plan and train alike
# (graph/constants.h): each bad one exits 2 naming the file and the constant.
model=$src/fuzz/corpus/model/constant-aten.json
constant() {  # constant NAME JQ-LIKE-PYTHON: a copy of the model whose constant 'offset' is changed
  "${TRIDENT_PYTHON:-python3}" -c "import json,sys; d=json.load(open('$model')); c=d['constants']['offset']; $2; json.dump(d, open('$work/$1.json', 'w'))"
  echo "$work/$1.json"
}
bad_base64=$(constant bad-base64 "c['base64'] = '!AAAAAAAAAA='")
no_dtype=$(constant no-dtype "del c['dtype']")
bad_shape=$(constant bad-shape "c['shape'] = [3]")
check const-base64-graph 2 "model file $bad_base64: graph constant 'offset': 'base64' is not base64 text" -- graph --model-file "$bad_base64"
check const-base64-plan 2 "model file $bad_base64: graph constant 'offset': 'base64' is not base64 text" -- plan --model-file "$bad_base64" --devices 1 --mini-batch 8
printf 'model: {file: %s}\ntrain: {epochs: 1}\n' "$bad_base64" > "$work/own.yaml"
check const-base64-train 2 "model file $bad_base64: graph constant 'offset'" -- train --config "$work/own.yaml"
check const-no-dtype 2 "graph constant 'offset' has no 'dtype'" -- graph --model-file "$no_dtype"
check const-bad-shape-graph 2 "graph constant 'offset' holds 8 bytes; its shape [3] and dtype float32 need 12" -- graph --model-file "$bad_shape"
check const-bad-shape-plan 2 "graph constant 'offset' holds 8 bytes" -- plan --model-file "$bad_shape" --devices 1 --mini-batch 8
finish
