"""The timed loop the torch.distributed.pipelining peers share: WARMUP steps,
a barrier, `before` (if given, e.g. a profile), STEPS steps between barriers.
Returns the seconds of the timed steps."""
import time

import torch.distributed as dist


def timed_steps(step, warmup, steps, before=None):
    for _ in range(warmup):
        step()
    dist.barrier()
    if before is not None:
        before()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    return time.perf_counter() - t0
