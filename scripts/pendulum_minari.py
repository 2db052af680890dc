"""Two small Minari datasets of gymnasium's Pendulum-v1, built locally (no download): the offline stand-in for an
expert + supplementary pair such as mujoco/hopper/expert-v0 + simple-v0, for the tests and the demo in docs/minari.md.

    .venv/bin/python scripts/pendulum_minari.py --root /tmp/minari        # writes pendulum/expert-v0, pendulum/random-v0

  * `<namespace>/expert-v0`: a scripted swing-up controller (pump energy with full torque until the pendulum is
    near the top, then a PD controller holds it upright);
  * `<namespace>/random-v0`: uniform-random torques.
Episodes last --episode-len steps (the env's TimeLimit, recorded in the dataset's EnvSpec), episode i of a dataset
resets with seed (seed·1000 + i). The datasets go to --root (default $MINARI_DATASETS_PATH, else ~/.minari/datasets).
"""

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import tyro


@dataclass
class Args:
    root: Optional[str] = None
    """Minari datasets folder (not given: $MINARI_DATASETS_PATH, else ~/.minari/datasets)"""
    namespace: str = "pendulum"
    """the datasets are <namespace>/expert-v0 and <namespace>/random-v0"""
    expert_episodes: int = 10
    """episodes of the scripted controller"""
    random_episodes: int = 40
    """episodes of uniform-random torques"""
    episode_len: int = 200
    """steps per episode (Pendulum-v1's own limit is 200)"""
    seed: int = 0
    """seed of the start states and the random torques"""


def swing_up(obs: np.ndarray) -> np.ndarray:
    """Energy pumping far from the top, PD control near it (Pendulum-v1: θ = 0 upright, g = 10, |u| <= 2)."""
    cos, sin, vel = obs
    theta = np.arctan2(sin, cos)
    if cos > 0.9:
        return np.clip([-10.0 * theta - 2.0 * vel], -2.0, 2.0)
    energy = 0.5 * vel ** 2 + 10.0 * (cos - 1.0)  # 0 when upright at rest
    return np.array([2.0 * (np.sign(vel) or 1.0) if energy < 0 else -0.5 * vel]).clip(-2.0, 2.0)


def build(dataset_id: str, episodes: int, scripted: bool, episode_len: int, seed: int):
    import gymnasium as gym
    import minari
    from minari.data_collector import EpisodeBuffer

    env = gym.make("Pendulum-v1", max_episode_steps=episode_len)
    rng = np.random.default_rng(seed)
    buffers = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + i)
        o, a, r, term, trunc, done = [obs], [], [], [], [], False
        while not done:
            act = (swing_up(obs) if scripted else rng.uniform(-2.0, 2.0, size=1)).astype(np.float32)
            obs, rew, te, tr, _ = env.step(act)
            o.append(obs), a.append(act), r.append(rew), term.append(te), trunc.append(tr)
            done = te or tr
        buffers.append(EpisodeBuffer(id=i, observations=np.array(o), actions=np.array(a), rewards=np.array(r),
                                     terminations=np.array(term), truncations=np.array(trunc)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # minari warns about every metadata field left unset (eval_env, …)
        ds = minari.create_dataset_from_buffers(
            dataset_id, buffers, env=env, algorithm_name="swing-up controller" if scripted else "uniform random",
            author="oilca", author_email="-", code_permalink="scripts/pendulum_minari.py",
            description=f"Pendulum-v1, {episodes} episodes of {'a scripted swing-up controller' if scripted else 'uniform-random torques'}")
    returns = [b.rewards.sum() for b in buffers]
    print(f"{dataset_id}: {episodes} episodes, return {np.mean(returns):.1f} ± {np.std(returns):.1f}")
    return ds


def main(args: Args) -> list:
    if args.root:
        os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(args.root)
    return [build(f"{args.namespace}/expert-v0", args.expert_episodes, True, args.episode_len, args.seed),
            build(f"{args.namespace}/random-v0", args.random_episodes, False, args.episode_len, args.seed + 1)]


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except ValueError as e:  # e.g. a dataset of that id exists already
        sys.exit(f"error: {e}")
