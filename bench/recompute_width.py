#!/usr/bin/env python3
"""The widest model that trains under a per-process memory limit, with and
without recomputation (see Note [Recomputation] in plan/plan.h).

A convolutional classifier of width W (conv 5x5 1->W, ReLU, conv 5x5 W->W,
ReLU, max-pool 2, Linear W*14*14 -> 10; activations grow with W, weights
with W^2) is exported with tools/export for each W, then trained by
`trident train` for a few steps on 4 processes (pipedream, one replica per
stage, one thread each) under `prlimit --as=LIMIT_GB` (0: no limit), planned for a
cpu-local cluster whose device memory is MEMORY_GIB, with
`parallel.recompute` auto and never. Prints, per width, whether each trained
(or its one-line error), which stages the plan recomputes, and each rank's
peak resident memory beside its planned memory.

  /usr/bin/python3 bench/recompute_width.py TRIDENT LIMIT_GB MEMORY_GIB MINI MICRO W1 W2 ...
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "export"))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "export", "test"))
import trident_export  # noqa: E402
from own_model_test import arrays, save_npy, write_config  # noqa: E402


def model(width):
    return nn.Sequential(nn.Conv2d(1, width, 5, padding=2), nn.ReLU(), nn.Conv2d(width, width, 5, padding=2),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(width * 14 * 14, 10))


def main():
    binary, limit_gb, memory_gib, mini, micro = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    widths = [int(w) for w in sys.argv[6:]]
    work = tempfile.mkdtemp(prefix="recompute-width-")
    cluster = os.path.join(work, "cluster.yaml")
    with open(cluster, "w") as f:
        f.write("name: cpu-limited\ndevice: {name: cpu-core, float32_tflops: 0.1, float16_tflops: 0.05, "
                "memory_gib: %g, memory_bandwidth_gbs: 10, half_efficiency_gflop: 0.001, launch_us: 5}\n"
                "devices_per_node: 64\nnodes: 1\nintra_node: {latency_us: 30, bandwidth_gbs: 2}\n"
                "inter_node: {latency_us: 30, bandwidth_gbs: 2}\n" % memory_gib)
    inputs = {"image": ((1, 28, 28), torch.float32)}
    print("| width | parameters | recompute | trained | stages recomputing | peak RSS / planned per rank (MiB) |")
    print("|---|---|---|---|---|---|")
    for width in widths:
        torch.manual_seed(0)
        module = model(width)
        params = sum(p.numel() for p in module.parameters())
        d = os.path.join(work, "w%d" % width)
        trident_export.export(module, inputs, "label", "cross_entropy", os.path.join(d, "model"), "cnn%d" % width)
        save_npy(os.path.join(d, "train"), arrays(inputs, 10, {}, mini * 2, 1))
        write_config(d, mini, micro, 0.01, "train")
        for rule in ("never", "auto"):
            limit = ["prlimit", "--as=%d" % int(limit_gb * 2 ** 30)] if limit_gb > 0 else []
            run = subprocess.run(
                limit + [binary, "train", "--config",
                 os.path.join(d, "config.yaml"), "--set", "name=" + rule, "--set", "train.steps=2",
                 "--set", "parallel.devices=4", "--set", "parallel.partitioner=pipedream",
                 "--set", "parallel.max_replicas=1", "--set", "parallel.cluster=" + cluster,
                 "--set", "parallel.recompute=" + rule, "--set", "train.threads=1"],
                capture_output=True, text=True)
            run_dir = os.path.join(d, "runs", rule)
            if run.returncode != 0:
                last = ([l for l in (run.stdout + run.stderr).splitlines() if l.strip()] or ["exit %d" % run.returncode])[-1]
                print("| %d | %.2f M | %s | no: %s | | |" % (width, params / 1e6, rule, last[-160:]))
                continue
            plan = json.load(open(os.path.join(run_dir, "plan.json")))
            recomputing = [st["id"] for st in plan["stages"] if st.get("recompute")]
            memory = {}
            for line in open(os.path.join(run_dir, "metrics.jsonl")):
                for m in json.loads(line).get("memory", []):
                    memory[m["rank"]] = m
            rss = ", ".join("%d: %.0f / %.0f" % (r, m["peak_rss_bytes"] / 2 ** 20, m["planned_bytes"] / 2 ** 20)
                            for r, m in sorted(memory.items()))
            print("| %d | %.2f M | %s | yes | %s | %s |" % (width, params / 1e6, rule, recomputing or "none", rss))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
