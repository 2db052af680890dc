"""Benchmark (not a test): the fast path against the reference, every method, side by side in one run.

For each method, replica-updates/s of the reference trainer (train_<method>.py, one seed: R seeds take R such runs)
and of its fast trainer (fast/train_<method>.py) with R seeds side by side in one process:

    .venv/bin/python scripts/benchmark_replicas.py                                   CPU: R = 1 and 5 (a few minutes)
    .venv/bin/python scripts/benchmark_replicas.py --device cuda --replicas 1 5 50   a GPU, eager and CUDA graphs
    .venv/bin/python scripts/benchmark_replicas.py --methods bc dwbc --steps 20 40   a smoke run (tests use it)

Each row runs the trainer's own main() on one fresh toy dataset (collect_data.py defaults; OILCA's rows are DWBC's
on an augmented dataset and cost the same per step), with no evaluation inside the loop and no final evaluation.
The rate is measured from two runs of `--steps` S1 < S2 policy steps, R·(S2 − S1) / (t(S2) − t(S1)): start-up,
dataset loading, a method's fixed stages and saving cancel out. Methods with stages (ORIL's reward model, ILID's
discriminator and π_E, BCND's rounds) scale them with --total-steps, so the rate counts all their updates per policy
step. On a GPU the fast path runs eager and, separately, with --cuda-graph.
"""

import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Tuple

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import importlib  # noqa: E402

import collect_data  # noqa: E402
from oilca import cli  # noqa: E402

METHODS = ("bc", "dwbc", "oril", "bcnd", "lobsdice", "ilid", "iswbc")


@dataclass
class Args:
    device: str = "cpu"
    """cpu or cuda"""
    methods: Tuple[str, ...] = METHODS
    """methods to time (bc dwbc oril bcnd lobsdice ilid iswbc)"""
    replicas: Tuple[int, ...] = (1, 5)
    """seeds side by side in the fast path"""
    steps: Tuple[int, int] = (200, 600)
    """the two step counts S1 < S2 whose difference is timed"""
    threads: int = 1
    """torch CPU threads of every run"""
    hidden: int = 256
    """hidden width of the networks that take --hidden"""


def seconds(module, args: Args, data: str, out: str, steps: int, **kw) -> float:
    """Wall time of one run of `module.main` (a trainer, reference or fast) for `steps` policy steps."""
    run = module.Args(dataset=data, out_dir=out, total_steps=steps, eval_every=0, eval_episodes=0, threads=args.threads,
                      hidden=args.hidden, cuda=args.device == "cuda", **kw)
    start = time.perf_counter()
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        module.main(run)
    if args.device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def rate(module, args: Args, data: str, out: str, replicas: int, **kw) -> float:
    """Replica-updates per policy step and second, from the difference of two runs, after one untimed run (the first
    call of a trainer in a process pays one-time costs that would otherwise land in t(S1)); NaN ("n/a") when the
    difference is not positive (timing noise larger than S2 − S1 steps: raise --steps)."""
    s1, s2 = args.steps
    seconds(module, args, data, os.path.join(out, "warm"), s1, **kw)
    t1 = seconds(module, args, data, os.path.join(out, "a"), s1, **kw)
    t2 = seconds(module, args, data, os.path.join(out, "b"), s2, **kw)
    return replicas * (s2 - s1) / (t2 - t1) if t2 > t1 else float("nan")


def main(args: Args) -> dict:
    if not args.steps[0] < args.steps[1]:
        raise ValueError(f"--steps {args.steps[0]} {args.steps[1]}: the first must be below the second")
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        raise ValueError(f"--methods: unknown {unknown}; choose from {' '.join(METHODS)}")
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "toy.npz")
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            collect_data.main(collect_data.Args(out=data))
        for m in args.methods:
            ref, fast = importlib.import_module(f"train_{m}"), importlib.import_module(f"fast.train_{m}")
            base = rate(ref, args, data, os.path.join(tmp, f"{m}_ref"), 1)
            rows.append(dict(method=m, path="reference", replicas=1, rate=base, vs=1.0))
            modes = [("fast", {})] + ([("fast + graph", {"cuda_graph": True})] if args.device == "cuda" else [])
            for label, kw in modes:
                for r in args.replicas:
                    out = os.path.join(tmp, f"{m}_{label.replace(' ', '')}_{r}", "s{seed}")
                    x = rate(fast, args, data, out, r, seeds=tuple(range(r)), **kw)
                    rows.append(dict(method=m, path=label, replicas=r, rate=x, vs=x / base))
    device = torch.cuda.get_device_name() if args.device == "cuda" else \
        f"CPU, {os.cpu_count()} cores, {args.threads} thread(s)"
    print(f"\nreference vs fast path on {device} (torch {torch.__version__}); hidden {args.hidden}; "
          f"timed: steps {args.steps[0]} -> {args.steps[1]}")
    print(f"{'method':<9} {'path':<13} {'replicas':>8} {'replica-upd/s':>13} {'x reference':>11}")
    for row in rows:
        fmt = lambda x, spec: f"{x:{spec}}" if x == x else "n/a"  # noqa: E731 (NaN: not measurable)
        print(f"{row['method']:<9} {row['path']:<13} {row['replicas']:>8} {fmt(row['rate'], '>13.0f'):>13} "
              f"{fmt(row['vs'], '>11.2f'):>11}")
    print("replica-upd/s: replicas x policy steps per second (a method's other stages counted in its steps); "
          "x reference: against the reference trainer's one seed")
    return {"rows": rows}


if __name__ == "__main__":
    cli.run(main, Args)
