"""Cora as a trident graph directory (docs/gnn.md, Note [Graphs as data]).

Reads the two parquet files that ship inside the PyPI `graphdatascience`
wheel (2,708 papers with 1,433 binary word features in 7 subjects; 5,429
citation rows) and writes features.npy, labels.npy, edges.npy (the citations
as listed, duplicates dropped; graph.json says "symmetric": false, so trident
adds the reverse edges), and masks shaped as Planetoid's: 20 training nodes
per class, 500 validation and 1,000 test nodes, drawn with SEED. It is not
Planetoid's public split (Yang et al. 2016 fixed particular nodes), so its
accuracies are not comparable with the published 81.5% of GCN on that split.
Features are row-normalised as in Kipf and Welling's preprocessing.

  python gnn_cora.py RESOURCES_DIR OUT_DIR SEED     (the peer environment: numpy, pyarrow)
"""
import json
import os
import sys

import numpy as np
import pyarrow.parquet as pq

src, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
nodes = pq.read_table(os.path.join(src, "cora_nodes.parquet.gzip")).to_pydict()
rels = pq.read_table(os.path.join(src, "cora_rels.parquet.gzip")).to_pydict()
index = {paper: i for i, paper in enumerate(nodes["nodeId"])}
n = len(index)
x = np.array(nodes["features"], dtype=np.float32)
x /= np.maximum(x.sum(1, keepdims=True), 1)
y = np.array(nodes["subject"], dtype=np.int64)
pairs = {(index[s], index[t]) for s, t in zip(rels["sourceNodeId"], rels["targetNodeId"]) if s in index and t in index}
edges = np.ascontiguousarray(np.array(sorted(pairs), dtype=np.int64).T)
rng = np.random.default_rng(seed)
order = rng.permutation(n)
train = np.zeros(n, np.int64)
for c in range(int(y.max()) + 1):
    train[[i for i in order if y[i] == c][:20]] = 1
rest = [i for i in order if not train[i]]
val, test = np.zeros(n, np.int64), np.zeros(n, np.int64)
val[rest[:500]] = 1
test[rest[500:1500]] = 1
os.makedirs(out, exist_ok=True)
for name, array in [("features", x), ("labels", y), ("edges", edges), ("train_mask", train), ("val_mask", val),
                    ("test_mask", test)]:
    np.save(os.path.join(out, name + ".npy"), array)
json.dump({"name": "cora", "symmetric": False}, open(os.path.join(out, "graph.json"), "w"))
print(f"cora: {n} nodes, {x.shape[1]} features, {int(y.max()) + 1} classes, {len(pairs)} citation pairs; "
      f"split seed {seed}: {train.sum()} train, {val.sum()} val, {test.sum()} test", file=sys.stderr)
