"""Benchmark (not a test): dataset collection throughput next to the raw env step rate, measured in the same run.

    .venv/bin/python scripts/benchmark_collect.py --env dmc:walker-stand --snapshot runs/dmc/sac_walker-stand/snapshots/step_200000.pt
    .venv/bin/python scripts/benchmark_collect.py --env dmc:manipulator-insert_ball --scripted --workers 1 2

raw:        one env, uniform-random actions, a bare `env.step` loop (resets included), one process; measured
            before and after the collection and averaged, so that a change of machine load hits both sides alike.
collection: collect_data.py's main() end to end (env construction, behaviour policy on batched observations,
            perturbations, recording, validation and the atomic .npz write), one torch thread per process; once per
            --workers value (--dmc.workers), in the order given, and the files compared byte for byte.
The ratio is collection / raw; the target for DeepMind Control is >= 50% (one process).
"""

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from oilca import cli  # noqa: E402
import collect_data  # noqa: E402
import envs  # noqa: E402
from envs import dmc as dmc_env  # noqa: E402


@dataclass
class Args:
    env: str = "dmc:cartpole-swingup"
    """dmc:<domain>-<task>"""
    snapshot: Optional[str] = None
    """behaviour policy artifact (train_behavior.py); default: uniform-random behaviour"""
    episodes: int = 50
    """episodes collected (1000 steps each; env construction, ~0.4 s per lockstep env, is amortised over them)"""
    lockstep: int = 25
    """episodes stepped together (--dmc.lockstep)"""
    raw_steps: int = 20_000
    """env steps of the raw-rate loop"""
    scripted: bool = False
    """behaviour: the scripted expert and its noisy copies plus random actions, as the manipulator-insert_ball row
    collects (--dmc.scripted-noise 0 0.25 0.5 1.0 --dmc.random-policy)"""
    workers: Tuple[int, ...] = (1,)
    """collect once per value with that many processes (--dmc.workers)"""


def raw_rate(name: str, steps: int) -> float:
    env = dmc_env.load_env(name, 0)
    spec = env.action_spec()
    rng = np.random.default_rng(0)
    env.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        if env.step(rng.uniform(spec.minimum, spec.maximum)).last():
            env.reset()
    return steps / (time.perf_counter() - t0)


def main(args: Args) -> dict:
    backend, name = envs.parse_env_id(args.env)
    if backend != "dmc":
        raise SystemExit("error: this benchmark covers dmc:<domain>-<task> envs")
    if args.scripted and args.snapshot:
        raise SystemExit("error: --scripted and --snapshot are two behaviour sources: give one")
    if not args.workers or min(args.workers) < 1:
        raise SystemExit("error: --workers must list process counts >= 1")
    raw_before = raw_rate(name, args.raw_steps)
    source = dict(snapshots=(args.snapshot,) if args.snapshot else (), random_policy=not args.snapshot)
    if args.scripted:
        source = dict(scripted_noise=(0.0, 0.25, 0.5, 1.0), random_policy=True)
    kind = "scripted sources + random" if args.scripted else "snapshot policy" if args.snapshot else "random policy"
    rates, files = [], []  # (workers, steps/s) in the order run: a count given twice is measured twice
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workers:
            cfg = dmc_env.DMCConfig(**source, episodes=args.episodes, lockstep=args.lockstep, workers=w)
            out = os.path.join(tmp, f"d_w{w}_{len(files)}.npz")
            res = collect_data.main(collect_data.Args(env=args.env, out=out, dmc=cfg))
            rates.append((w, res["n_transitions"] / res["seconds"]))
            with open(out, "rb") as f:
                files.append(f.read())
            print(f"[benchmark] {w} worker(s): {res['n_transitions']} steps in {res['seconds']:.1f} s", flush=True)
    raw = (raw_before + raw_rate(name, args.raw_steps)) / 2
    same = all(f == files[0] for f in files)
    print(f"\n{args.env}: raw env {raw:.0f} steps/s (one process) | lockstep {args.lockstep}, {kind}, "
          f"{args.episodes} episodes")
    first = rates[0][1]
    for w, rate in rates:
        print(f"  collection, {w} worker(s): {rate:.0f} steps/s = {100 * rate / raw:.0f}% of raw, "
              f"{rate / first:.2f}x the first")
    if len(files) > 1:
        print(f"  files byte for byte the same: {'yes' if same else 'NO'}")
    return {"raw_steps_per_s": raw, "collect_steps_per_s": first, "ratio": first / raw,
            "by_workers": rates, "same_bytes": same}


if __name__ == "__main__":
    main(cli.parse(Args))
