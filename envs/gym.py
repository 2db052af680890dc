"""Gymnasium backend: env ids `gym:<EnvId>` (e.g. `gym:Hopper-v5`, `gym:Pendulum-v1`), the envs of Minari datasets.

Data for these envs comes from Minari (minari_import.py), not from collect_data.py: the dataset's metadata records
the gymnasium EnvSpec the Minari dataset was collected in (`gym_env_spec`, EnvSpec.to_json(): id, kwargs,
max_episode_steps), and its `eval_env_spec` where the dataset has another one (`gym_eval_env_spec`), so a policy
trained on it is rolled out in the dataset's evaluation env (else its collection env), rebuilt with `gymnasium.make`. The
label c of such data (the source dataset of an episode, or a KMeans cluster of s′) is not a setting of the env:
evaluation runs the plain env and reports no per-episode class.

Observations must be a flat Box and actions a bounded Box (`action_low`/`action_high` in the metadata). Episode i of
an evaluation with seed s resets with seed (s·1_000_003 + i) mod 2³¹; `lockstep` episodes step together so that the
policy runs on one batch of observations per step.

Backend of envs.py (`check_spec`, `collect`, `rollout`, `reference_policy`, the interface shared with toy_env.py, dmc_env.py and
cw_env.py). Needs requirements-minari.txt (`WITH_MINARI=1 bash scripts/setup.sh`).
"""

import os
from typing import Callable, Sequence

# Nothing here renders: MuJoCo tasks import mujoco, which then loads no GL library (as in dmc_env.py). Set
# MUJOCO_GL=egl, osmesa or glfw before this import to render.
os.environ.setdefault("MUJOCO_GL", "disable")

import numpy as np

LOCKSTEP = 16
MAX_STEPS = 10_000  # episode cap when neither the dataset nor the env spec gives a time limit


def make_env(spec: dict):
    """The gymnasium env a dataset's metadata (or a policy's env record) describes."""
    try:
        import gymnasium as gym
        from gymnasium.envs.registration import EnvSpec
    except ImportError as e:
        raise ValueError(f"{spec['env_id']} needs gymnasium: WITH_MINARI=1 bash scripts/setup.sh ({e})")
    name = spec["env_id"].partition(":")[2]
    recorded = spec.get("gym_eval_env_spec") or spec.get("gym_env_spec")  # the dataset's eval env where it has one
    try:
        return gym.make(EnvSpec.from_json(recorded)) if recorded else gym.make(name)
    except Exception as e:  # unregistered id, missing extra (mujoco, box2d), bad kwargs: one line
        raise ValueError(f"cannot make gymnasium env '{name}': {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def check_spec(spec: dict) -> None:
    """The recorded env must be describable without gymnasium (training needs no env; rollouts call make_env): a
    non-empty env name, the recorded EnvSpec as JSON text (or none), and action bounds of act_dim numbers each."""
    import json

    if not spec["env_id"].partition(":")[2]:
        raise ValueError("gym env id needs a name: gym:<EnvId>")
    for key in ("gym_env_spec", "gym_eval_env_spec"):
        raw = spec.get(key)
        if raw is not None:
            try:
                if not isinstance(json.loads(raw), dict):
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"{key} must be the JSON text of a gymnasium EnvSpec (EnvSpec.to_json())")
    n = spec.get("act_dim")
    for key in ("action_low", "action_high"):
        if not isinstance(spec.get(key), list) or len(spec[key]) != n:
            raise ValueError(f"{key} must be a list of act_dim={n} numbers for a gym env")


def collect(cfg, name: str, seed: int) -> dict:
    raise ValueError(f"gym:{name} data comes from Minari datasets: use minari_import.py (collect_data.py does not collect it)")


def rollout(spec: dict, policy: Callable, split: str, classes: Sequence[int], episodes: int, seed: int) -> dict:
    """Evaluation: `episodes` episodes of the deterministic `policy` (batched) in the recorded env; each episode runs
    until the env terminates or truncates it (its TimeLimit). The split and classes only label the result."""
    low, high = np.asarray(spec["action_low"]), np.asarray(spec["action_high"])
    max_steps = int(spec.get("episode_len") or MAX_STEPS)
    returns = np.zeros(episodes)
    for start in range(0, episodes, LOCKSTEP):
        idx = list(range(start, min(start + LOCKSTEP, episodes)))
        envs = [make_env(spec) for _ in idx]
        obs = [env.reset(seed=int((seed * 1_000_003 + i) % 2**31))[0] for env, i in zip(envs, idx)]
        live, t = list(range(len(idx))), 0
        while live and t < max_steps:  # the env's TimeLimit ends episodes; the cap only guards an env without one
            t += 1
            acts = np.clip(policy(np.stack([np.asarray(obs[j], np.float32).ravel() for j in live])), low, high)
            still = []
            for j, a in zip(live, acts):
                obs[j], r, terminated, truncated, _ = envs[j].step(a.astype(envs[j].action_space.dtype))
                returns[idx[j]] += float(r)
                if not (terminated or truncated):
                    still.append(j)
            live = still
        for env in envs:
            env.close()
    return {"returns": returns, "episode_classes": None}


def expert_episodes(spec: dict, classes, seed: int) -> dict:
    """A gymnasium env of imported data has no expert to collect with."""
    raise ValueError(f"{spec['env_id']} has no expert policy to collect true expert episodes with")


def reference_policy(spec: dict, kind: str, seed: int) -> Callable:
    """'random': uniform actions within the bounds; a gymnasium env has no expert of its own."""
    if kind == "expert":
        raise ValueError(f"{spec['env_id']} has no expert reference policy (score the dataset's expert episodes instead)")
    low, high = np.asarray(spec["action_low"]), np.asarray(spec["action_high"])
    rng = np.random.default_rng(seed + 1)
    return lambda obs: rng.uniform(low, high, size=(len(obs), len(low)))
