#!/usr/bin/env bash
# The point of the exact layer split (docs/gnn.md): memory. GCNII of depth L
# (hidden 64, dropout 0.6) on a generated graph of NODES nodes (csbm,
# 4 classes, 64 features, mean degree 8), 2 full-graph epochs, one thread
# per process. For each depth in DEPTHS, one process and 4 processes (a
# pinned plan: 4 stages of L/4 layers, H0 sent to every stage) train under a
# per-process address-space limit (prlimit --as=LIMIT_GB); the table says
# which trained, and the same 4 stages in GNNPipe mode (the nodes in CHUNKS
# chunks, default 8, one per micro-batch; docs/gnn.md). Then, at
# REPORT_DEPTH without a limit, every rank's peak resident memory beside its
# stage's planned memory (metrics.jsonl).
#   bash bench/run_gnn_memory.sh [LIMIT_GB] [NODES] [DEPTHS] [REPORT_DEPTH]
set -u
cd "$(dirname "$0")/.."
bin=${BUILD:-build}/tools/trident/trident
limit_gb=${1:-2}; nodes=${2:-20000}; depths=${3:-"8 16 32 64 128"}; report=${4:-32}; chunks=${CHUNKS:-8}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
G="csbm:nodes=$nodes,classes=4,features=64,degree=8"
common=(--config examples/graph-gcn2.yaml --set "model.graph=$G" --set train.epochs=2 --set train.eval=false
        --set train.threads=1 --set checkpoint.every=0 --set runs_dir=$work/runs --set train.log_every=1)
layer_plan() {  # DEPTH MINI_BATCH -> a 4-stage plan file
  "$bin" graph --model gcnii$1 --graph "$G" --out "$work/g$1.json" > /dev/null
  /usr/bin/python3 bench/gnn_layer_plan.py "$work/g$1.json" gcnii$1 4 "$work/p$1-$2.json" $2
  echo "$work/p$1-$2.json"
}
run() {  # NAME DEPTH PROCESSES [LIMIT_BYTES]; GNNPipe mode with CH=K chunks
  local args=("${common[@]}" --set model.name=gcnii$2 --set name=$1 --set model.graph_chunks=${CH:-0})
  [ "$3" -gt 1 ] && args+=(--set parallel.devices=$3 --set parallel.partitioner=$(layer_plan $2 $(( ${CH:-0} > 1 ? CH : 1 ))) --nproc $3)
  if [ -n "${4:-}" ]; then prlimit --as=$4 "$bin" train "${args[@]}" > "$work/$1.log" 2>&1
  else "$bin" train "${args[@]}" > "$work/$1.log" 2>&1; fi
}
why() { grep -o -i -m1 'out of memory\|bad_alloc' "$1" | head -1 || true; }
lim=$(/usr/bin/python3 -c "print(int($limit_gb * 2**30))")
echo "GCNII on csbm, $nodes nodes, hidden 64; prlimit --as=${limit_gb}G per process"
echo "| depth | 1 process | 4 processes, layer split | 4 processes, GNNPipe mode ($chunks chunks) |"
echo "|---|---|---|---|"
for d in $depths; do
  one=$(run one-$d $d 1 $lim && echo trains || echo "fails ($(why "$work/one-$d.log"))")
  four=$(run four-$d $d 4 $lim && echo trains || echo "fails ($(why "$work/four-$d.log"))")
  pipe=$(CH=$chunks run pipe-$d $d 4 $lim && echo trains || echo "fails ($(why "$work/pipe-$d.log"))")
  echo "| $d | $one | $four | $pipe |"
done
run one-report $report 1 && run four-report $report 4 && CH=$chunks run pipe-report $report 4 ||
  { echo "FAILED the unlimited runs"; tail -3 "$work"/*-report.log; exit 1; }
/usr/bin/python3 - "$work/runs" "$report" <<'PY'
import json, sys
runs, depth = sys.argv[1], sys.argv[2]
MiB = 2 ** 20
def memory(name):
    lines = [json.loads(l) for l in open(f"{runs}/{name}/metrics.jsonl")]
    return {m["rank"]: m for l in lines if "memory" in l for m in l["memory"]}
print(f"\nGCNII-{depth} without a limit: peak resident memory (measured) and the plan's memory per rank")
print("| run | rank | stage | peak RSS | planned | measured / planned |")
print("|---|---|---|---|---|---|")
label = {"one-report": "1 process", "four-report": "4 processes", "pipe-report": "4 processes, GNNPipe"}
for name in ("one-report", "four-report", "pipe-report"):
    for r, m in sorted(memory(name).items()):
        print(f"| {label[name]} | {r} | {m['stage']} | "
              f"{m['peak_rss_bytes']/MiB:.0f} MiB | {m['planned_bytes']/MiB:.0f} MiB | "
              f"{m['peak_rss_bytes']/m['planned_bytes']:.1f} |")
PY
