#!/usr/bin/env python3
"""End-to-end checks of a user's own model (docs/own-model.md): export a
PyTorch module with tools/export, train it with trident on the user's .npy
arrays, and compare with PyTorch's own training on the same weights and batch:
- one SGD step: the loss and every gradient (allclose 1e-5);
- 20 SGD steps: the loss of every step (1e-4);
- plans on 3 processes (graphpipe under two cluster presets, and a pipeline)
  and 2-process data parallelism: the same weights as one process
  (allclose 1e-5).
nano_gpt (F.scaled_dot_product_attention, PyTorch 2.x's attention operators)
runs where the project's torch is 2.0 or newer.
The batch is the whole training set, so the data order cannot matter.

See Note [Stable trajectories] in tools/trident/test/lib.sh: a multi-process
run sums in another order than one process, so the runs differ by rounding;
the comparison means something only where the training trajectory does not
amplify rounding. At lr 0.5 it did (unet_like: a 1e-7 nudge to the initial
weights grew 1.2e6-fold in 20 steps, and a 3-process plan's weights differed
from one process by up to 5e-2); at LR below, every model stays under
MAX_AMPLIFICATION, which `stability` asserts before anything is compared,
and the 3-process weights end within 6e-8 of one process (SkylakeX and
Prescott kernels alike) against allclose 1e-5. The plans
are pinned by cluster presets (never this machine's calibration).

  python3 tools/export/test/own_model_test.py TRIDENT_BINARY [MODEL ...]
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import trident_export  # noqa: E402
from causal_lm import CausalLM  # noqa: E402
from multimodal import MultiModal  # noqa: E402
from regressor import Regressor  # noqa: E402
from residual_cnn import ResidualCNN  # noqa: E402
from sequence_bn import SequenceBN  # noqa: E402
from two_tower import TwoTower  # noqa: E402
from unet_like import UNetLike  # noqa: E402
from nano_gpt import NanoGPT  # noqa: E402

LR = 0.05
SAMPLES = 64
STEPS = 20
NUDGE = 1e-7            # the perturbation `stability` gives the initial weights
MAX_AMPLIFICATION = 1000  # measured at LR over STEPS: 4-302 (residual_cnn); at lr 0.5 up to 1.5e6
# Two presets under which graphpipe plans differently (contract "Tests are stable on any machine": a check of the plans, not of this machine's).
PRESETS = ("cpu-local", "summit-v100")

class Tokens(tuple):
    """A label per position: (classes, positions per sample); -100 where a position counts for nothing."""


# name -> (build the module, inputs {name: (per-sample shape, dtype)}, classes (cross_entropy), Tokens
#          (cross_entropy per position) or the target's per-sample shape (mse), id ranges of int64 inputs,
#          the micro-batch: BatchNorm normalises each micro-batch by its own statistics (see Note [Batch norm]),
#          so it equals PyTorch's full-batch step only with one micro-batch)
MODELS = {
    "residual_cnn": (ResidualCNN, {"image": ((1, 28, 28), torch.float32)}, 10, {}, 16),
    "two_tower": (TwoTower, {"history": ((6,), torch.int64), "dense": ((8,), torch.float32),
                             "tags": ((4,), torch.int64)}, 3, {"history": 500, "tags": 100}, 16),
    "multimodal": (MultiModal, {"tokens": ((10,), torch.int64), "table": ((12,), torch.float32),
                                "picture": ((3, 16, 16), torch.float32)}, 5, {"tokens": 200}, 16),
    "unet_like": (UNetLike, {"image": ((1, 28, 28), torch.float32)}, 10, {}, 16),
    "sequence_bn": (SequenceBN, {"tokens": ((12,), torch.int64)}, 4, {"tokens": 50}, SAMPLES),
    "regressor": (Regressor, {"x": ((10,), torch.float32)}, (3,), {}, 16),
    "causal_lm": (CausalLM, {"ids": ((12,), torch.int64)}, Tokens((40, 12)), {"ids": 40}, 16),
    "nano_gpt": (NanoGPT, {"ids": ((12,), torch.int64)}, Tokens((40, 12)), {"ids": 40}, 16),
}


def arrays(inputs, classes, ranges, rows, seed):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, dtype) in inputs.items():
        if dtype == torch.int64:
            out[name] = torch.randint(0, ranges[name], (rows,) + tuple(shape), generator=g)
        else:
            out[name] = torch.randn((rows,) + tuple(shape), generator=g)
    if isinstance(classes, Tokens):
        # Ignored positions crowd the first micro-batch's rows (Note [Token losses]: the global count divides).
        label = torch.randint(0, classes[0], (rows, classes[1]), generator=g)
        label[torch.rand(label.shape, generator=g) < 0.2] = -100
        label[: rows // 4, 3:] = -100
        out["label"] = label
    elif isinstance(classes, tuple):
        out["label"] = torch.randn((rows,) + classes, generator=g)
    else:
        out["label"] = torch.randint(0, classes, (rows,), generator=g)
    return out


def loss_of(classes):
    return "mse" if isinstance(classes, tuple) and not isinstance(classes, Tokens) else "cross_entropy"


def torch_loss(loss_name, out, label):
    """PyTorch's mean loss: mse_loss, or cross_entropy over every position (ignore_index -100)."""
    if loss_name == "mse":
        return torch.nn.functional.mse_loss(out, label)
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), label.reshape(-1))


def save_npy(d, data):
    os.makedirs(d, exist_ok=True)
    for name, t in data.items():
        np.save(os.path.join(d, name + ".npy"), t.numpy())


def trident(binary, *args):
    r = subprocess.run([binary] + list(args), capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("trident %s failed (exit %d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def train(binary, work, name, steps, extra=()):
    trident(binary, "train", "--config", os.path.join(work, "config.yaml"), "--set", "name=" + name, "--set",
            "train.steps=%d" % steps, *extra)
    run = os.path.join(work, "runs", name)
    weights = os.path.join(work, name + ".pt")
    trident(binary, "export", run, "--out", weights)
    losses = [json.loads(l)["loss"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l]
    return losses, torch.load(weights, weights_only=True)  # as PyTorch 2.6+ loads by default


def reference(module, data, steps, loss_name):
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    inputs = [data[k] for k in data if k != "label"]  # in forward's order
    losses, grads = [], None
    for _ in range(steps):
        opt.zero_grad()
        loss = torch_loss(loss_name, module(*inputs), data["label"])
        loss.backward()
        if grads is None:
            grads = {k: p.grad.clone() for k, p in module.named_parameters()}
        losses.append(loss.item())
        opt.step()
    return losses, grads, {k: p.detach().clone() for k, p in module.named_parameters()}


def stability(module, data, loss_name):
    """The largest growth over STEPS of a NUDGE to the initial weights (float64, two directions)."""
    def weights_after(m):
        m = m.double()
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        inputs = [data[k].double() if data[k].is_floating_point() else data[k] for k in data if k != "label"]
        label = data["label"].double() if data["label"].is_floating_point() else data["label"]
        for _ in range(STEPS):
            opt.zero_grad()
            torch_loss(loss_name, m(*inputs), label).backward()
            opt.step()
        return [p.detach() for p in m.parameters()]
    base = weights_after(copy.deepcopy(module))
    growth = 0.0
    for seed in range(2):
        nudged = copy.deepcopy(module).double()
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in nudged.parameters():
                p.add_(NUDGE * torch.randn(p.shape, generator=g, dtype=p.dtype))
        growth = max(growth, max((a - b).abs().max().item() for a, b in zip(weights_after(nudged), base)) / NUDGE)
    return growth


def write_config(work, rows, micro, lr, test):
    """work/config.yaml: the exported model in work/model, .npy data in work/train and work/TEST, plain SGD."""
    with open(os.path.join(work, "config.yaml"), "w") as f:
        f.write("model: {file: %s/model/model.json, weights: %s/model/init.pt}\n" % (work, work))
        f.write("data: {name: npy, train: %s/train, test: %s/%s}\n" % (work, work, test))
        f.write("train: {mini_batch: %d, log_every: 1, threads: 1, eval: false}\n" % rows)
        f.write("optimizer: {name: sgd, lr: %g, momentum: 0}\ncheckpoint: {every: 0}\nruns_dir: %s/runs\n" % (lr, work))
        f.write("parallel: {micro_batch: %d}\n" % micro)


def plan_layout(work, run):
    plan = json.load(open(os.path.join(work, "runs", run, "plan.json")))
    return [(sorted(s["ops"]), len(s["devices"])) for s in plan["stages"]]


def check(name, binary):
    build, inputs, classes, ranges, micro = MODELS[name]
    work = tempfile.mkdtemp(prefix="own-model-")
    torch.manual_seed(0)
    module = build()
    trident_export.export(module, inputs, "label", loss_of(classes), os.path.join(work, "model"), name)
    init = torch.load(os.path.join(work, "model", "init.pt"))
    init.pop("__format__")
    data = arrays(inputs, classes, ranges, SAMPLES, 1)
    save_npy(os.path.join(work, "train"), data)
    save_npy(os.path.join(work, "test"), arrays(inputs, classes, ranges, 16, 2))
    write_config(work, SAMPLES, micro, LR, "test")
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append("%s: %s" % (name, what))

    growth = stability(build_from(build, init), data, loss_of(classes))
    if growth > MAX_AMPLIFICATION:
        return ["%s: unstable at lr %g: a %g nudge to the weights grows %.3g-fold in %d steps (at most %d allowed), "
                "so rounding decides the comparison" % (name, LR, NUDGE, growth, STEPS, MAX_AMPLIFICATION)], False
    # One step: loss and every gradient.
    losses, after = train(binary, work, "one", 1)
    ref_losses, ref_grads, _ = reference(build_from(build, init), data, 1, loss_of(classes))
    expect(abs(losses[0] - ref_losses[0]) <= 1e-5, "step-1 loss %.7f, PyTorch %.7f" % (losses[0], ref_losses[0]))
    expect(set(after) == set(ref_grads), "parameters %s, PyTorch %s" % (sorted(after), sorted(ref_grads)))
    for k, g in ref_grads.items():
        ours = (init[k] - after[k]) / LR
        expect(torch.allclose(ours, g, rtol=1e-5, atol=1e-5),
               "gradient of %s differs by %.2e" % (k, (ours - g).abs().max().item()))
    # STEPS steps: every loss.
    losses, single = train(binary, work, "steps", STEPS)
    ref_losses, _, _ = reference(build_from(build, init), data, STEPS, loss_of(classes))
    expect(len(losses) == STEPS and np.allclose(losses, ref_losses, rtol=1e-4, atol=1e-4),
           "%d-step losses %s, PyTorch %s" % (STEPS, np.round(losses, 5), np.round(ref_losses, 5)))
    expect(all(b < a for a, b in zip(losses, losses[1:])),
           "the loss did not fall at every step: %s" % np.round(losses, 4))
    # Plans on 3 processes give the weights of one process at the same micro-batch (16): graphpipe plans
    # under two presets, and a pipeline (graphpipe may keep a small model on one process). With BatchNorm
    # the micro-batch is part of the model's meaning, so its one-process run is repeated at 16.
    if micro != 16:
        _, single = train(binary, work, "single16", STEPS, ("--set", "parallel.micro_batch=16"))
    plans = {"graphpipe-" + p: ("parallel.partitioner=graphpipe", "parallel.cluster=" + p) for p in PRESETS}
    plans["pipeline"] = ("parallel.partitioner=pipedream", "parallel.max_replicas=1", "parallel.cluster=" + PRESETS[0])
    if micro == 16:  # a replica's rows are one batch to BatchNorm: data parallelism changes what it normalises
        plans["data-parallel"] = ("parallel.partitioner=dp",)
    largest = 0.0
    for plan, sets in plans.items():
        n = "2" if plan == "data-parallel" else "3"
        args = ["--nproc", n, "--set", "parallel.devices=" + n, "--set", "parallel.micro_batch=16"]
        for s in sets:
            args += ["--set", s]
        _, weights = train(binary, work, plan, STEPS, args)
        if plan == "pipeline":
            stages = len(plan_layout(work, plan))
            expect(stages >= 2, "the pipeline check ran %d stage, not a pipeline" % stages)
        for k, w in single.items():
            largest = max(largest, (weights[k] - w).abs().max().item())
            expect(torch.allclose(weights[k], w, rtol=1e-5, atol=1e-5),
                   "%s on %s processes: %s differs by %.2e" % (plan, n, k, (weights[k] - w).abs().max().item()))
    layouts = [plan_layout(work, "graphpipe-" + p) for p in PRESETS]
    print("%s: nudge growth %.0f; 2- and 3-process weights within %.1e of one process; graphpipe plans %s" %
          (name, growth, largest, " | ".join(", ".join("%d ops x %d" % (len(o), d) for o, d in l) for l in layouts)))
    if not failures:
        shutil.rmtree(work)
    return failures, layouts[0] != layouts[1]


def check_token_file(binary):
    """nanoGPT from a token file (a .bin of uint16 ids, docs/data.md: sample i is ids [12 i, 12 i + 13)), full
    batches, on one process and a 2-stage pipeline: PyTorch's per-token losses on the same windows."""
    build, inputs, classes, ranges, micro = MODELS["nano_gpt"]
    positions = inputs["ids"][0][0]
    work = tempfile.mkdtemp(prefix="own-model-tokens-")
    torch.manual_seed(0)
    module = build()
    trident_export.export(module, inputs, "label", "cross_entropy", os.path.join(work, "model"), "nano_gpt")
    init = torch.load(os.path.join(work, "model", "init.pt"))
    init.pop("__format__")
    stream = torch.randint(0, ranges["ids"], (SAMPLES * positions + 1,), generator=torch.Generator().manual_seed(3))
    stream.numpy().astype(np.uint16).tofile(os.path.join(work, "tokens.bin"))
    windows = torch.stack([stream[i * positions:(i + 1) * positions + 1] for i in range(SAMPLES)])
    data = {"ids": windows[:, :-1].contiguous(), "label": windows[:, 1:].contiguous()}
    write_config(work, SAMPLES, micro, LR, "test")
    with open(os.path.join(work, "config.yaml")) as f:
        text = f.read().replace("name: npy, train: %s/train, test: %s/test" % (work, work),
                                "name: tokens, train: %s/tokens.bin, test: %s/tokens.bin" % (work, work))
    with open(os.path.join(work, "config.yaml"), "w") as f:
        f.write(text)
    ref_losses, _, _ = reference(build_from(build, init), data, STEPS, "cross_entropy")
    failures = []
    pipeline = ("--nproc", "2", "--set", "parallel.devices=2", "--set", "parallel.partitioner=pipedream", "--set",
                "parallel.max_replicas=1", "--set", "parallel.cluster=" + PRESETS[0], "--set", "parallel.micro_batch=16")
    for run, extra in (("one", ()), ("pipeline", pipeline)):
        losses, _ = train(binary, work, run, STEPS, extra)
        if not (len(losses) == STEPS and np.allclose(losses, ref_losses, rtol=1e-4, atol=1e-4)):
            failures.append("token file, %s: losses %s, PyTorch %s" % (run, np.round(losses, 5), np.round(ref_losses, 5)))
    if len(plan_layout(work, "pipeline")) < 2:
        failures.append("token file: the pipeline check ran one stage")
    if not failures:
        shutil.rmtree(work)
    return failures


BAD_MODELS = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 5)
        self.out = nn.Linear(5, 3)

    def forward(self, x):
        return self.out(self.fc(x))


class Unsupported(Tiny):
    def forward(self, x):
        return self.out(self.fc(torch.cumsum(x, dim=1)))


class NoTrace(Tiny):
    def forward(self, x):
        if x.sum() > 0:
            return self.out(self.fc(x))
        return self.out(self.fc(-x))
"""


def run_export(work, name, *inputs, capture="aten"):
    cmd = [sys.executable, os.path.join(os.path.dirname(HERE), "trident_export.py"),
           os.path.join(work, "bad_models.py") + ":" + name, "--out", os.path.join(work, name), "--capture", capture]
    for i in inputs:
        cmd += ["--input", i]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def check_errors(binary):
    """Each bad input: exit 2 and one line that names what is wrong."""
    work = tempfile.mkdtemp(prefix="own-model-errors-")
    failures = []
    with open(os.path.join(work, "bad_models.py"), "w") as f:
        f.write(BAD_MODELS)

    def expect_error(what, r, *needles):
        line = r.stderr.strip()
        if r.returncode != 2 or len(line.splitlines()) != 1 or not all(n in line for n in needles):
            failures.append("errors: %s: exit %d, %r (wanted exit 2, one line with %s)" % (what, r.returncode, line,
                                                                                            needles))

    # torch.fx capture (--capture fx): an op outside trident's kinds stops it; the ATen capture takes it.
    expect_error("unsupported op", run_export(work, "Unsupported", "x:4:float32", capture="fx"), "'cumsum'",
                 "torch.cumsum", "bad_models.py\", line 18", "torch.cumsum(x, dim=1)")
    if run_export(work, "Unsupported", "x:4:float32").returncode != 0:
        failures.append("errors: the ATen capture refused torch.cumsum")
    for capture in ("aten", "fx"):
        expect_error("no input specs", run_export(work, "Tiny", capture=capture), "no inputs")
        expect_error("wrong input specs", run_export(work, "Tiny", "y:4:float32", capture=capture),
                     "forward takes (x)", "gave (y)") if capture == "fx" else \
            expect_error("too many input specs", run_export(work, "Tiny", "x:4:float32", "y:4:float32",
                                                            capture=capture), "forward takes (x)", "gave (x, y)")
        expect_error("does not trace", run_export(work, "NoTrace", "x:4:float32", capture=capture),
                     "does not trace", "control flow")
    r = run_export(work, "Tiny", "x:4:float32", capture="fx")
    if r.returncode != 0:
        return failures + ["errors: exporting Tiny failed: " + r.stderr.strip()]
    model = os.path.join(work, "Tiny")
    rows = {"x": torch.randn(8, 4), "label": torch.randint(0, 3, (8,))}
    save_npy(os.path.join(work, "data"), rows)
    with open(os.path.join(work, "config.yaml"), "w") as f:
        f.write("model: {file: %s/model.json, weights: %s/weights.pt}\n" % (model, model))
        f.write("data: {name: npy, train: %s/data, test: %s/data}\n" % (work, work))
        f.write("train: {mini_batch: 8, steps: 1, threads: 1, eval: false}\nruns_dir: %s/runs\n" % work)

    def train_with(weights):
        torch.save(weights, os.path.join(model, "weights.pt"))
        return subprocess.run([binary, "train", "--config", os.path.join(work, "config.yaml")], capture_output=True,
                              text=True, timeout=120)
    init = torch.load(os.path.join(model, "init.pt"))
    expect_error("weights without a parameter", train_with({k: v for k, v in init.items() if k != "fc.bias"}),
                 "parameter 'fc.bias' is missing")
    expect_error("weights of another shape", train_with(dict(init, **{"fc.weight": torch.zeros(5, 7)})),
                 "parameter 'fc.weight'", "[5, 7]", "[5, 4]")
    expect_error("weights of another model", train_with(dict(init, **{"head.weight": torch.zeros(1)})),
                 "'head.weight' is no parameter")
    graph = json.load(open(os.path.join(model, "model.json")))
    graph["ops"][1]["params"][0]["shape"] = [5, 7]
    with open(os.path.join(model, "model.json"), "w") as f:
        json.dump(graph, f)
    expect_error("a model file whose op disagrees with its parameters", train_with(init), "parameter 'fc.weight'",
                 "[5,7]")
    with open(os.path.join(model, "model.json"), "w") as f:
        f.write("{not json")
    expect_error("a malformed model file", train_with(init), "model.file", "model.json")
    if not failures:
        shutil.rmtree(work)
    return failures


def build_from(build, init):
    module = build()
    missing, unexpected = module.load_state_dict(init, strict=False)
    buffers = {k for k, _ in module.named_buffers()}
    # A tied parameter's second name (nano_gpt's lm_head.weight is wte.weight) is in the state dict, not in init.
    aliases = set(module.state_dict()) - {k for k, _ in module.named_parameters()} - buffers
    assert not unexpected and set(missing) <= buffers | aliases, (missing, unexpected)  # BatchNorm's running statistics
    return module


def main():
    torch.set_num_threads(1)
    binary = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    failures = check_errors(binary)
    print("errors: %s" % ("ok" if not failures else "FAILED"))
    if "nano_gpt" in names:
        mine = check_token_file(binary)
        print("nano_gpt from a token file: %s" % ("ok" if not mine else "FAILED"))
        failures += mine
    differ = []
    for name in names:
        mine, plans_differ = check(name, binary)
        print("%s: %s" % (name, "ok" if not mine else "FAILED"))
        failures += mine
        differ += [name] if plans_differ else []
    if len(names) > 1 and not differ:
        failures.append("graphpipe planned alike under %s for every model: the check no longer covers two plans" %
                        " and ".join(PRESETS))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
