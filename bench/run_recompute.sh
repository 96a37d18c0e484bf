#!/usr/bin/env bash
# The throughput cost of recomputation (see Note [Recomputation] in
# plan/plan.h) on a real 2-stage pipeline: transformer/tiny on
# Fashion-MNIST, trident's pipedream plan on 2 processes (one layer each),
# `parallel.recompute` never against always, the same plan otherwise; one
# thread per process, evaluation off. Prints the median samples/s of the
# logged windows after the first (ROUNDS rounds, alternating) beside the
# plan's prediction for each, and the ratios.
#   bash bench/run_recompute.sh [ROUNDS] [MICRO_BATCH] [MINI_BATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; micro=${2:-64}; mini=${3:-512}
bin=${BUILD:-build}/tools/trident/trident
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rate() {  # NAME RECOMPUTE: "measured predicted" samples/s
  "$bin" train --config examples/fmnist-transformer.yaml --set name="$1" --set train.steps=60 --set train.epochs=null \
    --set train.eval=false --set train.threads=1 --set train.mini_batch="$mini" --set train.log_every=10 \
    --set checkpoint.every=0 --set runs_dir="$work" --set parallel.devices=2 --set parallel.partitioner=pipedream \
    --set parallel.max_replicas=1 --set parallel.micro_batch="$micro" --set parallel.cluster=cpu-local \
    --set parallel.recompute="$2" > "$work/$1.log" 2>&1 || { tail -3 "$work/$1.log" >&2; exit 1; }
  python3 -c "
import json,statistics,sys
w=[json.loads(l) for l in open(sys.argv[1]) if 'samples_per_s' in l][1:]
p=json.load(open(sys.argv[2]))
print(statistics.median(x['samples_per_s'] for x in w), p['predicted']['samples_per_s'],
      sum(s['recompute'] for s in p['stages']), len(p['stages']))" "$work/$1/metrics.jsonl" "$work/$1/plan.json"
}
never=(); always=()
for round in $(seq "$rounds"); do
  never+=("$(rate "never-$round" never)")
  always+=("$(rate "always-$round" always)")
done
python3 - "$mini" "$micro" "$(printf '%s;' "${never[@]}")" "$(printf '%s;' "${always[@]}")" <<'PY'
import statistics, sys
mini, micro = sys.argv[1:3]
runs = [[[float(v) for v in r.split()] for r in arg.split(";") if r] for arg in sys.argv[3:5]]
(nm, np_, _, stages), (am, ap, rec, _) = [(statistics.median(r[0] for r in x), x[0][1], int(x[0][2]), int(x[0][3])) for x in runs]
print("| model | stages | mini-batch | micro-batch | never: measured / predicted samples/s | always (%d stages recompute): measured / predicted | measured always/never | predicted always/never |" % rec)
print("|---|---|---|---|---|---|---|---|")
print("| transformer/tiny | %d | %s | %s | %.0f / %.0f | %.0f / %.0f | %.3f | %.3f |" % (stages, mini, micro, nm, np_, am, ap, am / nm, ap / np_))
print("runs never: %s; always: %s" % (" ".join("%.0f" % r[0] for r in runs[0]), " ".join("%.0f" % r[0] for r in runs[1])))
PY
