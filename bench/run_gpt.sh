#!/usr/bin/env bash
# The GPT training step: trident (bench_step, the zoo's gpt) against PyTorch
# 2.x eager (bench/pytorch_step.py's Gpt, as nanoGPT writes it: causal
# F.scaled_dot_product_attention, the head tied to the token embedding), the
# same sizes, batch, threads and optimizer (SGD, momentum 0.9), one fixed
# random batch, fp32 and bf16 (autocast on the PyTorch side). Rounds
# alternate the two sides; each cell is the median of ROUNDS runs, then
# every run. Prints a Markdown table.
#   bash bench/run_gpt.sh [THREADS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-2}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_step
peer=$(bash scripts/install-peers.sh | tail -1)
version=$("$peer" -c 'import torch; print(torch.__version__)')
rate() { field samples_per_s; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $("${BUILD:-build}/tools/trident/trident" version | sed -n 's/^BLAS: /trident BLAS: /p'); $threads threads"
echo
echo "| preset | precision | batch × tokens | trident tokens/s | PyTorch $version tokens/s | trident / PyTorch | runs (trident; PyTorch) |"
echo "|---|---|---|---|---|---|---|"
for spec in tiny:32:32:100 gpt2-124m:1:1024:3; do
  IFS=: read -r preset batch tokens steps <<<"$spec"
  for precision in fp32 bf16; do
    t=(); p=()
    for _ in $(seq "$rounds"); do
      t+=("$("$bin" gpt "$batch" "$threads" "$steps" "$preset" cpu "$precision" | rate)")
      p+=("$("$peer" bench/pytorch_step.py gpt "$batch" "$threads" "$steps" "$preset" cpu "$precision" | rate)")
    done
    mt=$(median "${t[@]}"); mp=$(median "${p[@]}")
    python3 - "$preset" "$precision" "$batch" "$tokens" "$mt" "$mp" "${t[*]}" "${p[*]}" <<'EOF'
import sys
preset, precision, batch, tokens, t, p, ts, ps = sys.argv[1:]
n = int(tokens)
fmt = lambda xs: ", ".join("%.0f" % (float(x) * n) for x in xs.split())
print("| %s | %s | %s × %s | %.0f | %.0f | %.2f | %s; %s |" % (preset, precision, batch, tokens, float(t) * n,
                                                             float(p) * n, float(t) / float(p), fmt(ts), fmt(ps)))
EOF
  done
done
