#!/usr/bin/env bash
# The GPU check (docs/gpu.md). On a machine with an NVIDIA GPU and a CUDA
# PyTorch it
#   1. builds trident's CUDA variant against that PyTorch's LibTorch
#      (scripts/build-cuda.sh, every core; the targets it runs only). Where
#      the machine reaches no package registry, carry build/gpu-deps, made
#      here by scripts/gpu-bundle.sh;
#   2. runs what one GPU allows and says what it could not run:
#      - the CUDA unit tests (NCCL collectives at world size 1, the clock of
#        trace spans);
#      - single-process training with train.device=cuda against the same run
#        with train.device=cpu, for every zoo model (weights compared by
#        `trident diff`, tolerance below);
#      - bf16 training (train.precision) on the device, near its fp32 run;
#      - multi-process training only with a GPU per process (NCCL refuses
#        two ranks on one device): 2-process data parallelism, and a
#        2-stage pipeline whose activations and gradients travel by NCCL;
#   3. prints a Markdown table: a training step of mlp, cnn, transformer and
#      mmt (tiny and paper presets, the largest batch of 64..1024 that fits)
#      in trident and in PyTorch eager on the same GPU, samples/s and ratio.
# Exit 0 when every check passed, 1 when one failed, 2 for bad arguments.
#
#   bash scripts/gpu-check.sh [--python PY] [--build DIR]
#   bash scripts/gpu-check.sh --cpu [--build DIR] [--python PY]    the dry run: every step
#       but the GPU ones, on device cpu, with an existing build (default
#       build/, the CPU build; `make check-cuda-build` passes build-cuda);
#       paper presets are left out (they need a GPU's speed); the PyTorch
#       side is $TRIDENT_PYTHON (ctest sets it), else Debian's python3, unless --python names another
set -uo pipefail
cd "$(dirname "$0")/.."
cpu=0; py=""; dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=1 ;;
    --python) py=$2; shift ;;
    --build) dir=$2; shift ;;
    *) echo "gpu-check: unknown argument '$1' (allowed: --cpu, --python PY, --build DIR)" >&2; exit 2 ;;
  esac
  shift
done
start=$(date +%s)
fails=0
say() { echo "gpu-check [$(( $(date +%s) - start )) s]: $*"; }
fail() { echo "gpu-check: FAIL $*"; fails=$((fails + 1)); }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# 1. The build.
if [ $cpu = 1 ]; then
  dir=${dir:-build}; device=cpu; py=${py:-${TRIDENT_PYTHON:-$(bash scripts/install-peers.sh | tail -1)}}
  [ -x "$dir/tools/trident/trident" ] || { echo "gpu-check --cpu: no build in $dir (make build, or make build-cuda)" >&2; exit 2; }
else
  dir=${dir:-build-cuda}; device=cuda; py=${py:-python3}
  torch_dir=$("$py" -c 'import torch, os; assert torch.cuda.is_available(), "no GPU"; print(os.path.dirname(torch.__file__))') ||
    { echo "gpu-check: $py has no CUDA PyTorch that sees a GPU (use --python, or --cpu for the dry run)" >&2; exit 2; }
  say "building the CUDA variant against $torch_dir"
  [ -d build/gpu-deps ] && [ -z "${TRIDENT_DEPS:-}" ] && export TRIDENT_DEPS=build/gpu-deps  # scripts/gpu-bundle.sh
  TRIDENT_TORCH=$torch_dir JOBS=$(nproc) TARGETS="trident comm_test executor_test bench_step" \
    bash scripts/build-cuda.sh "$dir" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; echo "gpu-check: the CUDA build failed" >&2; exit 1; }
fi
bin=$dir/tools/trident/trident
say "$("$bin" version)"
[ $cpu = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu-check: GPU /'

# 2a. Unit tests that need a GPU (skipped, with the reason, without one).
out=$("$dir/lib/comm/comm_test" --gtest_filter='Cuda*' 2>&1); rc=$?
if [ $rc -ne 0 ]; then fail "CUDA collectives: $(printf '%s' "$out" | grep -E 'Failure|FAILED|error' | head -5)"
elif printf '%s' "$out" | grep -q "SKIPPED"; then say "CUDA collectives: skipped, no CUDA device visible"
else say "CUDA collectives at world size 1 (NCCL): passed"; fi
out=$("$dir/lib/executor/executor_test" --gtest_filter='Cuda*' 2>&1); rc=$?
if [ $rc -ne 0 ]; then fail "CUDA clock: $(printf '%s' "$out" | grep -E 'Failure|FAILED|error' | head -5)"
elif printf '%s' "$out" | grep -q "SKIPPED"; then say "CUDA clock: skipped, no CUDA device visible"
else say "CUDA clock (trace spans from CUDA events): passed"; fi

# 2b. Training on the device equals training on the CPU, per zoo model: the
# same seed, data and steps; SGD (Adam magnifies rounding, docs/reliability.md).
# Tolerance: float32 kernels of CPU and GPU sum in different orders.
atol=1e-4
for model in mlp cnn inception transformer mmt dlrm candle_uno; do
  for where in cpu "$device"; do
    "$bin" train --config /dev/null --set name="$model-$where" --set runs_dir="$work/runs" \
      --set model.name="$model" --set data.name=synthetic --set data.train_size=256 --set data.test_size=64 \
      --set train.steps=20 --set train.mini_batch=32 --set train.eval=false --set train.threads=2 \
      --set train.device="$where" --set optimizer.name=sgd --set optimizer.lr=0.01 >"$work/$model-$where.log" 2>&1 ||
      { fail "$model on $where: $(tail -1 "$work/$model-$where.log")"; continue 2; }
  done
  if d=$("$bin" diff "$work/runs/$model-cpu" "$work/runs/$model-$device" --atol $atol --rtol 1e-3 2>&1); then
    say "$model: 20 steps on $device equal cpu ($(printf '%s' "$d" | grep -o 'largest |a - b| = [^ ]*'))"
  else fail "$model: $device differs from cpu: $d"; fi
done

# 2c. bf16 (train.precision, Note [Precision policy]) on the device: it runs,
# differs from the fp32 run (so bf16 really computed), and stays near it.
# Measured on a CPU (2026-12-03, 20 SGD steps at lr 0.01): largest weight
# difference 4.6e-4 (mlp) and 1.05e-3 (transformer); allowed 5e-3.
for model in mlp transformer; do
  for p in fp32 bf16; do
    "$bin" train --config /dev/null --set name="$model-$p" --set runs_dir="$work/runs" \
      --set model.name="$model" --set data.name=synthetic --set data.train_size=256 --set data.test_size=64 \
      --set train.steps=20 --set train.mini_batch=32 --set train.eval=false --set train.threads=2 \
      --set train.device="$device" --set train.precision=$p --set optimizer.name=sgd --set optimizer.lr=0.01 \
      >"$work/$model-$p.log" 2>&1 || { fail "$model in $p on $device: $(tail -1 "$work/$model-$p.log")"; continue 2; }
  done
  if ! d=$("$bin" diff "$work/runs/$model-fp32" "$work/runs/$model-bf16" --atol 5e-3 --rtol 0 2>&1); then
    fail "$model: bf16 on $device is further from fp32 than 5e-3: $d"
  elif "$bin" diff "$work/runs/$model-fp32" "$work/runs/$model-bf16" --atol 1e-6 --rtol 0 >/dev/null 2>&1; then
    fail "$model: bf16 on $device equals fp32 to 1e-6: bf16 did not compute"
  else say "$model: 20 steps in bf16 on $device within 5e-3 of fp32 ($(printf '%s' "$d" | grep -o 'largest |a - b| = [^ ]*'))"; fi
done

# 2d. Several processes need a GPU each: NCCL refuses two ranks on one device.
# Runs `name` on 2 processes on the CPU and on $device, with the extra
# settings, and compares the weights. The dry run runs both on the CPU.
both_ways() {
  local what=$1 name=$2 side where
  shift 2
  for side in cpu dev; do
    where=cpu; [ $side = dev ] && where=$device
    "$bin" train --config examples/synthetic-mmt.yaml --nproc 2 --set name="$name-$side" --set runs_dir="$work/runs" \
      --set train.epochs=null --set train.steps=20 --set train.eval=false --set train.device="$where" \
      --set optimizer.name=sgd "$@" \
      >"$work/$name-$side.log" 2>&1 || { fail "$what on $where: $(tail -1 "$work/$name-$side.log")"; return; }
  done
  "$bin" diff "$work/runs/$name-cpu" "$work/runs/$name-dev" --atol $atol --rtol 1e-3 >/dev/null &&
    say "$what on $device equals the CPU run" || fail "$what on $device differs from cpu"
}
gpus=0
[ $cpu = 1 ] || gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
if [ $cpu = 1 ] || [ "$gpus" -ge 2 ]; then
  both_ways "2-process data parallel" dp
  # Stage-to-stage messages by NCCL, on a link per direction (see Note [Pipeline
  # transfers on GPUs]): a 2-stage 1F1B pipeline, one GPU a stage.
  both_ways "2-stage pipeline" pp --set parallel.partitioner=pipedream --set parallel.max_replicas=1 \
    --set parallel.micro_batch=16
  [ ! -f "$work/pp-dev.log" ] || grep -q "plan of 2 stages" "$work/pp-dev.log" ||
    fail "the pipeline check did not run 2 stages: $(grep -m1 'trident: training' "$work/pp-dev.log")"
else
  say "multi-process runs: not run ($gpus GPU): NCCL refuses two ranks on one device"
fi

# 3. A training step, trident against PyTorch eager on the same device.
presets="tiny paper"; batch=max  # 20 timed steps for tiny, 10 for paper, after 5 warm-up
if [ $cpu = 1 ]; then
  presets=tiny; batch=32; tiny_steps=3
  say "dry run: 3 steps at batch 32 on a CPU; the figures below only show that each step runs (bench/run.sh measures CPUs)"
fi
echo
echo "| model | preset | batch | trident samples/s | PyTorch $("$py" -c 'import torch; print(torch.__version__)') samples/s | trident / PyTorch |"
echo "|---|---|---|---|---|---|"
for model in mlp cnn transformer mmt; do
  for preset in $presets; do
    [ "$preset" = paper ] && steps=10 || steps=${tiny_steps:-20}
    t=$("$dir/bench/bench_step" "$model" "$batch" 1 "$steps" "$preset" "$device" 2>"$work/bench.err") ||
      { fail "bench_step $model $preset: $(tail -1 "$work/bench.err")"; continue; }
    b=$(printf '%s' "$t" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["batch"])')
    p=$("$py" bench/pytorch_step.py "$model" "$b" 1 "$steps" "$preset" "$device" 2>"$work/bench.err") ||
      { fail "pytorch_step $model $preset: $(tail -1 "$work/bench.err")"; continue; }
    "$py" - "$model" "$preset" "$b" "$t" "$p" <<'PY'
import json, sys
model, preset, batch = sys.argv[1:4]
t, p = json.loads(sys.argv[4])["samples_per_s"], json.loads(sys.argv[5])["samples_per_s"]
print(f"| {model} | {preset} | {batch} | {t:.0f} | {p:.0f} | {t / p:.2f} |")
PY
  done
done
echo
say "done: $fails failure(s)"
[ $fails -eq 0 ]
