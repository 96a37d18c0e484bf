#!/usr/bin/env bash
# trident vs PyTorch, single-process training step, same model sizes, batch,
# threads and optimizer. Runs each side ROUNDS times alternately and keeps
# the median steps/s of each (the machine is noisy); prints a Markdown table
# with every run under each model's row.
#   bash bench/run.sh [THREADS] [ROUNDS]     (make bench)
#
# trident applies its process settings itself (see Note [CPU process settings]
# in lib/process/include/trident/process/process.h: thread counts, glibc malloc
# thresholds, one pool of workers for BLAS and ATen). The peer is the project's PyTorch
# (scripts/install-peers.sh, the version trident links): "same settings" gets
# trident's malloc settings through the environment, so the ratio compares the step
# like for like; "defaults" is what a PyTorch user gets out of the box (the
# script sets only its thread count). Both run PyTorch's own products (MKL,
# oneDNN); the first line names the BLAS kernel trident runs (Note [BLAS
# kernel] in lib/process/include/trident/process/blas.h).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh  # field, median
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_step
peer=$(bash scripts/install-peers.sh | tail -1)
peer_version=$("$peer" -c 'import torch; print(torch.__version__)')
same_malloc="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
rate() { field steps_per_s; }
blas=$("${BUILD:-build}/tools/trident/trident" version | sed -n 's/^BLAS: //p')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); trident's BLAS: $blas"
echo
echo "| model | batch | threads | trident steps/s | PyTorch $peer_version, same settings, steps/s | ratio | PyTorch $peer_version defaults steps/s | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for spec in mlp:128:400 cnn:128:40 inception:128:40 mmt:64:200 transformer:64:60; do
  IFS=: read -r model batch steps <<<"$spec"
  t=(); p=(); d=()
  for _ in $(seq "$rounds"); do
    t+=("$("$bin" "$model" "$batch" "$threads" "$steps" | rate)")
    p+=("$(GLIBC_TUNABLES=$same_malloc "$peer" bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate)")
    d+=("$("$peer" bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate)")
  done
  python3 - "$model" "$batch" "$threads" "${t[*]}" "${p[*]}" "${d[*]}" <<'PY'
import statistics, sys
model, batch, threads = sys.argv[1:4]
runs = [[float(x) for x in arg.split()] for arg in sys.argv[4:7]]
t, p, d = (statistics.median(r) for r in runs)
print("| %s | %s | %s | %.2f | %.2f | %.3f | %.2f | %.3f |" % (model, batch, threads, t, p, t / p, d, t / d))
print("|  |  | runs | %s | %s |  | %s |  |" % tuple(" ".join("%.1f" % x for x in r) for r in runs))
PY
done
