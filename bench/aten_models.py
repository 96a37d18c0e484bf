#!/usr/bin/env python3
"""Captured models against eager PyTorch (bench/run_aten.sh).

  aten_models.py export NAME DIR        export NAME with tools/export (ATen capture); prints seconds and ops
  aten_models.py eager NAME THREADS STEPS BATCH   time STEPS SGD steps in eager PyTorch after 5 warm-up steps;
                                        prints {"steps_per_s", "calls"} (calls: ATen operators one forward runs)

NAME: resnet18 (torchvision, 32x32 images, 10 classes) or encoder (token ids -> embedding ->
nn.TransformerEncoder, batch_first, GELU, d 128, 4 heads, 2 layers, 32 tokens -> mean -> 10 classes).
Runs under Debian's python3-torch 1.13 or the peer environment (scripts/install-peers.sh)."""
import json
import os
import sys
import time

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "export"))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(128, 10)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(1))


def build(name):
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10), {"image": ((3, 32, 32), torch.float32)}
    return Encoder(), {"tokens": ((32,), torch.int64)}


def batch(inputs, rows):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 1000, (rows,) + s, generator=g) if d == torch.int64 else
            torch.randn((rows,) + s, generator=g) for s, d in inputs.values()]


def main():
    what, name = sys.argv[1], sys.argv[2]
    model, inputs = build(name)
    if what == "export":
        import trident_export
        t0 = time.perf_counter()
        graph_path, _ = trident_export.export(model, inputs, "label", out_dir=sys.argv[3], name=name)
        took = time.perf_counter() - t0
        print(json.dumps({"export_s": took, "ops": len(json.load(open(graph_path))["ops"])}))
        return
    threads, steps, rows = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    xs, y = batch(inputs, rows), torch.randint(0, 10, (rows,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    for i in range(steps + 5):
        if i == 5:
            t0 = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(model(*xs), y).backward()
        opt.step()
    rate = steps / (time.perf_counter() - t0)
    print(json.dumps({"system": "pytorch " + torch.__version__, "steps_per_s": rate}))


if __name__ == "__main__":
    main()
