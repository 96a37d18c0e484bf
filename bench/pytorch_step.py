#!/usr/bin/env python3
"""PyTorch side of the step benchmark (run by the project environment's
Python, scripts/install-peers.sh): the zoo's
tiny models written as a PyTorch user would, trained with the same batch,
threads and optimizer (SGD, momentum 0.9, lr 0.01) on one fixed random batch.
Prints one JSON line.
    pytorch_step.py MODEL BATCH|max THREADS STEPS [tiny|paper|gpt2-124m|gpt2-350m [cpu|cuda [fp32|bf16]]]
PRECISION bf16 wraps forward and loss in torch.autocast(device, torch.bfloat16),
the one line a PyTorch user adds.
PRESET paper takes the zoo's paper sizes (lib/zoo/src/zoo.cc); BATCH max
doubles the batch from 64 to 1024 while a step fits in the device's memory,
as bench_step does."""
import json, math, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, hidden=256, layers=2):
        super().__init__()
        self.layers = layers
        for i in range(layers):  # fc0, fc1, ...: trident's parameter names (bench/pytorch_eval.py loads them)
            setattr(self, f"fc{i}", nn.Linear(784 if i == 0 else hidden, hidden))
        self.head = nn.Linear(hidden, 10)

    def forward(self, b):
        x = b["image"].flatten(1)
        for i in range(self.layers):
            x = F.relu(getattr(self, f"fc{i}")(x))
        return self.head(x)


class Cnn(nn.Module):
    def __init__(self, c1=32, c2=64, fc=128):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, c1, 5, padding=2), nn.Conv2d(c1, c2, 5, padding=2)
        self.fc1, self.head = nn.Linear(c2 * 7 * 7, fc), nn.Linear(fc, 10)

    def forward(self, b):
        x = F.max_pool2d(F.relu(self.conv1(b["image"])), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return self.head(F.relu(self.fc1(x.flatten(1))))


class Block(nn.Module):
    def __init__(self, cin, w):
        super().__init__()
        self.b1 = nn.Conv2d(cin, w, 1)
        self.b2r, self.b2 = nn.Conv2d(cin, w // 2, 1), nn.Conv2d(w // 2, w, 3, padding=1)
        self.b3r, self.b3 = nn.Conv2d(cin, w // 4, 1), nn.Conv2d(w // 4, w // 2, 5, padding=2)
        self.b4 = nn.Conv2d(cin, w // 2, 1)

    def forward(self, x):
        return torch.cat([F.relu(self.b1(x)), F.relu(self.b2(F.relu(self.b2r(x)))),
                          F.relu(self.b3(F.relu(self.b3r(x)))),
                          F.relu(self.b4(F.max_pool2d(x, 3, 1, 1)))], 1)


class Inception(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 32, 3, padding=1)
        self.block1, self.block2 = Block(32, 32), Block(96, 48)
        self.fc, self.out = nn.Linear(144 * 3 * 3, 128), nn.Linear(128, 10)

    def forward(self, b):
        x = F.max_pool2d(F.relu(self.stem(b["image"])), 2, 2)
        x = F.max_pool2d(self.block1(x), 2, 2)
        x = F.max_pool2d(self.block2(x), 2, 2)
        return self.out(F.relu(self.fc(x.flatten(1))))


class Attention(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads, self.in_proj, self.out_proj = heads, nn.Linear(h, 3 * h), nn.Linear(h, h)

    def forward(self, x):
        b, s, h = x.shape
        dh = h // self.heads
        q, k, v = self.in_proj(x).view(b, s, 3, self.heads, dh).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), -1)
        return self.out_proj((att @ v).transpose(1, 2).reshape(b, s, h))


class Layer(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(h), Attention(h, heads), nn.LayerNorm(h)
        self.fc1, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Mmt(nn.Module):
    def __init__(self, branches=2, layers=2, hidden=32, heads=4, ffn=64, features=16):
        super().__init__()
        self.proj = nn.ModuleList([nn.Linear(features, hidden) for _ in range(branches)])
        self.layers = nn.ModuleList([nn.ModuleList([Layer(hidden, heads, ffn) for _ in range(layers)])
                                     for _ in range(branches)])
        self.fc, self.out = nn.Linear(branches * hidden, hidden), nn.Linear(hidden, 8)

    def forward(self, b):
        parts = []
        for m in range(len(self.proj)):
            x = self.proj[m](b[f"modality{m}"])
            for layer in self.layers[m]:
                x = layer(x)
            parts.append(x.mean(1))
        return self.out(F.relu(self.fc(torch.cat(parts, 1))))


class Transformer(nn.Module):
    """The zoo's tiny transformer: an image read as 28 rows of 28 pixels."""
    def __init__(self, hidden=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Linear(28, hidden)
        self.layers = nn.ModuleList([Layer(hidden, heads, 4 * hidden) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, 10)

    def forward(self, b):
        x = self.embed(b["image"].reshape(-1, 28, 28))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x).mean(1))


class Gpt(nn.Module):
    """The zoo's gpt as nanoGPT writes it: token and position embeddings, pre-norm blocks with causal
    attention (PyTorch 2.x: F.scaled_dot_product_attention(is_causal=True), what a user of 2.x writes; 1.13,
    which has none: the masked softmax), a final norm, the head tied to the token embedding."""
    def __init__(self, vocab=64, context=32, hidden=64, heads=4, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, hidden), nn.Parameter(0.02 * torch.randn(context, hidden))
        nn.init.normal_(self.tok.weight, std=0.02)
        self.heads = heads
        self.blocks = nn.ModuleList([nn.ModuleDict(dict(
            ln1=nn.LayerNorm(hidden), qkv=nn.Linear(hidden, 3 * hidden), out=nn.Linear(hidden, hidden),
            ln2=nn.LayerNorm(hidden), fc1=nn.Linear(hidden, 4 * hidden), fc2=nn.Linear(4 * hidden, hidden)))
            for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def attend(self, blk, x):
        b, s, h = x.shape
        q, k, v = blk["qkv"](x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
            att = att.masked_fill(torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = torch.softmax(att, -1) @ v
        return blk["out"](y.transpose(1, 2).reshape(b, s, h))

    def forward(self, b):
        x = self.tok(b["ids"]) + self.pos
        for blk in self.blocks:
            x = x + self.attend(blk, blk["ln1"](x))
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.ln_f(x) @ self.tok.weight.t()


def loss_sum(logits, label):
    """The loss summed over the rows, or over the positions for a label per position."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), label.reshape(-1), reduction="sum")


def timed_steps(net, opt, b, batch, steps, precision="fp32"):
    """5 warm-up steps (fewer when `steps` is), then `steps` timed ones: (last loss, seconds). The loss is
    the sum over the rows divided by the global batch `batch` (its tokens, for gpt), as in trident (see
    Note [Loss scale]); bf16: forward and loss under autocast."""
    device = next(net.parameters()).device.type
    divisor = b["label"].numel() if b["label"].dim() > 1 else batch

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_sum(net(b), b["label"]) / divisor
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    for _ in range(min(5, steps)):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        last = step()
    return last, time.perf_counter() - t0


# The zoo's paper presets (lib/zoo/src/zoo.cc); tiny is each class's defaults.
PAPER = {"mlp": dict(hidden=4096, layers=8), "cnn": dict(c1=128, c2=256, fc=1024),
         "transformer": dict(hidden=1024, heads=16, layers=24),
         "mmt": dict(branches=4, layers=8, hidden=1024, heads=16, ffn=4096, features=1024)}
MMT_SEQ = {"tiny": 8, "paper": 256}
GPT = {"tiny": dict(), "gpt2-124m": dict(vocab=50257, context=1024, hidden=768, heads=12, layers=12),
       "gpt2-350m": dict(vocab=50257, context=1024, hidden=1024, heads=16, layers=24)}


def setup(model, batch, threads, preset="tiny", device="cpu"):
    """The model, its fixed random batch and its optimizer, on `threads` threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    sizes = GPT[preset] if model == "gpt" else PAPER[model] if preset == "paper" else {}
    net = {"mlp": Mlp, "cnn": Cnn, "inception": Inception, "mmt": Mmt, "transformer": Transformer,
           "gpt": Gpt}[model](**sizes)
    if model == "gpt":
        vocab, context = net.tok.weight.shape[0], net.pos.shape[0]
        b = {"ids": torch.randint(vocab, (batch, context)), "label": torch.randint(vocab, (batch, context))}
    elif model == "mmt":
        features = sizes.get("features", 16)
        b = {f"modality{m}": torch.randn(batch, MMT_SEQ[preset], features) for m in range(len(net.proj))}
        b["label"] = torch.randint(8, (batch,))
    else:
        b = {"image": torch.randn(batch, 1, 28, 28), "label": torch.randint(10, (batch,))}
    net = net.to(device)
    b = {k: v.to(device) for k, v in b.items()}
    return net, b, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)


def largest_batch(model, threads, preset, device):
    """The largest of 64, 128, ... 1024 whose step fits in the device's memory."""
    fits = 0
    for batch in (64, 128, 256, 512, 1024):
        try:
            net, b, opt = setup(model, batch, threads, preset, device)
            loss_sum(net(b), b["label"]).backward()
            opt.step()
            fits = batch
        except torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else RuntimeError:
            break
        finally:
            net = b = opt = None
            if device == "cuda":
                torch.cuda.empty_cache()
    return fits


def main():
    model, threads, steps = sys.argv[1], int(sys.argv[3]), int(sys.argv[4])
    preset = sys.argv[5] if len(sys.argv) > 5 else "tiny"
    device = sys.argv[6] if len(sys.argv) > 6 else "cpu"
    precision = sys.argv[7] if len(sys.argv) > 7 else "fp32"
    batch = largest_batch(model, threads, preset, device) if sys.argv[2] == "max" else int(sys.argv[2])
    net, b, opt = setup(model, batch, threads, preset, device)
    last, s = timed_steps(net, opt, b, batch, steps, precision)
    print(json.dumps({"system": "pytorch", "torch": torch.__version__, "model": model, "preset": preset,
                      "device": device, "precision": precision, "batch": batch,
                      "threads": threads, "steps": steps, "steps_per_s": steps / s,
                      "samples_per_s": steps * batch / s, "last_loss": last}))


if __name__ == "__main__":
    main()
