"""PyTorch DDP (Gloo) training step, the peer of bench_dp.cc: same models as
pytorch_step.py, each rank's slice of a fixed random global batch, SGD with
momentum. Rank 0 prints one JSON line.
  RANK=r WORLD_SIZE=n MASTER_ADDR=... MASTER_PORT=... python3 pytorch_ddp.py MODEL GLOBAL_BATCH THREADS STEPS
"""
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from pytorch_step import Cnn, Inception, Mlp, Mmt, timed_steps  # noqa: E402


def main():
    model, batch, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = torch.nn.parallel.DistributedDataParallel({"mlp": Mlp, "cnn": Cnn, "inception": Inception, "mmt": Mmt}[model]())
    rows = batch // world
    torch.manual_seed(rank + 1)
    b = {"image": torch.randn(rows, 1, 28, 28), "label": torch.randint(10, (rows,))}
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    _, s = timed_steps(net, opt, b, batch, steps)
    if rank == 0:
        print(json.dumps({"system": "pytorch-ddp", "model": model, "ranks": world, "batch": batch, "threads": threads,
                          "steps_per_s": steps / s, "iteration_ms": 1e3 * s / steps}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
