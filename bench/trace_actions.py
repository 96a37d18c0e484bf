#!/usr/bin/env python3
"""Per-stage mean time of each kind of action in trident trace files.

    trace_actions.py RUN_DIR [RUN_DIR ...]

For each run directory (or trace.json), prints one row per stage: the mean
duration in ms and the count of its forward (F), backward (B) and weight (W)
actions, as the trace records them (category forward/backward/weight; waits
and recomputation are left out), and the mean samples/s of the logged steps
in the second half of metrics.jsonl. Used for docs/benchmarks/zero-bubble.md.
"""
import json
import pathlib
import statistics
import sys


def actions(trace):
    stages = {}
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("forward", "backward", "weight"):
            continue
        if e["name"].startswith(("wait", "recompute")):
            continue
        kind = {"forward": "F", "backward": "B", "weight": "W"}[e["cat"]]
        stages.setdefault(names.get(e["pid"], e["pid"]), {}).setdefault(kind, []).append(e["dur"] / 1000)
    return stages


def samples_per_s(run):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rates = [r["samples_per_s"] for r in rows if "samples_per_s" in r]
    return statistics.mean(rates[len(rates) // 2:]) if rates else float("nan")


def main():
    for arg in sys.argv[1:]:
        path = pathlib.Path(arg)
        runs = [path] if (path / "trace.json").exists() else sorted(p.parent for p in path.glob("*/trace.json"))
        for run in runs:
            print(f"{run}: {samples_per_s(run):.0f} samples/s (second half of the logged steps)")
            for stage, kinds in sorted(actions(json.loads((run / 'trace.json').read_text())).items()):
                cells = [f"{k} {statistics.mean(v):.3f} ms x{len(v)}" for k, v in sorted(kinds.items())]
                print(f"  {stage}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
