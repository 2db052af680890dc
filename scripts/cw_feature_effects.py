"""Which of the features that c can intervene on (Table 7's C = 1 … 5) change what a CausalWorld policy sees?

For each feature, the task's shipped expert runs `--steps` steps twice from the same start and goal, once with the
feature at the low end of its space A range and once at the high end, every other variable at the task's default
(a fresh env per run: CausalWorld keeps an intervention until it is overwritten). A feature that changes neither the
return nor any structured observation leaves c without an effect on the data:

    .venv/bin/python scripts/cw_feature_effects.py --task pushing

prints one row per feature: the two values, the two returns, and the largest absolute difference between the two
observation sequences (0.0: the runs are the same to the bit).
"""

import os
import sys
from dataclasses import dataclass
from typing import Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402
from envs import cw as cw_env  # noqa: E402


@dataclass
class Args:
    task: str = "pushing"
    """CausalWorld task with a shipped expert (cw_env.SHIPPED_EXPERTS)"""
    steps: int = 300
    """environment steps per run"""
    goal_seed: int = 5
    """seed of the goal both runs share"""
    features: Tuple[str, ...] = cw_env.FEATURES
    """features to test"""


def run(task: str, values: dict, steps: int, goal_seed: int, policy) -> Tuple[float, np.ndarray]:
    env = cw_env.make_env(task, 0)
    try:
        obs = cw_env.start_episode(env, cw_env.to_intervention(values, cw_env.movable_blocks(env)), goal_seed,
                                   cw_env.goal_mode(task))
        traj, ret = [obs], 0.0
        for _ in range(steps):
            obs, r, _, _ = env.step(policy(obs[None])[0].astype(np.float64))
            traj.append(obs)
            ret += float(r)
        return ret, np.asarray(traj)
    finally:
        env.close()


def main(args: Args) -> list:
    if args.steps < 1:
        raise ValueError("--steps must be >= 1")
    try:
        features = cw_env.check_features(args.features)
    except ValueError as e:
        raise ValueError(f"--features: {e}") from None
    if args.task not in cw_env.SHIPPED_EXPERTS:  # load_shipped_expert's own message points at collect_data.py flags
        raise ValueError(f"--task: cw:{args.task} ships no expert; use one of {', '.join(cw_env.SHIPPED_EXPERTS)}")
    policy = cw_env.load_shipped_expert(args.task)
    probe = cw_env.make_env(args.task, 0)
    spaces = cw_env.feature_spaces(probe, args.task, features)
    probe.close()
    rows = []
    print(f"{'feature':<15} {'low':>22} {'high':>22} {'return low':>11} {'return high':>11} {'max |Δobs|':>11}")
    for f in features:
        lo, hi = spaces[f]["A"]
        (r_lo, t_lo), (r_hi, t_hi) = (run(args.task, {f: v}, args.steps, args.goal_seed, policy) for v in (lo, hi))
        row = {"feature": f, "low": lo, "high": hi, "return_low": r_lo, "return_high": r_hi,
               "max_abs_obs_diff": float(np.abs(t_lo - t_hi).max())}
        rows.append(row)
        print(f"{f:<15} {str(lo):>22} {str(hi):>22} {r_lo:>11.4f} {r_hi:>11.4f} {row['max_abs_obs_diff']:>11.4g}",
              flush=True)
    return rows


if __name__ == "__main__":
    try:
        main(cli.parse(Args))
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"cw_feature_effects.py: {e}", file=sys.stderr)
        sys.exit(2)
