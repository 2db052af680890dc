"""Benchmark (not a test): dataset collection throughput next to the raw env step rate, measured in the same run.

    .venv/bin/python scripts/benchmark_collect.py --env dmc:walker-stand --snapshot runs/dmc/sac_walker-stand/snapshots/step_200000.pt

raw:        one env, uniform-random actions, a bare `env.step` loop (resets included), one process; measured
            before and after the collection and averaged, so that a change of machine load hits both sides alike.
collection: collect_data.py's main() end to end (env construction, behaviour policy on batched observations,
            perturbations, recording, validation and the atomic .npz write), one process, one torch thread.
The ratio is collection / raw; the target for DeepMind Control is >= 50%.
"""

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

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
    raw_before = raw_rate(name, args.raw_steps)
    cfg = dmc_env.DMCConfig(snapshots=(args.snapshot,) if args.snapshot else (), random_policy=not args.snapshot,
                            episodes=args.episodes, lockstep=args.lockstep)
    with tempfile.TemporaryDirectory() as tmp:
        res = collect_data.main(collect_data.Args(env=args.env, out=os.path.join(tmp, "d.npz"), dmc=cfg))
    raw = (raw_before + raw_rate(name, args.raw_steps)) / 2
    rate = res["n_transitions"] / res["seconds"]
    print(f"\n{args.env}: raw env {raw:.0f} steps/s | collection {rate:.0f} steps/s "
          f"({res['n_transitions']} steps in {res['seconds']:.1f} s, lockstep {args.lockstep}, "
          f"{'snapshot policy' if args.snapshot else 'random policy'}) = {100 * rate / raw:.0f}% of raw")
    return {"raw_steps_per_s": raw, "collect_steps_per_s": rate, "ratio": rate / raw}


if __name__ == "__main__":
    main(cli.parse(Args))
