#!/usr/bin/env python3
"""Per-op profile of the PyTorch side of the step benchmark (bench/pytorch_step.py):
the self CPU time of each aten op over STEPS training steps, to explain a
difference between two PyTorch versions or between PyTorch and trident.
Run it with the project environment's Python (scripts/install-peers.sh).   pytorch_op_profile.py MODEL BATCH THREADS STEPS [TOP]"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_step as ps  # noqa: E402


def main():
    model, batch, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 12
    net, b, opt = ps.setup(model, batch, threads)
    ps.timed_steps(net, opt, b, batch, 5)  # warm up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        ps.timed_steps(net, opt, b, batch, steps)
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in rows)
    print("torch %s, %s batch %d, %d thread(s), %d steps: %.2f ms of op self time per step" % (
        torch.__version__, model, batch, threads, steps, total / 1e3 / steps))
    for e in rows[:top]:
        print("  %-40s %8.3f ms/step  %5.1f%%  calls/step %d" % (e.key, e.self_cpu_time_total / 1e3 / steps,
                                                              100 * e.self_cpu_time_total / total, e.count // steps))


if __name__ == "__main__":
    main()
