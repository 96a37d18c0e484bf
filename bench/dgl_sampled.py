"""DGL's CPU neighbour sampler and sampled GraphSAGE training, the peer of
trident's (bench/run_sampled.sh, docs/benchmarks/gnn.md).

  python dgl_sampled.py sample GRAPH_DIR FANOUTS BATCH BATCHES THREADS
      DGL's NeighborSampler on the seeds bench_sampler samples ((b * BATCH + i)
      * 7919 mod N); prints one JSON line: sampled edges/s, edges and input
      nodes per batch.
  python dgl_sampled.py train GRAPH_DIR FANOUTS BATCH HIDDEN THREADS SEED
      one epoch of GraphSAGE-mean (len(FANOUTS) SAGEConv layers, HIDDEN wide,
      relu and dropout 0.5 between, Adam lr 0.003) over the training mask's
      nodes in shuffled batches of BATCH (the last partial batch dropped, as
      trident's epochs), sampling in the training process (DGL's DataLoader,
      no workers); prints one JSON line: epoch seconds, steps, last loss.

GRAPH_DIR is a trident graph directory (docs/gnn.md): edges.npy [2, E] (row 0
sources, row 1 targets; both directions listed), features.npy, labels.npy,
train_mask.npy. Threads: OMP_NUM_THREADS and torch.set_num_threads.
"""
import json
import os
import sys
import time

mode, directory = sys.argv[1], sys.argv[2]
threads = int(sys.argv[6])
os.environ["OMP_NUM_THREADS"] = str(threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import dgl  # noqa: E402

torch.set_num_threads(threads)
fanouts = [int(f) for f in sys.argv[3].split(",")]
batch = int(sys.argv[4])
edges = np.load(os.path.join(directory, "edges.npy"))
n = int(np.load(os.path.join(directory, "labels.npy"), mmap_mode="r").shape[0])
g = dgl.graph((torch.from_numpy(edges[0]), torch.from_numpy(edges[1])), num_nodes=n)
g = g.formats(["csc"])  # in-edges by destination, what NeighborSampler reads
sampler = dgl.dataloading.NeighborSampler(fanouts)

if mode == "sample":
    batches = int(sys.argv[5])
    seeds = [torch.tensor([(b * batch + i) * 7919 % n for i in range(batch)]) for b in range(batches)]
    sampler.sample_blocks(g, seeds[0])  # warm up
    total_edges = total_inputs = 0
    start = time.perf_counter()
    for s in seeds:
        inputs, _, blocks = sampler.sample_blocks(g, s)
        total_edges += sum(b.num_edges() for b in blocks)
        total_inputs += len(inputs)
    took = time.perf_counter() - start
    print(json.dumps({"threads": threads, "sampled_edges_per_s": total_edges / took,
                      "edges_per_batch": total_edges // batches, "input_nodes_per_batch": total_inputs // batches,
                      "batches_per_s": batches / took, "dgl": dgl.__version__}))
    sys.exit(0)

import dgl.nn as dglnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

hidden, seed = int(sys.argv[5]), int(sys.argv[7])
torch.manual_seed(seed)
x = torch.from_numpy(np.load(os.path.join(directory, "features.npy")))
y = torch.from_numpy(np.load(os.path.join(directory, "labels.npy")))
train = torch.from_numpy(np.load(os.path.join(directory, "train_mask.npy"))).nonzero().squeeze(1)
classes = int(y.max()) + 1


class Sage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        widths = [x.shape[1]] + [hidden] * (len(fanouts) - 1) + [classes]
        self.layers = torch.nn.ModuleList(dglnn.SAGEConv(widths[i], widths[i + 1], "mean") for i in range(len(fanouts)))

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, F.dropout(h, 0.5, self.training))
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h


model = Sage()
opt = torch.optim.Adam(model.parameters(), lr=0.003)
loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=batch, shuffle=True, drop_last=True, num_workers=0)
start = time.perf_counter()
steps = 0
for inputs, outputs, blocks in loader:
    logits = model(blocks, x[inputs])
    loss = F.cross_entropy(logits, y[outputs])
    opt.zero_grad()
    loss.backward()
    opt.step()
    steps += 1
took = time.perf_counter() - start
print(json.dumps({"epoch_s": took, "steps": steps, "loss": float(loss), "dgl": dgl.__version__, "threads": threads}))
