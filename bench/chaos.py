#!/usr/bin/env python3
"""Chaos test of restarts (docs/reliability.md): trains the mlp on a graph
pipeline with a data-parallel stage (bench/plans/mlp-replicated-pipeline.plan.json:
stage 0 on ranks 0-1, stage 1 on rank 2) under `trident train --max-restarts`,
kills a random rank with SIGKILL at a random moment KILLS times, and checks
that the run completes with the weights of an uninterrupted run (trident
diff, atol 1e-6). Prints one row per kill: which rank, when, the newest step
logged, and whether a checkpoint was being written.
   chaos.py TRIDENT_BINARY SOURCE_DIR [--kills N] [--steps S] [--every E] [--seed K]
Exit 0 when every kill was survived and the weights are equal, 1 otherwise."""
import argparse, glob, json, os, random, re, shutil, signal, subprocess, sys, tempfile, threading, time


def args_of(src, runs, steps, every):
    return ["train", "--config", os.path.join(src, "examples/fmnist-mlp.yaml"),
            "--set", "parallel.devices=3",
            "--set", "parallel.partitioner=" + os.path.join(src, "bench/plans/mlp-replicated-pipeline.plan.json"),
            "--set", "train.mini_batch=64", "--set", f"train.steps={steps}", "--set", "train.epochs=null",
            "--set", "train.eval=false", "--set", "train.threads=1", "--set", "train.log_every=1",
            "--set", "data.train_size=4096", "--set", f"checkpoint.every={every}", "--set", "checkpoint.keep=2",
            "--set", "parallel.timeout_s=10", "--set", f"runs_dir={runs}"]


class Run:
    """A launched run whose output is read on threads: the pids of the
    current start's ranks, and how many starts have been seen."""
    pid_line = re.compile(r"^\[rank (\d+)\] rank \d+/\d+ on .* \(pid (\d+)\)")

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.pids, self.starts, self.log = {}, 1, []
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self.read, args=(stream,), daemon=True).start()

    def read(self, stream):
        for line in stream:
            with self.lock:
                self.log.append(line.rstrip("\n"))
                if "launch: restart" in line:
                    self.starts += 1
                    self.pids = {}
                m = self.pid_line.match(line)
                if m:
                    self.pids[int(m.group(1))] = int(m.group(2))

    def ranks_up(self, n):
        with self.lock:
            return dict(self.pids) if len(self.pids) == n else None


def newest_step(run_dir):
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            steps = [json.loads(l).get("step") for l in f if '"loss"' in l]
        return steps[-1] if steps else 0
    except OSError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary"), ap.add_argument("src")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp()
    try:
        ref = subprocess.run([a.binary] + args_of(a.src, work + "/ref", a.steps, a.every),
                             capture_output=True, text=True)
        if ref.returncode != 0:
            print("FAIL: the uninterrupted run failed:", ref.stderr[-2000:])
            return 1
        run_dir = work + "/chaos/fmnist-mlp"
        run = Run([a.binary] + args_of(a.src, work + "/chaos", a.steps, a.every) + ["--max-restarts", str(a.kills)])
        rows, t0 = [], time.monotonic()
        for k in range(1, a.kills + 1):
            while run.proc.poll() is None and not run.ranks_up(3):
                time.sleep(0.02)
            if run.proc.poll() is not None:
                break
            time.sleep(rng.uniform(0.3, 2.5))  # startup takes ~2-3 s: some kills land in it
            pids = run.ranks_up(3)
            if not pids or run.proc.poll() is not None:
                break
            rank = rng.randrange(3)
            writing = bool(glob.glob(run_dir + "/checkpoints/.step-*.partial"))
            step = newest_step(run_dir)
            starts = run.starts
            try:
                os.kill(pids[rank], signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed_at = time.monotonic()
            while run.proc.poll() is None and run.starts == starts:
                time.sleep(0.02)
            rows.append((k, rank, killed_at - t0, step, writing, time.monotonic() - killed_at))
        rc = run.proc.wait(timeout=600)
        time.sleep(0.2)
        print("| kill | rank | at s | newest step logged | checkpoint being written | restart began after s |")
        print("|---|---|---|---|---|---|")
        for k, rank, at, step, writing, took in rows:
            print(f"| {k} | {rank} | {at:.1f} | {step} | {'yes' if writing else 'no'} | {took:.1f} |")
        if rc != 0 or len(rows) < a.kills:
            print(f"FAIL: the run ended with exit {rc} after {len(rows)} of {a.kills} kills:")
            print("\n".join(run.log[-15:]))
            return 1
        diff = subprocess.run([a.binary, "diff", work + "/ref/fmnist-mlp", run_dir, "--rtol", "0", "--atol", "1e-6"],
                              capture_output=True, text=True)
        if diff.returncode != 0:
            print("FAIL: the weights differ from the uninterrupted run:", diff.stdout[-2000:], diff.stderr[-2000:])
            return 1
        print(f"{len(rows)} kills survived; {run.starts} starts; final weights equal the uninterrupted run's "
              f"(atol 1e-6, {a.steps} steps)")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
