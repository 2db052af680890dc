"""Benchmark (not a test): seeds side by side. Replica-updates/s of train_bc.py and train_dwbc.py with one seed (the
plain single-seed loop; R seeds then take R such runs) and with `--seeds` (R replicas in one batched loop), and the
GFLOP/s each achieves against a large-matmul peak measured in the same run.

    .venv/bin/python scripts/benchmark_replicas.py                  CPU: 1 and 2 threads, 1 replica and 5 (under ~2 min on 2 cores)
    .venv/bin/python scripts/benchmark_replicas.py --device cuda    the same on a GPU, 1, 5, 50 and 200 replicas

Each row runs the stage's own main() on a fresh toy dataset (collect_data.py defaults) with no evaluation inside the
loop, and times the loop alone: from the end of step `warmup` to the end of step `steps - 1` (read through the
stage's Progress, whose update() runs at every step; on a GPU the clock reads follow a torch.cuda.synchronize()), so
start-up, the evaluation at the last step and the saving are left out.

Configurations: BC, actor 2×256, batch 256 (the toy's); DWBC, actor 2×256 + discriminator, batches 256 + 256 (512
rows through both networks per update). FLOPs per update are counted analytically from the layer sizes: 2·rows·Σ
in·out of the forward matmuls, times 3 for forward + backward (the backward's two matmuls per layer; it skips a few
input gradients, so this slightly over-counts). The peak is a square fp32 matmul (2048 on the CPU, 8192 on a GPU) at
the same thread count.
"""

import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from oilca import cli  # noqa: E402
import collect_data  # noqa: E402
from oilca import contract  # noqa: E402
import envs
from oilca import progress  # noqa: E402
import train_bc  # noqa: E402
import train_dwbc  # noqa: E402


@dataclass
class Args:
    device: str = "cpu"
    """cpu or cuda"""
    steps: int = 500
    """steps per timed run (the clock runs from step `warmup` to step steps - 1)"""
    warmup: int = 30
    """steps before the clock starts"""
    threads: Tuple[int, ...] = (1, 2)
    """torch CPU threads (on a GPU: the first only)"""
    replicas: Optional[Tuple[int, ...]] = None
    """replica counts of the batched loop (default: 5 on the CPU, 5 50 200 on a GPU); 1 is the single-seed loop"""
    hidden: int = 256
    """hidden width of the actor (the discriminator's sizes are fixed by train_dwbc.py)"""
    batch_size: int = 256
    """rows per minibatch (DWBC: from D_E and from D_U each)"""


class Clock:
    """Times a stage's loop through its Progress: the stage calls update(step) at every step."""
    start: Optional[int] = None
    stop: Optional[int] = None
    times: dict = {}
    sync = False

    @classmethod
    def progress(cls, *a, **kw):
        prog = progress.Progress(*a, **kw)
        update = prog.update

        def timed_update(step, scalars=None, force=False):
            if step in (cls.start, cls.stop) and step not in cls.times:
                if cls.sync:
                    torch.cuda.synchronize()
                cls.times[step] = time.perf_counter()
            return update(step, scalars, force)

        prog.update = timed_update
        return prog


def loop_rate(stage, args: Args, data: str, out: str, replicas: int, threads: int) -> float:
    """Replica-updates per second of the stage's training loop with `replicas` seeds side by side."""
    Clock.start, Clock.stop, Clock.times, Clock.sync = args.warmup, args.steps - 1, {}, args.device == "cuda"
    seeds = tuple(range(replicas)) if replicas > 1 else None
    stage.Progress = Clock.progress
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # the stage's own lines
                stage.main(stage.Args(dataset=data, out_dir=os.path.join(out, "s{seed}"), seeds=seeds, total_steps=args.steps,
                                  eval_every=0, eval_episodes=1, hidden=args.hidden, batch_size=args.batch_size,
                                  threads=threads, cuda=args.device == "cuda"))
    finally:
        stage.Progress = progress.Progress
    return replicas * (Clock.stop - Clock.start) / (Clock.times[Clock.stop] - Clock.times[Clock.start])


def linear_macs(sizes) -> int:
    return sum(i * o for i, o in sizes)


def flops_per_update(method: str, obs_dim: int, act_dim: int, hidden: int, batch: int) -> float:
    """fwd + bwd ≈ 3 × the forward matmul FLOPs (2 per multiply-add) of one replica's update."""
    actor = [(obs_dim, hidden), (hidden, hidden), (hidden, act_dim), (hidden, act_dim)]  # trunk, μ, log σ
    if method == "bc":
        return 3 * 2 * batch * linear_macs(actor)
    disc = [(obs_dim + act_dim, 128), (act_dim, 128), (256, 256), (256, 1)]  # train_dwbc.Discriminator
    return 3 * 2 * (2 * batch) * (linear_macs(actor) + linear_macs(disc))


def peak_gflops(device: str, n: int) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    reps, best = 3 if device == "cpu" else 20, 0.0
    for _ in range(3):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        best = max(best, reps * 2 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    return best


def main(args: Args) -> dict:
    gpu = args.device == "cuda"
    replicas = args.replicas or ((5, 50, 200) if gpu else (5,))
    threads_list = args.threads[:1] if gpu else args.threads
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "toy.npz")
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            collect_data.main(collect_data.Args(out=data))
        meta = envs.load_dataset(data)["metadata"]
        for threads in threads_list:
            torch.set_num_threads(threads)
            peak = peak_gflops(args.device, 8192 if gpu else 2048)
            for name, stage in (("bc", train_bc), ("dwbc", train_dwbc)):
                flops = flops_per_update(name, meta["obs_dim"], meta["act_dim"], args.hidden, args.batch_size)
                for r in (1, *replicas):
                    rate = loop_rate(stage, args, data, os.path.join(tmp, f"{name}_{threads}_{r}"), r, threads)
                    rows.append(dict(method=name, threads=threads, loop="single-seed" if r == 1 else "batched",
                                     replicas=r, rate=rate, gflops=rate * flops / 1e9, peak=peak, mflop=flops / 1e6))
    device = torch.cuda.get_device_name() if gpu else f"CPU, {len(os.sched_getaffinity(0))} cores available"
    print(f"\nseeds side by side on {device} (torch {torch.__version__}); hidden {args.hidden}, batch {args.batch_size} "
          f"(DWBC: {args.batch_size} + {args.batch_size}); {args.steps - 1 - args.warmup} timed steps per row")
    print(f"{'method':<6} {'MFLOP/upd':>9} {'threads':>7} {'loop':<11} {'replicas':>8} {'replica-upd/s':>13} "
          f"{'x single':>8} {'x par.':>6} {'GFLOP/s':>8} {'peak GFLOP/s':>12} {'% peak':>6}")

    def rate(method, threads, replicas=1):
        return next((r["rate"] for r in rows if (r["method"], r["threads"], r["replicas"]) == (method, threads, replicas)), None)

    for row in rows:
        one = rate(row["method"], threads_list[0])
        parallel = f"{row['rate'] / (row['threads'] * one):>6.2f}" if threads_list[0] == 1 and not gpu else f"{'':>6}"
        print(f"{row['method']:<6} {row['mflop']:>9.0f} {row['threads']:>7} {row['loop']:<11} {row['replicas']:>8} "
              f"{row['rate']:>13.0f} {row['rate'] / rate(row['method'], row['threads']):>8.2f} {parallel} "
              f"{row['gflops']:>8.1f} {row['peak']:>12.0f} {100 * row['gflops'] / row['peak']:>6.1f}")
    print("replica-upd/s: replicas × steps/s (the single-seed loop trains R seeds as R runs at its rate). x single: against "
          "the single-seed loop at the same threads. x par.: against `threads` single-seed 1-thread runs in parallel "
          "processes (threads × the 1-thread rate, an upper bound for them)")
    return {"rows": rows}


if __name__ == "__main__":
    main(cli.parse(Args))
