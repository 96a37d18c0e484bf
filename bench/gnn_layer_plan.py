"""A pinned layer-split plan for a zoo GNN (docs/gnn.md) on DEVICES devices:
min(DEVICES, layers) stages, one device each (the rest idle), the layers
conv1..convN (gcniiN) or conv0..conv{N-1} (jk_gcnN, gcn2) cut into equal
blocks; the features and the input layer go to the first stage, the labels,
mask, head and loss to the last.

  python3 gnn_layer_plan.py GRAPH_JSON MODEL DEVICES OUT_PLAN_JSON [MINI_BATCH]
(GRAPH_JSON: what `trident graph --model MODEL --out` writes; MINI_BATCH:
1, or model.graph_chunks in GNNPipe mode — one chunk per micro-batch.)
"""
import json
import re
import sys

graph, model, devices, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
mini_batch = int(sys.argv[5]) if len(sys.argv) > 5 else 1
ops = [o["name"] for o in json.load(open(graph))["ops"]]
layers = sorted({int(m.group(1)) for m in (re.match(r"conv(\d+)\.", o + ".") for o in ops) if m})
first, stages = layers[0], min(devices, len(layers))


def stage(name):
    m = re.match(r"conv(\d+)\.", name + ".")
    if m:
        return min(stages - 1, (int(m.group(1)) - first) * stages // len(layers))
    return 0 if name == "features" or name.startswith("input") else stages - 1


plan = [{"id": s, "ops": [o for o in ops if stage(o) == s], "devices": [s], "micro_batch": 1} for s in range(stages)]
json.dump({"format": "trident-plan/1", "model": model, "preset": "tiny", "devices": devices, "mini_batch": mini_batch,
           "partitioner": "hand-written", "schedule": "graph-1f1b", "stages": plan}, open(out, "w"), indent=1)
