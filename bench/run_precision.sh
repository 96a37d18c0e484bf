#!/usr/bin/env bash
# bf16 against fp32, trident against PyTorch with torch.autocast, same run:
# the single-process training step of each model (bench_step and
# bench/pytorch_step.py: same sizes, batch, threads, SGD), in fp32 and in bf16
# (trident: train.precision=bf16, Note [Precision policy]; PyTorch: forward
# and loss under torch.autocast(bfloat16), the one line its users add).
# PyTorch is the project's (scripts/install-peers.sh, the version trident
# links). Each cell is the median of ROUNDS runs.
#   bash bench/run_precision.sh [THREADS] [ROUNDS] [PRESET] [MODEL:BATCH:STEPS ...]
# The first lines name the CPU, whether it multiplies bf16 natively
# (AVX512-BF16 / AMX-BF16) and the BLAS kernel: compare only within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-1}; rounds=${2:-3}; preset=${3:-tiny}; shift $(( $# < 3 ? $# : 3 ))
specs=${*:-mlp:128:40 cnn:64:6 inception:64:4 transformer:64:4}
bin=${BUILD:-build}/bench/bench_step
peer=$(bash scripts/install-peers.sh | tail -1)
peer_version=$("$peer" -c 'import torch; print(torch.__version__)')
rate() { field steps_per_s; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(${BUILD:-build}/tools/trident/trident version | tail -3 | tr '\n' ';')"
echo
echo "| model ($preset, batch) | trident fp32 | trident bf16 | trident bf16/fp32 | PyTorch $peer_version fp32 | $peer_version autocast bf16 | $peer_version bf16/fp32 | trident fp32 / $peer_version fp32 | trident bf16 / $peer_version bf16 |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in $specs; do
  IFS=: read -r model batch steps <<<"$spec"
  declare -A runs=()
  for _ in $(seq "$rounds"); do
    for p in fp32 bf16; do
      runs[t$p]+=" $("$bin" "$model" "$batch" "$threads" "$steps" "$preset" cpu "$p" | rate)"
      runs[n$p]+=" $("$peer" bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" "$preset" cpu "$p" | rate)"
    done
  done
  python3 - "$model ($batch)" "${runs[tfp32]}" "${runs[tbf16]}" "${runs[nfp32]}" "${runs[nbf16]}" <<'PY'
import statistics, sys
tf, tb, nf, nb = (statistics.median(float(x) for x in a.split()) for a in sys.argv[2:6])
print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (sys.argv[1], tf, tb, tb / tf, nf, nb, nb / nf, tf / nf, tb / nb))
PY
  unset runs
done
