"""Benchmark (not a test): training throughput of each stage on this machine, and the toy pipeline's wall time
per stage.

    .venv/bin/python scripts/benchmark.py                 throughputs + the stage times of the last main job run
    .venv/bin/python scripts/benchmark.py --pipeline      also runs the main job (scripts/toy_pipeline.sh) first

Throughputs are measured in-process with each script's own main() on a fresh toy dataset (default sizes),
one torch thread, no evaluation inside the timed loop: updates/s = steps / wall time. Each policy-learning method
also gets a wall-time row: it trains a `steps`/5,000 share of its default main-job budget (ORIL: reward model and
IQL; ILID: discriminator, reference BC and policy; BCND: the same share of its epochs, all K × M trainings) and scales
the time up to the whole budget.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from oilca import cli  # noqa: E402
import collect_data  # noqa: E402
import train_bc  # noqa: E402
import train_bcnd  # noqa: E402
import train_dwbc  # noqa: E402
import train_ilid  # noqa: E402
import train_iswbc  # noqa: E402
import train_ivae  # noqa: E402
import train_lobsdice  # noqa: E402
import train_oril  # noqa: E402

MAIN_JOB_STEPS = 5_000  # the main job's STEPS


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
        n, share = args.steps, args.steps / MAIN_JOB_STEPS
        quiet = dict(eval_every=0, eval_episodes=1, threads=1)
        runs = {  # method: (what is timed, its main() call, updates in the timed run)
            "bc": ("train_bc updates/s (batch 256, 2x256)", lambda o: train_bc.main(train_bc.Args(dataset=data, out_dir=o, total_steps=n, **quiet)), n),
            "dwbc": ("train_dwbc updates/s (batch 256+256, actor 2x256 + discriminator)",
                     lambda o: train_dwbc.main(train_dwbc.Args(dataset=data, out_dir=o, total_steps=n, **quiet)), n),
            "oril": ("train_oril IQL steps/s (+0.4x reward-model steps; batch 256, 2x256)",
                     lambda o: train_oril.main(train_oril.Args(dataset=data, out_dir=o, reward_steps=round(0.4 * n), total_steps=n, **quiet)), n),
            "lobsdice": ("train_lobsdice updates/s (batch 256, cost + nu with grad penalties + actor)",
                         lambda o: train_lobsdice.main(train_lobsdice.Args(dataset=data, out_dir=o, total_steps=n, **quiet)), n),
            "ilid": ("train_ilid policy steps/s (+0.4x discriminator, 0.4x pi_E steps; batch 256+256)",
                     lambda o: train_ilid.main(train_ilid.Args(dataset=data, out_dir=o, d_steps=round(0.4 * n),
                                                               bc_steps=round(0.4 * n), total_steps=n, **quiet)), n),
            "iswbc": ("train_iswbc updates/s (batch 256+256, discriminator with grad penalty + actor)",
                      lambda o: train_iswbc.main(train_iswbc.Args(dataset=data, out_dir=o, total_steps=n, **quiet)), n),
            "bcnd": ("train_bcnd steps/s (K=5 members side by side, batch 256 each)",
                     lambda o: train_bcnd.main(train_bcnd.Args(dataset=data, out_dir=o, epochs=max(1, round(100 * share)), eval_episodes=1, threads=1)),
                     5 * max(1, round(100 * share)) * 12),  # 5 rounds x epochs x ceil(3000 rows / 256)
        }
        names = {"bc": "bc_exp / bc_all", "dwbc": "dwbc / oilca", "oril": "oril / oril_ca", "lobsdice": "lobsdice",
                 "ilid": "ilid / ilid_ca", "iswbc": "iswbc / iswbc_ca",
                 "bcnd": "bcnd (bcnd_ca: x1.45 rows)"}
        walls = {}
        for name, (label, fn, updates) in runs.items():
            t = timed(lambda: fn(os.path.join(tmp, name)))
            out[label] = f"{updates / t:.0f}"
            scale = (max(1, round(100 * share)) / 100) if name == "bcnd" else share
            walls[names[name]] = t / scale
        t = timed(lambda: train_ivae.main(train_ivae.Args(dataset=data, out_dir=os.path.join(tmp, "ivae"), total_steps=n, compare=False, threads=1, log_every=n)))
        out["train_ivae steps/s (4 restarts side by side, batch 256, 2x128)"] = f"{n / t:.0f}"
        for name, wall in walls.items():
            out[f"training wall time of one main-job run: {name}"] = f"{wall:.0f} s"
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
    main(cli.parse(Args))
