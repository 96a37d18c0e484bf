#!/usr/bin/env bash
# Captured models (docs/own-model.md): `trident train` on an ATen-captured
# resnet18 and nn.TransformerEncoder model against the same module in eager
# PyTorch (the project's, scripts/install-peers.sh: the version trident
# links), one process, THREADS threads, SGD, random inputs (trident:
# synthetic data), STEPS steps a run; ROUNDS rounds alternate the three and
# each keeps its median steps/s. "Same settings": PyTorch with trident's
# malloc settings through the environment (glibc's thresholds, as in
# bench/run.sh); "defaults": as it comes, with
# its thread count set. Also: the export time of each model, and the
# per-call cost trident adds, from the same models at batch 2, where compute
# is small: (trident's step time - eager's with the same settings) / ATen
# calls per step (forward and backward's, counted by PyTorch's profiler).
#   bash bench/run_aten.sh [THREADS] [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}; rounds=${2:-3}; steps=${3:-30}
bin=${BUILD:-build}/tools/trident/trident
peer=$(bash scripts/install-peers.sh | tail -1)
py=$peer
same=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
trident_rate() {  # NAME BATCH -> steps/s (median of the logged windows after the first)
  "$bin" train --config /dev/stdin --set name=$1 --set runs_dir=$work/runs > "$work/$1.log" 2>&1 <<YAML || { tail -3 "$work/$1.log"; exit 1; }
model: {file: $work/$1/model.json, weights: $work/$1/init.pt}
data: {name: synthetic}
train: {mini_batch: $2, steps: $((steps + 10)), threads: $threads, eval: false, log_every: 5}
optimizer: {name: sgd, lr: 0.01}
checkpoint: {every: 0}
YAML
  python3 - "$work/runs/$1/metrics.jsonl" "$2" <<'PY'
import json, statistics, sys
w = [json.loads(l) for l in open(sys.argv[1]) if "samples_per_s" in l][2:]
print(statistics.median(x["samples_per_s"] for x in w) / int(sys.argv[2]))
PY
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $("$bin" version | grep BLAS); $threads thread(s)"
echo
v=$("$peer" -c 'import torch; print(torch.__version__)')
echo "| model | batch | ops | export s | trident steps/s | PyTorch $v, same settings, steps/s | ratio | PyTorch $v defaults steps/s | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in resnet18:32 encoder:32; do
  IFS=: read -r name rows <<<"$spec"
  exported=$($py bench/aten_models.py export "$name" "$work/$name")
  t=(); p=(); n=()
  for _ in $(seq "$rounds"); do
    t+=("$(trident_rate "$name" "$rows")")
    p+=("$("${same[@]}" $py bench/aten_models.py eager "$name" "$threads" "$steps" "$rows" | field steps_per_s)")
    n+=("$("$peer" bench/aten_models.py eager "$name" "$threads" "$steps" "$rows" | field steps_per_s)")
  done
  python3 - "$name" "$rows" "$exported" "${t[*]}" "${p[*]}" "${n[*]}" <<'PY'
import json, statistics, sys
name, rows, exported = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t, p, n = ([float(x) for x in a.split()] for a in sys.argv[4:7])
mt, mp, mn = statistics.median(t), statistics.median(p), statistics.median(n)
print("| %s | %s | %d | %.1f | %.2f | %.2f | %.3f | %.2f | %.3f |" % (name, rows, exported["ops"], exported["export_s"],
      mt, mp, mt / mp, mn, mt / mn))
print("<!-- runs: trident %s; same settings %s; defaults %s -->" % (t, p, n))
PY
done
echo
echo "| model at batch 2 | ATen calls per step | trident ms/step | PyTorch $v, same settings, ms/step | added per call |"
echo "|---|---|---|---|---|"
for name in resnet18 encoder; do
  t=$(trident_rate "$name" 2); p=$("${same[@]}" $py bench/aten_models.py eager "$name" "$threads" "$steps" 2 | field steps_per_s)
  calls=$($py - "$name" <<'PY'
import sys; sys.path.insert(0, "bench")
import torch, aten_models
model, inputs = aten_models.build(sys.argv[1])
xs = aten_models.batch(inputs, 2)
with torch.autograd.profiler.profile() as prof:
    torch.nn.functional.cross_entropy(model(*xs), torch.zeros(2, dtype=torch.long)).backward()
print(sum(1 for e in prof.function_events if e.name.startswith("aten::") and e.cpu_parent is None))
PY
)
  python3 -c "t,p,c=$t,$p,$calls; print('| %s | %d | %.2f | %.2f | %.1f us |' % ('$name', c, 1e3/t, 1e3/p, (1e6/t-1e6/p)/c))"
done
