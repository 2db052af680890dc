"""Benchmark (not a test): training throughput of each stage on this machine, and the toy pipeline's wall time
per stage.

    .venv/bin/python scripts/benchmark.py                 throughputs + the stage times of the last main job run
    .venv/bin/python scripts/benchmark.py --pipeline      also runs the main job (scripts/toy_pipeline.sh) first

Throughputs are measured in-process with each script's own main() on a fresh toy dataset (default sizes),
one torch thread, no evaluation inside the timed loop: updates/s = steps / wall time.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import tyro

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import collect_data  # noqa: E402
import train_bc  # noqa: E402
import train_dwbc  # noqa: E402
import train_ivae  # noqa: E402


@dataclass
class Args:
    steps: int = 1_000
    """gradient steps timed per method"""
    pipeline: bool = False
    """run the main job (scripts/toy_pipeline.sh) before reporting its stage times"""
    results: str = "results/toy"
    """where the main job writes timing.json"""


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(args: Args) -> dict:
    out = {}
    if args.pipeline:
        subprocess.run(["bash", "scripts/toy_pipeline.sh"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "toy.npz")
        t = timed(lambda: collect_data.main(collect_data.Args(out=data)))
        out["collect_data (15k transitions)"] = f"{t:.1f} s"
        n = args.steps
        t = timed(lambda: train_bc.main(train_bc.Args(dataset=data, out_dir=os.path.join(tmp, "bc"), total_steps=n, eval_every=0, eval_episodes=1)))
        out["train_bc updates/s (batch 256, 2x256)"] = f"{n / t:.0f}"
        t = timed(lambda: train_dwbc.main(train_dwbc.Args(dataset=data, out_dir=os.path.join(tmp, "dwbc"), total_steps=n, eval_every=0, eval_episodes=1)))
        out["train_dwbc updates/s (batch 256+256, actor 2x256 + discriminator)"] = f"{n / t:.0f}"
        t = timed(lambda: train_ivae.main(train_ivae.Args(dataset=data, out_dir=os.path.join(tmp, "ivae"), total_steps=n, compare=False, threads=1, log_every=n)))
        out["train_ivae steps/s (4 restarts side by side, batch 256, 2x128)"] = f"{n / t:.0f}"
    timing_path = os.path.join(ROOT, args.results, "timing.json")
    print("\nthroughput (this machine, 1 torch thread):")
    for k, v in out.items():
        print(f"  {k:<70} {v}")
    if os.path.exists(timing_path):
        stages = json.load(open(timing_path))
        print(f"\ntoy pipeline wall time per stage (from {os.path.relpath(timing_path, ROOT)}):")
        for k, v in stages.items():
            print(f"  {k:<20} {v:>6} s")
        out["pipeline"] = stages
    else:
        print(f"\nno {timing_path}: run the main job (bash scripts/toy_pipeline.sh) or pass --pipeline")
    return out


if __name__ == "__main__":
    main(tyro.cli(Args))
