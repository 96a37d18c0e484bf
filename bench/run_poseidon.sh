#!/usr/bin/env bash
# Poseidon's headline (USENIX ATC'17), simulated: the paper's networks built
# by torchvision (bench/poseidon_models.py) and captured by trident's own
# exporter, planned data parallel on Poseidon's testbed (single-GPU machines,
# GeForce TITAN X, 40 GbE and 10 GbE: cluster presets poseidon-40gbe and
# poseidon-10gbe) with 32 samples per machine, each gradient-sync method
# forced and hybrid (HybComm). Prints the simulated throughput speedup over
# one machine for 1-32 machines beside the paper's figures.
#   bash bench/run_poseidon.sh [MODELS...]     (default: inception_v3 vgg19_22k)
# Exports are cached in ${BUILD:-build}/poseidon (VGG19-22K's weights: 916 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bin=$build/tools/trident/trident
peer=$(bash scripts/install-peers.sh | tail -1)
models=("$@"); [ ${#models[@]} -eq 0 ] && models=(inception_v3 vgg19_22k)
mkdir -p "$build/poseidon"
declare -A size=([inception_v3]=3,299,299 [vgg19_22k]=3,224,224 [resnet152]=3,224,224)
# The paper's speedups on 40 GbE at 32 machines, and at 10 GbE where reported.
declare -A paper=([inception_v3-poseidon-40gbe]="31.5x at 32 (TensorFlow 20x)"
                  [vgg19_22k-poseidon-40gbe]="30x at 32, near-linear"
                  [vgg19_22k-poseidon-10gbe]="15.5x at 16")
for m in "${models[@]}"; do
  out=$build/poseidon/$m
  [ -s "$out/model.json" ] || "$peer" tools/export/trident_export.py bench/poseidon_models.py:"$m" \
    --input "image:${size[$m]}:float32" --name "$m" --out "$out" > /dev/null
  for cluster in poseidon-40gbe poseidon-10gbe; do
    echo "### $m on $cluster (paper: ${paper[$m-$cluster]:-not reported})"
    echo "| sync | 1 | 2 | 4 | 8 | 16 | 32 |"
    echo "|---|---|---|---|---|---|---|"
    for sync in allreduce ps sfb hybrid; do
      row="| $sync"
      one=""
      for n in 1 2 4 8 16 32; do
        "$bin" plan --model-file "$out/model.json" --cluster "$cluster" --devices "$n" --mini-batch $((32 * n)) \
          --partitioner dp --grad-sync "$sync" --out "$out/plan.json" > /dev/null
        sps=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["predicted"]["samples_per_s"])' "$out/plan.json")
        [ -z "$one" ] && one=$sps
        row="$row | $(python3 -c "print(f'{$sps / $one:.1f}x')")"
      done
      echo "$row |"
    done
    echo
  done
done
# Emulated (see Note [Emulation]): `trident train --emulate` runs the real
# processes, schedule and replica synchronisation with modelled durations,
# for `hybrid`, on 2 to EMULATE_MAX machines (speedup over one simulated machine;
# emulation needs 2 processes or more; EMULATE_MAX defaults to 8, 16 ran on
# a 24 GB machine: every process still makes its own synthetic batch of
# images, 1 MB each for Inception-V3, so 32 does not fit there);
# EMULATE=0 skips it.
[ "${EMULATE:-1}" = 0 ] && exit 0
counts=()
for n in 2 4 8 16 32; do [ "$n" -le "${EMULATE_MAX:-8}" ] && counts+=("$n"); done  # emulation needs 2 or more
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for m in "${models[@]}"; do
  for cluster in poseidon-40gbe poseidon-10gbe; do
    echo "### $m on $cluster, emulated, hybrid"
    echo "| machines |$(printf ' %s |' "${counts[@]}")"
    echo "|---|$(printf -- '---|%.0s' "${counts[@]}")"
    row="| speedup over one simulated machine (emulated / simulated iteration)"
    "$bin" plan --model-file "$build/poseidon/$m/model.json" --cluster "$cluster" --devices 1 --mini-batch 32 \
      --partitioner dp --out "$work/one.json" > /dev/null
    one=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["predicted"]["samples_per_s"])' "$work/one.json")
    for n in "${counts[@]}"; do
      cat > "$work/emu.yaml" <<YAML
name: poseidon
model: {file: $PWD/$build/poseidon/$m/model.json}
data: {name: synthetic, train_size: $((32 * n)), test_size: 16}
train: {steps: 4, mini_batch: $((32 * n)), seed: 0, threads: 1, eval: false}
optimizer: {name: sgd, lr: 0.01, momentum: 0.9}
checkpoint: {every: 0}
parallel: {devices: $n, partitioner: dp, grad_sync: hybrid, timeout_s: 300}
YAML
      "$bin" train --config "$work/emu.yaml" --emulate "$cluster" --dilation 2 --set runs_dir="$work/runs" \
        > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
      read -r sps ratio < <(python3 -c "
import json; m = json.loads(open('$work/runs/poseidon/metrics.jsonl').readline())
print(m['samples_per_s'], m['iteration_s'] / m['predicted_iteration_s'])")
      rm -rf "$work/runs"
      row="$row | $(python3 -c "print(f'{$sps / $one:.1f}x ({$ratio:.2f})')")"
    done
    echo "$row |"
    echo
  done
done
