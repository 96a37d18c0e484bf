#!/usr/bin/env python3
"""The peer of trident's 2-stage pipeline (bench/run_pipeline.sh):
torch.distributed.pipelining (PyTorch 2.x, from scripts/install-peers.sh)
on 2 processes over Gloo, Adam, one thread per process, with the zoo's tiny
models written in PyTorch and split as trident's plans split them:
- transformer: stage 0 embed + layer0; stage 1 layer1, ln_f, pool, head;
- mmt (two branches): stage 0 branch 1; stage 1 branch 0, concat, head.
  Pipelining runs stages as a chain fed only by stage 0, so stage 0 must
  also pass modality 0 on to stage 1, and stage 1 starts a micro-batch only
  when stage 0 has finished it. trident's graph pipeline feeds each stage
  its own input, so the branches run at the same time.
Run by torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
Prints rank 1's JSON line {"samples_per_s", ...}. With PROFILE=1 in the
environment each rank also prints where its step goes (torch.profiler: self
time of its aten ops per step, and the rest of the step), to set beside
trident's per-stage trace.
   pytorch_pipelining.py MODEL(transformer|mmt) SCHEDULE(gpipe|1f1b) MINI_BATCH MICRO_BATCH STEPS"""
import json, os, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_step import Layer  # noqa: E402  (the zoo's pre-norm encoder layer)
from peer_timing import timed_steps  # noqa: E402


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


class Branch(nn.Module):
    """One mmt branch: projection, two encoder layers, mean over the sequence."""
    def __init__(self):
        super().__init__()
        self.proj, self.layers = nn.Linear(16, 32), nn.Sequential(Layer(32, 4, 64), Layer(32, 4, 64))

    def forward(self, x):
        return self.layers(self.proj(x)).mean(1)


class MmtFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.branch1 = Branch()

    def forward(self, modality0, modality1):
        return self.branch1(modality1), modality0.clone()  # modality 0 rides along the chain


class MmtSecond(nn.Module):
    def __init__(self):
        super().__init__()
        self.branch0, self.fc, self.out = Branch(), nn.Linear(64, 32), nn.Linear(32, 8)

    def forward(self, pooled1, modality0):
        # `* 1.0`: the gradient of a concatenated input is a strided slice, and
        # pipelining sends input gradients as they are, into a Gloo receive
        # that takes only contiguous tensors; the product's gradient is dense.
        return self.out(F.relu(self.fc(torch.cat([self.branch0(modality0), pooled1 * 1.0], 1))))


def inputs(model, mini):
    """A fixed random mini-batch: the model's inputs and its labels."""
    g = torch.Generator().manual_seed(1)
    if model == "mmt":
        return (torch.randn(mini, 8, 16, generator=g), torch.randn(mini, 8, 16, generator=g)), \
            torch.randint(8, (mini,), generator=g)
    return (torch.randn(mini, 1, 28, 28, generator=g),), torch.randint(10, (mini,), generator=g)


def profile(rank, step, steps):
    """Prints this rank's op self time per step, its top ops, and the step's wall time."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - t0) / steps
    rows = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in rows) / 1e3 / steps
    top = sorted(rows, key=lambda e: -e.self_cpu_time_total)[:20]
    print(json.dumps({"rank": rank, "step_ms": 1e3 * wall, "aten_self_ms_per_step": total,
                      "top": {e.key: [round(e.self_cpu_time_total / 1e3 / steps, 2), e.count // steps] for e in top}}), flush=True)


def main():
    model_name, schedule_name = sys.argv[1], sys.argv[2]
    mini, micro, steps = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    module = {"transformer": (First, Second), "mmt": (MmtFirst, MmtSecond)}[model_name][rank]()
    stage = PipelineStage(module, rank, 2, torch.device("cpu"))
    schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule_name](
        stage, n_microbatches=mini // micro, loss_fn=lambda out, y: F.cross_entropy(out, y))
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    xs, labels = inputs(model_name, mini)

    def step():
        opt.zero_grad()
        if rank == 0:
            schedule.step(*xs)
        else:
            schedule.step(target=labels, losses=[])
        opt.step()

    s = timed_steps(step, 3, steps, (lambda: profile(rank, step, steps)) if os.environ.get("PROFILE") == "1" else None)
    if rank == 1:
        print(json.dumps({"system": "torch.distributed.pipelining " + torch.__version__, "model": model_name, "schedule": schedule_name,
                          "mini_batch": mini, "micro_batch": micro, "steps": steps, "samples_per_s": steps * mini / s}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
