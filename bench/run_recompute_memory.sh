#!/usr/bin/env bash
# Memory of recomputation (see Note [Recomputation] in plan/plan.h):
# cnn/paper on Fashion-MNIST (activations of ~1.2 MB per sample against
# 13 M parameters), trident's pipedream plan on 4 processes, mini-batch
# MINI in micro-batches of MICRO, one thread per process, Adam, a few steps;
# `parallel.recompute` never against always on the same plan. Prints every
# rank's peak resident memory beside its stage's planned memory (both from
# metrics.jsonl), then trains both under a per-process address-space limit
# (prlimit --as=LIMIT_GB; with a limit only those runs) and reports which train.
#   bash bench/run_recompute_memory.sh [MINI] [MICRO] [LIMIT_GB] [STEPS]
set -u
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
mini=${1:-1024}; micro=${2:-256}; limit_gb=${3:-0}; steps=${4:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
common=(--config examples/fmnist-cnn.yaml --set model.preset=paper --set train.steps=$steps --set train.epochs=null
        --set train.eval=false --set train.threads=1 --set train.mini_batch=$mini --set train.log_every=1
        --set checkpoint.every=0 --set data.test_size=1000 --set runs_dir=$work --set parallel.devices=4
        --set parallel.partitioner=pipedream --set parallel.max_replicas=1 --set parallel.micro_batch=$micro
        --set parallel.cluster=cpu-local)
if [ "$limit_gb" != 0 ]; then  # only the limited runs
  lim=$(/usr/bin/python3 -c "print(int($limit_gb * 2**30))")
  for rule in never always; do
    out=$(prlimit --as=$lim "$bin" train "${common[@]}" --set name=$rule-limited --set parallel.recompute=$rule 2>&1); rc=$?
    echo "recompute $rule under prlimit --as=${limit_gb}G per process: exit $rc: $(printf '%s\n' "$out" | grep -E 'done:|rror|memory' | tail -1)"
  done
  exit 0
fi
for rule in never always; do
  "$bin" train "${common[@]}" --set name=$rule --set parallel.recompute=$rule > "$work/$rule.log" 2>&1 \
    || { echo "FAILED: $rule"; tail -5 "$work/$rule.log"; exit 1; }
done
/usr/bin/python3 - "$work" "$mini" "$micro" <<'PY'
import json, sys
work, mini, micro = sys.argv[1:4]
MiB = 2 ** 20
def memory(name):
    lines = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    return {m["rank"]: m for l in lines if "memory" in l for m in l["memory"]}
plan = {r: json.load(open(f"{work}/{r}/plan.json")) for r in ("never", "always")}
n, a = memory("never"), memory("always")
print(f"cnn/paper, mini-batch {mini}, micro-batch {micro}, pipedream on 4 processes ({len(plan['never']['stages'])} stages)")
print("| rank | stage | in flight | never: peak RSS / planned | always: peak RSS / planned | peak saved | planned saved |")
print("|---|---|---|---|---|---|---|")
for r in sorted(n):
    st = n[r]["stage"]
    flight = plan["never"]["stages"][st]["in_flight"] if st >= 0 else 0
    print(f"| {r} | {st} | {flight} | {n[r]['peak_rss_bytes']/MiB:.0f} / {n[r]['planned_bytes']/MiB:.0f} MiB | "
          f"{a[r]['peak_rss_bytes']/MiB:.0f} / {a[r]['planned_bytes']/MiB:.0f} MiB | "
          f"{(n[r]['peak_rss_bytes'] - a[r]['peak_rss_bytes'])/MiB:.0f} MiB | "
          f"{(n[r]['planned_bytes'] - a[r]['planned_bytes'])/MiB:.0f} MiB |")
PY
