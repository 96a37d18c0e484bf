"""PyTorch's side of bench/run_loader.sh: torchvision's ImageFolder through a
DataLoader, as its users train — RandomResizedCrop(224), flip, ToTensor,
Normalize (ImageNet's), shuffled, `workers` persistent worker processes,
batches of `batch`. Prints one JSON line with the fields bench_loader prints.

usage: pytorch_loader.py FOLDER WORKERS BATCHES BATCH
"""
import json
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(u.ru_utime + u.ru_stime for u in (own, children))


def main():
    folder, workers, batches, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = datasets.ImageFolder(folder, tf)
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=workers > 0,
                        prefetch_factor=2 if workers else None, drop_last=True,
                        generator=torch.Generator().manual_seed(0))
    checksum, seen, first_s = 0.0, 0, 0.0
    while seen < batches:
        for images, labels in loader:
            checksum += float(images[0, 0, 0, 0])
            seen += 1
            if seen == 1:
                t1 = time.perf_counter()
                first_s = t1 - t0
            if seen == batches:
                break
    steady = time.perf_counter() - t1
    # Worker processes' CPU time counts once they are reaped: end them first.
    del loader
    cpu = cpu_seconds() - cpu0
    print(json.dumps({"workers": workers, "batch": batch, "batches": batches, "first_batch_s": first_s,
                      "images_per_s": (batches - 1) * batch / steady, "cpu_s_per_image": cpu / (batches * batch),
                      "checksum": checksum}))


if __name__ == "__main__":
    main()
