"""What a fixed read delay costs in accuracy, without trident: the mlp of
bench/run_ssp_accuracy.sh (784-256-256-10, ReLU) trained in one PyTorch
process, where every gradient is computed on the weights of `delay` steps
before (delay 0 = BSP; a stale-synchronous read that missed d updates is
delay d). Adam lr 0.001, 96 samples per step, test accuracy on the whole
Fashion-MNIST test set. Seeds change the initial weights and the data order.

    /usr/bin/python3 bench/ssp_delay.py [STEPS] [constant|cosine] [SEEDS] [DELAYS]
    e.g. /usr/bin/python3 bench/ssp_delay.py 1875 cosine 5 0,1,2
"""
import copy
import gzip
import math
import sys

import numpy as np
import torch

ROOT = "/usr/share/datasets/fashion-mnist/"


def idx(name):
    data = gzip.open(ROOT + name).read()
    if data[3] == 3:  # images: 16-byte header
        return np.frombuffer(data, np.uint8, offset=16).reshape(-1, 784)
    return np.frombuffer(data, np.uint8, offset=8)


def images(name):
    return torch.tensor(idx(name), dtype=torch.float32) / 255.0


def labels(name):
    return torch.tensor(idx(name).astype(np.int64))


def train(delay, seed, steps, schedule, data, batch=96, lr=1e-3):
    x, y, xt, yt = data
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    reader = copy.deepcopy(model)  # holds the stale weights a gradient is computed on
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = [copy.deepcopy(model.state_dict())]
    g = torch.Generator().manual_seed(seed)
    epochs = (steps * batch + len(x) - 1) // len(x)
    order = torch.cat([torch.randperm(len(x), generator=g) for _ in range(epochs)])
    for t in range(steps):
        if schedule == "cosine":
            for group in opt.param_groups:
                group["lr"] = 0.5 * lr * (1 + math.cos(math.pi * t / max(1, steps - 1)))
        rows = order[t * batch:(t + 1) * batch]
        reader.load_state_dict(history[max(0, len(history) - 1 - delay)])
        reader.zero_grad()
        torch.nn.functional.cross_entropy(reader(x[rows]), y[rows]).backward()
        for p, q in zip(model.parameters(), reader.parameters()):
            p.grad = q.grad.clone()
        opt.step()
        history = history[-delay - 1:] + [copy.deepcopy(model.state_dict())]
    with torch.no_grad():
        return 100.0 * (model(xt).argmax(1) == yt).float().mean().item()


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    schedule = sys.argv[2] if len(sys.argv) > 2 else "constant"
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    delays = [int(d) for d in (sys.argv[4] if len(sys.argv) > 4 else "0,1,2").split(",")]
    torch.set_num_threads(1)
    data = (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))
    print(f"torch {torch.__version__}, 1 thread; {steps} steps of 96, Adam lr 0.001 {schedule}; {seeds} seeds")
    print("| read delay (steps) | test accuracy % by seed | mean | vs delay 0 |")
    print("|---|---|---|---|")
    base = None
    for d in delays:
        accs = [train(d, s, steps, schedule, data) for s in range(seeds)]
        mean = sum(accs) / len(accs)
        base = mean if base is None else base
        print(f"| {d} | {', '.join(f'{a:.2f}' for a in accs)} | {mean:.2f} | {mean - base:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
