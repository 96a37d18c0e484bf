#!/usr/bin/env bash
# Memory per process: does the run keep the plan? (docs/design.md, contract "The run keeps the plan")
#   bash bench/run_memory.sh [STEPS] [LIMIT_GB]
# Trains mlp/paper (8 x 4096, 135 M parameters, Adam, mini-batch 64, 1 thread
# per process) on Fashion-MNIST as one process and as a 4-stage pipedream
# pipeline on 4 processes, and reads every rank's peak resident memory from
# metrics.jsonl beside its stage's planned memory. The per-process base
# (LibTorch, Gloo, the data a stage reads) is measured with mlp/tiny on one
# process (0.27 M parameters): its peak minus its planned memory.
# Then both runs again under a per-process address-space limit (prlimit --as)
# of LIMIT_GB: one process must refuse with a clear out-of-memory line, the
# pipeline must train.
set -u
cd "$(dirname "$0")/.."
bin=build/tools/trident/trident
steps=${1:-20}; limit_gb=${2:-3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
common=(--config examples/fmnist-mlp.yaml --set train.steps=$steps --set train.epochs=null --set train.threads=1
        --set train.mini_batch=64 --set data.test_size=1000 --set checkpoint.every=0 --set train.log_every=10
        --set runs_dir=$work)
run() {  # run NAME ARGS...: trains, prints its wall time
  local name=$1; shift
  local start=$SECONDS
  "$bin" train "${common[@]}" --set name=$name "$@" > "$work/$name.log" 2>&1 || { echo "FAILED: $name"; tail -5 "$work/$name.log"; exit 1; }
  echo "$name: $((SECONDS - start)) s"
}
run base --set model.preset=tiny
run one --set model.preset=paper
run pipe --set model.preset=paper --set parallel.devices=4 --set parallel.partitioner=pipedream --set parallel.max_replicas=1
/usr/bin/python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
def memory(name):
    lines = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    return [m for l in lines if "memory" in l for m in l["memory"]]
MiB = 2 ** 20
b = memory("base")[0]; base = b["peak_rss_bytes"] - b["planned_bytes"]
one = memory("one")[0]["peak_rss_bytes"]
pipe = sorted(memory("pipe"), key=lambda m: m["rank"])
print(f"base per process (mlp/tiny peak {b['peak_rss_bytes']/MiB:.0f} MiB - planned {b['planned_bytes']/MiB:.1f} MiB): {base/MiB:.0f} MiB")
print(f"one process, mlp/paper: peak RSS {one/MiB:.0f} MiB")
print("| rank | stage | peak RSS | planned | base + 1.2 x planned | within |")
print("|---|---|---|---|---|---|")
ok = True
for m in pipe:
    bound = base + 1.2 * m["planned_bytes"]
    ok &= m["peak_rss_bytes"] <= bound
    print(f"| {m['rank']} | {m['stage']} | {m['peak_rss_bytes']/MiB:.0f} MiB | {m['planned_bytes']/MiB:.0f} MiB | "
          f"{bound/MiB:.0f} MiB | {'yes' if m['peak_rss_bytes'] <= bound else 'NO'} |")
total = sum(m["peak_rss_bytes"] for m in pipe)
print(f"sum over the 4 processes: {total/MiB:.0f} MiB = {total/one:.2f} x one process (target <= 1.30)")
print("per-process bound:", "met" if ok else "MISSED")
EOF
# Under a per-process address-space limit: one process refuses, the pipeline trains.
lim=$((limit_gb * 1024 * 1024 * 1024))
out=$(prlimit --as=$lim "$bin" train "${common[@]}" --set name=one-limited --set model.preset=paper 2>&1); rc=$?
echo "one process under prlimit --as=${limit_gb}G: exit $rc: $(printf '%s\n' "$out" | tail -1)"
start=$SECONDS
out=$(prlimit --as=$lim "$bin" train "${common[@]}" --set name=pipe-limited --set model.preset=paper \
      --set parallel.devices=4 --set parallel.partitioner=pipedream --set parallel.max_replicas=1 2>&1); rc=$?
echo "4-stage pipeline under prlimit --as=${limit_gb}G per process: exit $rc in $((SECONDS - start)) s: $(printf '%s\n' "$out" | grep "test accuracy:" | tail -1)"
