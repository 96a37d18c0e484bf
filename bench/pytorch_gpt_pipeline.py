#!/usr/bin/env python3
"""The peer of trident's gpt2-124m pipeline (bench/run_gpt_pipeline.sh):
torch.distributed.pipelining on 2 processes over Gloo, one thread each, Adam,
a fixed random batch of token ids. GPT-2 124M as nanoGPT writes it (causal
F.scaled_dot_product_attention), split as trident's pipedream plan splits it:
- 1f1b: Schedule1F1B on 2 stages, stage 0 the embeddings and blocks 0-7,
  stage 1 blocks 8-11, the final norm and the head;
- zbv: ScheduleZBVZeroBubble, 4 stages in a V (process 0 holds stages 0 and
  3, process 1 stages 1 and 2): blocks 0-3 with the embeddings | 4-7 | 8-10 |
  11 with the norm and the head (the head costs about two blocks).
pipelining cannot tie a weight across stages, so the head is its own copy of
the token embedding (trident sums the tied gradient of its two holders).
Run by torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
Prints rank 0's JSON line.
   pytorch_gpt_pipeline.py SCHEDULE(1f1b|zbv) MINI_BATCH MICRO_BATCH STEPS"""
import json, sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleZBVZeroBubble

from peer_timing import timed_steps

VOCAB, CONTEXT, HIDDEN, HEADS, LAYERS = 50257, 1024, 768, 12, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.qkv, self.out = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 3 * HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, HEADS, h // HEADS).permute(2, 0, 3, 1, 4)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Part(nn.Module):
    """Blocks [lo, hi); with the embeddings when first, the norm and head when last."""
    def __init__(self, lo, hi):
        super().__init__()
        self.first, self.last = lo == 0, hi == LAYERS
        if self.first:
            self.tok, self.pos = nn.Embedding(VOCAB, HIDDEN), nn.Parameter(0.02 * torch.randn(CONTEXT, HIDDEN))
        self.blocks = nn.ModuleList(Block() for _ in range(lo, hi))
        if self.last:
            self.ln_f, self.head = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x)) if self.last else x


def main():
    schedule_name, mini, micro, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    loss = lambda out, y: F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1))  # noqa: E731
    if schedule_name == "1f1b":
        parts = [Part(*[(0, 8), (8, 12)][rank])]
        stages = [PipelineStage(parts[0], rank, 2, torch.device("cpu"))]
        schedule = Schedule1F1B(stages[0], n_microbatches=mini // micro, loss_fn=loss)
    else:
        cuts = [(0, 4), (4, 8), (8, 11), (11, 12)]
        mine = [0, 3] if rank == 0 else [1, 2]
        parts = [Part(*cuts[i]) for i in mine]
        stages = [PipelineStage(p, i, 4, torch.device("cpu")) for p, i in zip(parts, mine)]
        schedule = ScheduleZBVZeroBubble(stages, n_microbatches=mini // micro, loss_fn=loss)
    params = [p for part in parts for p in part.parameters()]
    opt = torch.optim.Adam(params, lr=1e-4)
    g = torch.Generator().manual_seed(1)
    ids, labels = torch.randint(VOCAB, (mini, CONTEXT), generator=g), torch.randint(VOCAB, (mini, CONTEXT), generator=g)
    holds_first, holds_last = any(p.first for p in parts), any(p.last for p in parts)

    def step():
        opt.zero_grad()
        kwargs = {}
        if holds_last:
            kwargs = {"target": labels, "losses": []}
        if holds_first:
            schedule.step(ids, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()

    s = timed_steps(step, 1, steps)
    if rank == 0:
        print(json.dumps({"system": "torch.distributed.pipelining " + torch.__version__, "schedule": schedule_name,
                          "mini_batch": mini, "micro_batch": micro, "steps": steps,
                          "samples_per_s": steps * mini / s, "tokens_per_s": steps * mini * CONTEXT / s}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
