#!/usr/bin/env python3
"""Loads weights exported by `trident export` into the PyTorch reference
model of bench/pytorch_step.py and evaluates it on the first TEST_SIZE
Fashion-MNIST test images (normalised as trident does). Prints one JSON line
{"test_accuracy", "test_loss", "parameters"}.
   pytorch_eval.py WEIGHTS MODEL TEST_SIZE [DATA_DIR]"""
import gzip, json, os, struct, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_step import Mlp, Cnn  # noqa: E402  (the reference models, named as trident names them)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4:4 + 4 * (magic & 0xFF)])
    return torch.frombuffer(bytearray(data[4 + 4 * len(dims):]), dtype=torch.uint8).reshape(dims)


def main():
    weights, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    root = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    net = {"mlp": Mlp, "cnn": Cnn}[model]()
    state = torch.load(weights, weights_only=True)  # as PyTorch 2.6+ loads by default (see Note [Weights PyTorch loads])
    net.load_state_dict(state, strict=True)  # every name must match, both ways
    images = read_idx(f"{root}/t10k-images-idx3-ubyte.gz")[:n]
    labels = read_idx(f"{root}/t10k-labels-idx1-ubyte.gz")[:n].long()
    x = ((images.float() / 255.0 - 0.2860) / 0.3530).unsqueeze(1)
    with torch.no_grad():
        logits = net({"image": x})
        loss = F.cross_entropy(logits, labels).item()
        acc = (logits.argmax(1) == labels).float().mean().item()
    print(json.dumps({"test_accuracy": acc, "test_loss": loss, "parameters": len(state)}))


if __name__ == "__main__":
    main()
