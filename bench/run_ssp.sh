#!/usr/bin/env bash
# What bounded staleness (SSP, see Note [Staleness]) buys against stragglers:
# mlp on Fashion-MNIST, 3 data-parallel processes under the parameter
# server, one thread each, 96 samples per step. With DELAY_MS > 0 every step
# has one straggler — the rank whose number is the step modulo 3 sleeps
# DELAY_MS (TRIDENT_TEST_SLOW_STEP_MS) — so under BSP every step waits for
# one, while under s >= 1 each rank's delay can be absorbed by the others
# running ahead. Prints ms per step (rank 0, steps 21..STEPS) and the ratio
# to BSP under the same delay.
#   bash bench/run_ssp.sh [DELAY_MS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
delay=${1:-30}
steps=${2:-120}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
run() {  # run DELAY S: ms per step after the first window
  TRIDENT_TEST_SLOW_STEP_MS=$1 "$bin" train --config examples/fmnist-mlp.yaml --nproc 3 \
    --set train.steps="$steps" --set train.epochs=null --set train.threads=1 --set train.mini_batch=96 \
    --set train.eval=false --set checkpoint.every=0 --set train.log_every=20 --set parallel.grad_sync=ps \
    --set parallel.staleness="$2" --set runs_dir="$work/d$1-s$2" > /dev/null
  python3 - "$work/d$1-s$2/fmnist-mlp/metrics.jsonl" <<'PY'
import json, sys
rates = [l["samples_per_s"] for l in map(json.loads, open(sys.argv[1])) if "samples_per_s" in l][1:]
print(f"{1000 * 96 * len(rates) / sum(rates):.2f}")
PY
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); 3 processes x 1 thread"
echo "| straggler delay ms | staleness | ms per step | vs BSP |"
echo "|---|---|---|---|"
for d in 0 "$delay"; do
  base=""
  for s in 0 1 2; do
    ms=$(run "$d" "$s")
    [ -z "$base" ] && base=$ms
    echo "| $d | $s | $ms | $(python3 -c "print(f'{$ms / $base:.2f}')") |"
  done
done
