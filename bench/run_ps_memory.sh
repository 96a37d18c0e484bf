#!/usr/bin/env bash
# Peak resident memory per rank under the parameter server against
# all-reduce: what sharding the optimizer state saves (Note [Sharded
# parameter server]) once the PS's own buffers are bounded (Note [PS pieces]).
#   bash bench/run_ps_memory.sh [PROCS] [STEPS] [--set KEY=VALUE ...]
# Trains mlp/paper (8 x 4096, 460.5 MiB of weights) with Adam on PROCS
# processes (1 thread each), mini-batch 48, once per sync, and prints each
# rank's peak RSS from metrics.jsonl. Further arguments go to both runs
# (e.g. --set model.file=DIR/model.json for an exported model).
set -u
cd "$(dirname "$0")/.."
bin=build/tools/trident/trident
procs=${1:-3}; steps=${2:-5}; shift $(( $# < 2 ? $# : 2 ))
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for sync in allreduce ps; do
  start=$SECONDS
  "$bin" train --config examples/fmnist-mlp.yaml --set model.preset=paper --nproc "$procs" --set train.steps="$steps" \
    --set train.epochs=null --set train.mini_batch=48 --set train.threads=1 --set parallel.grad_sync=$sync \
    --set optimizer.name=adam --set checkpoint.every=0 --set train.log_every=$(( steps / 2 )) --set data.test_size=1000 --set runs_dir="$work" --set name=$sync "$@" \
    > "$work/$sync.log" 2>&1 || { echo "FAILED: $sync"; tail -5 "$work/$sync.log"; exit 1; }
  echo "$sync: $((SECONDS - start)) s"
done
/usr/bin/python3 - "$work" "$procs" <<'PY'
import json, sys
work, procs = sys.argv[1], int(sys.argv[2])
MiB = 2 ** 20
def peaks(name):
    lines = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    mem = [m for l in lines if "memory" in l for m in l["memory"]]
    return {m["rank"]: m["peak_rss_bytes"] for m in mem}
def last(name, key):
    lines = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    return [l[key] for l in lines if key in l][-1]
ar, ps = peaks("allreduce"), peaks("ps")
print("| sync | " + " | ".join(f"rank {r}" for r in range(procs)) + " |")
print("|---|" + "---|" * procs)
for name, p in (("allreduce", ar), ("ps", ps)):
    print(f"| {name} | " + " | ".join(f"{p[r] / MiB:.0f} MiB" for r in range(procs)) + " |")
print("ps - allreduce: " + ", ".join(f"{(ps[r] - ar[r]) / MiB:+.0f} MiB" for r in range(procs)))
for key in ("loss", "samples_per_s"):
    print(f"last logged {key}: allreduce {last('allreduce', key):.6f}, ps {last('ps', key):.6f}")
PY
