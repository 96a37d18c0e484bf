#!/usr/bin/env python3
"""The peer of trident's 2-stage pipeline (bench/run_pipeline.sh):
torch.distributed.pipelining (PyTorch 2.x, from scripts/install-peers.sh)
on 2 processes over Gloo, the zoo's tiny transformer written in PyTorch and
split as trident's pipedream plan splits it (stage 0: embed + layer0;
stage 1: layer1, ln_f, pool, head), Adam, one thread per process.
Run by torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
Prints rank 1's JSON line {"samples_per_s", ...}.
   pytorch_pipelining.py SCHEDULE(gpipe|1f1b) MINI_BATCH MICRO_BATCH STEPS"""
import json, os, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_step import Layer  # noqa: E402  (the zoo's pre-norm encoder layer)


class First(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.layer0 = nn.Linear(28, 64), Layer(64, 4, 256)

    def forward(self, image):
        return self.layer0(self.embed(image.reshape(-1, 28, 28)))


class Second(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1, self.ln_f, self.head = Layer(64, 4, 256), nn.LayerNorm(64), nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.ln_f(self.layer1(x)).mean(1))


def main():
    schedule_name, mini, micro, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    module = First() if rank == 0 else Second()
    stage = PipelineStage(module, rank, 2, torch.device("cpu"))
    schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule_name](
        stage, n_microbatches=mini // micro, loss_fn=lambda out, y: F.cross_entropy(out, y))
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    images, labels = torch.randn(mini, 1, 28, 28, generator=g), torch.randint(10, (mini,), generator=g)

    def step():
        opt.zero_grad()
        if rank == 0:
            schedule.step(images)
        else:
            schedule.step(target=labels, losses=[])
        opt.step()

    for _ in range(3):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    s = time.perf_counter() - t0
    if rank == 1:
        print(json.dumps({"system": "torch.distributed.pipelining " + torch.__version__, "schedule": schedule_name,
                          "mini_batch": mini, "micro_batch": micro, "steps": steps, "samples_per_s": steps * mini / s}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
