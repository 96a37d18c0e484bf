#!/usr/bin/env python3
"""The end-to-end peer of `trident train`: a plain PyTorch training script
as a user writes it. Fashion-MNIST held in memory (normalised by the
training set's mean and std, as trident does), a DataLoader with shuffling,
Adam, a running accuracy, batch 128. Times STEPS steps after 10 warm-up
steps and prints one JSON line {"steps_per_s", ...}. Runs under Debian's
python3-torch or the peer environment (scripts/install-peers.sh).
   pytorch_train.py MODEL THREADS STEPS [DATA_DIR]"""
import json, os, sys, time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_eval import read_idx  # noqa: E402
from pytorch_step import Cnn, Mlp  # noqa: E402


def main():
    model, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    root = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    images = read_idx(f"{root}/train-images-idx3-ubyte.gz").float().div_(255).unsqueeze(1)
    images = (images - images.mean()) / images.std()
    labels = read_idx(f"{root}/train-labels-idx1-ubyte.gz").long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=128,
                                         shuffle=True, drop_last=True)
    net = {"mlp": Mlp, "cnn": Cnn}[model]()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    done, correct, seen, t0 = 0, 0, 0, None
    while done < steps + 10:
        for x, y in loader:
            if done == 10:
                t0 = time.perf_counter()
            logits = net({"image": x})
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
            done += 1
            if done == steps + 10:
                break
    s = time.perf_counter() - t0
    print(json.dumps({"system": "pytorch " + torch.__version__, "model": model, "threads": threads, "steps": steps,
                      "steps_per_s": steps / s, "running_accuracy": correct / seen}))


if __name__ == "__main__":
    main()
