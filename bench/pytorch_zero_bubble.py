#!/usr/bin/env python3
"""The peer of trident's zero-bubble pipelines (bench/run_zero_bubble.sh):
torch.distributed.pipelining (PyTorch 2.x, from scripts/install-peers.sh)
on 2 processes over Gloo, one thread each, Adam, on the zoo's mlp (8 layers
of HIDDEN, 784 inputs, 10 classes; ReLU after each layer) and a fixed random
mini-batch, the loss a sum over each micro-batch's samples as trident's.
Schedules:
- 1f1b: Schedule1F1B, one stage per process, split as trident's pipedream
  plan (fc0..fc3 | fc4..head);
- zbv: ScheduleZBVZeroBubble, two stages per process in a V (process 0
  holds stages 0 and 3, process 1 stages 1 and 2), two layers a stage;
- interleaved-zb: ScheduleInterleavedZeroBubble, two stages per process in
  a loop (0 and 2 | 1 and 3).
Run by torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
Prints, on the process that computes the loss, one JSON line
{"samples_per_s", ...}.
   pytorch_zero_bubble.py SCHEDULE MINI_BATCH MICRO_BATCH STEPS [HIDDEN]"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleInterleavedZeroBubble,
                                          ScheduleZBVZeroBubble)

from peer_timing import timed_steps


class Layers(nn.Module):
    """Layers first..last of the mlp (index 8 is the head)."""

    def __init__(self, first, last, hidden):
        super().__init__()
        self.names = []
        for i in range(first, last + 1):
            name = "head" if i == 8 else f"fc{i}"
            setattr(self, name, nn.Linear(784 if i == 0 else hidden, 10 if i == 8 else hidden))
            self.names.append(name)

    def forward(self, x):
        x = x.flatten(1)
        for name in self.names:
            x = getattr(self, name)(x)
            if name != "head":
                x = F.relu(x)
        return x


# Stage index -> layers, per schedule; and which stages each process holds.
SPLITS = {
    "1f1b": ([(0, 3), (4, 8)], [[0], [1]]),
    "zbv": ([(0, 1), (2, 3), (4, 5), (6, 8)], [[0, 3], [1, 2]]),
    "interleaved-zb": ([(0, 1), (2, 3), (4, 5), (6, 8)], [[0, 2], [1, 3]]),
}


def main():
    name, mini, micro, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    hidden = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    layers, held = SPLITS[name]
    n = len(layers)
    modules = [Layers(*layers[i], hidden) for i in held[rank]]
    stages = [PipelineStage(m, i, n, torch.device("cpu")) for m, i in zip(modules, held[rank])]
    loss = lambda out, y: F.cross_entropy(out, y, reduction="sum")  # noqa: E731
    chunks = mini // micro
    if name == "1f1b":
        schedule = Schedule1F1B(stages[0], n_microbatches=chunks, loss_fn=loss)
    elif name == "zbv":
        schedule = ScheduleZBVZeroBubble(stages, n_microbatches=chunks, loss_fn=loss)
    else:
        schedule = ScheduleInterleavedZeroBubble(stages, n_microbatches=chunks, loss_fn=loss)
    opt = torch.optim.Adam([p for m in modules for p in m.parameters()], lr=1e-3)
    g = torch.Generator().manual_seed(1)
    image, labels = torch.randn(mini, 1, 28, 28, generator=g), torch.randint(10, (mini,), generator=g)
    first, last = 0 in held[rank], n - 1 in held[rank]

    def step():
        opt.zero_grad()
        kwargs = {"target": labels, "losses": []} if last else {}
        if first:
            schedule.step(image, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()

    s = timed_steps(step, 2, steps)
    if last:
        print(json.dumps({"system": "torch.distributed.pipelining " + torch.__version__, "schedule": name,
                          "hidden": hidden, "mini_batch": mini, "micro_batch": micro, "steps": steps,
                          "samples_per_s": steps * mini / s}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
