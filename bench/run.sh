#!/usr/bin/env bash
# trident vs PyTorch, single-process training step, same model sizes, batch,
# threads and optimizer. Runs each side ROUNDS times alternately and keeps
# the median steps/s of each (the machine is noisy); prints a Markdown table
# with every run under each model's row.
#   bash bench/run.sh [THREADS] [ROUNDS]     (make bench)
#
# trident applies its process settings itself (see Note [CPU process settings]
# in lib/host/include/trident/host/process.h: OpenBLAS threads = THREADS,
# glibc malloc thresholds, OpenMP's passive wait). "PyTorch 1.13" (Debian's python3-torch) gets the
# same settings through the environment, so the ratio compares the step like
# for like; "1.13 defaults" is what a PyTorch user gets out of the box
# (OpenBLAS threads pinned, malloc untouched). "PyTorch 2.x" is the current
# torch from the Python package index (scripts/install-peers.sh, installed on
# first use), out of the box: its own kernels (oneDNN, MKL), no trident
# settings; the script sets only its thread count.
# BLAS (see Note [BLAS kernel] in lib/host/include/trident/host/blas.h): the
# first line names the CPU and the kernel trident runs; where trident replaced
# a fallback kernel, the PyTorch 1.13 columns run that kernel too
# (OPENBLAS_CORETYPE), so that they time the same products.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}; rounds=${2:-3}
bin=${BUILD:-build}/bench/bench_step
peer=$(bash scripts/install-peers.sh | tail -1)
peer_version=$("$peer" -c 'import torch; print(torch.__version__)')
same_malloc="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
rate() { python3 -c 'import json,sys; print(json.load(sys.stdin)["steps_per_s"])'; }
blas=$("${BUILD:-build}/tools/trident/trident" version | sed -n 's/^BLAS: //p')
if printf '%s' "$blas" | grep -q '(detected [A-Za-z0-9_]*; checked)'; then
  export OPENBLAS_CORETYPE=$(printf '%s' "$blas" | sed -n 's/.*, kernel \([A-Za-z0-9_]*\) .*/\1/p')
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); trident's BLAS: $blas${OPENBLAS_CORETYPE:+; PyTorch 1.13 with OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}"
echo
echo "| model | batch | threads | trident steps/s | PyTorch 1.13 steps/s | ratio | 1.13 defaults steps/s | PyTorch $peer_version steps/s | trident / $peer_version |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in mlp:128:400 cnn:128:40 inception:128:40 mmt:64:200 transformer:64:60; do
  IFS=: read -r model batch steps <<<"$spec"
  t=(); p=(); d=(); n=()
  for _ in $(seq "$rounds"); do
    t+=("$("$bin" "$model" "$batch" "$threads" "$steps" | rate)")
    p+=("$(GLIBC_TUNABLES=$same_malloc OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE \
      /usr/bin/python3 bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate)")
    d+=("$(OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate)")
    n+=("$("$peer" bench/pytorch_step.py "$model" "$batch" "$threads" "$steps" | rate)")
  done
  python3 - "$model" "$batch" "$threads" "${t[*]}" "${p[*]}" "${d[*]}" "${n[*]}" <<'PY'
import statistics, sys
model, batch, threads = sys.argv[1:4]
runs = [[float(x) for x in arg.split()] for arg in sys.argv[4:8]]
t, p, d, n = (statistics.median(r) for r in runs)
print("| %s | %s | %s | %.2f | %.2f | %.3f | %.2f | %.2f | %.3f |" % (model, batch, threads, t, p, t / p, d, n, t / n))
print("|  |  | runs | %s | %s |  | %s | %s |  |" % tuple(" ".join("%.1f" % x for x in r) for r in runs))
PY
done
