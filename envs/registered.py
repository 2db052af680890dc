"""The project's envs as gymnasium envs, so a Minari export of toy or DeepMind Control data recovers its env.

    oilca/Toy-v0   the toy causal MDP: kwargs env_config (ToyEnvConfig's fields), n_classes, classes
    oilca/DMC-v0   a DeepMind Control task under the dataset's action perturbations: kwargs task, class_table, classes

`classes` are the classes of c an episode may run under: reset() draws one uniformly with the env's np_random, or
takes `options={"c": k}`; info carries "c" (and the toy's true exogenous "u"). minari_export.py records
`env_spec` (the training classes of c) and `eval_env_spec` (the held-out classes where the env has them, the toy's)
from a dataset's metadata, so `MinariDataset.recover_environment()` (and `eval_env=True`) rebuilds them with
`gymnasium.make`; the entry points are `envs.registered:ToyEnv` / `DMCEnv`, so the repo must be importable (run from
its root, or put it on PYTHONPATH). CausalWorld data has no gymnasium env here. Needs gymnasium
(requirements-minari.txt); the DeepMind Control one needs dm_control.
"""

from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

TOY_ID, DMC_ID = "oilca/Toy-v0", "oilca/DMC-v0"


class _Classes(gym.Env):
    """The class-of-c choice every env here shares."""

    metadata = {"render_modes": []}

    def _choose(self, options: Optional[dict]) -> int:
        c = (options or {}).get("c")
        if c is None:
            return int(self.classes[self.np_random.integers(len(self.classes))])
        if int(c) not in self.all_classes:
            raise ValueError(f"c={c} is not one of the env's classes {list(self.all_classes)}")
        return int(c)


class ToyEnv(_Classes):
    """The toy causal MDP (envs/toy.py): s ∈ (−B, B)², a ∈ [−1, 1]², u ~ N(μ(c), diag σ²(c)) every step, reward −‖s′ −
    target‖, truncated after episode_len steps (never terminated)."""

    def __init__(self, env_config: Optional[dict] = None, n_classes: int = 4, classes: Optional[Sequence[int]] = None):
        from envs.toy import ToyCausalNav, ToyEnvConfig

        self.core = ToyCausalNav(n_classes, ToyEnvConfig(**(env_config or {})))
        self.all_classes = range(n_classes)
        self.classes = list(self.all_classes if classes is None else classes)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.core.obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(self.core.action_low, self.core.action_high, (self.core.act_dim,), np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        c = self._choose(options)
        self.core.reset(c)
        self.core._rng = self.np_random  # every draw (start state, u) from gymnasium's seeding
        self.core._state = self.core.sample_start(1, self.np_random)[0]
        return self.core._state.astype(np.float32), {"c": c}

    def step(self, action):
        s, r, terminated, truncated, info = self.core.step(np.asarray(action, np.float64))
        return s.astype(np.float32), r, terminated, truncated, info


class DMCEnv(_Classes):
    """A dm_control task (envs/dmc.py) with the flat observation the datasets store; under class c every action gets
    the perturbation N(mean[c], std[c]) of the dataset's class table before it is clipped, as in collection."""

    def __init__(self, task: str, class_table: dict, classes: Optional[Sequence[int]] = None):
        from envs import dmc

        self.task, self.table = task, class_table
        self.all_classes = range(len(class_table["mean"]))
        self.classes = list(self.all_classes if classes is None else classes)
        self.env = dmc.DMCEnv(task, 0, class_table, None)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.env.obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(self.env.action_low, self.env.action_high, (self.env.act_dim,), np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        from envs import dmc

        super().reset(seed=seed)
        c = self._choose(options)
        self.env = dmc.DMCEnv(self.task, int(self.np_random.integers(2**31)), self.table, c)
        self.env.rng = self.np_random
        return self.env.reset(), {"c": c}

    def step(self, action):
        obs, r, terminated, truncated = self.env.step(action)
        return obs, r, terminated, truncated, {"c": self.env.c}


def env_specs(meta: dict):
    """(env_spec, eval_env_spec) as gymnasium EnvSpecs for a dataset's metadata: the training classes of c, and the
    held-out ones where the env has them (else the training ones again); (None, None) for an env without one here."""
    from envs import default_splits, split_classes, env_spec

    spec = env_spec(meta)
    kind = meta["env_id"].partition(":")[0]
    if meta["env_id"] == "toy":
        entry, kwargs, steps = "envs.registered:ToyEnv", {"env_config": meta["env_config"],
                                                           "n_classes": meta["env_n_classes"]}, meta["episode_len"]
        env_id = TOY_ID
    elif kind == "dmc":
        from envs import dmc

        entry, kwargs, steps = "envs.registered:DMCEnv", {"task": meta["env_id"].partition(":")[2],
                                                           "class_table": meta["class_table"]}, dmc.EPISODE_LEN
        env_id = DMC_ID
    else:
        return None, None
    splits = default_splits(spec)
    out = []
    for split in (splits[0], splits[-1]):
        out.append(gym.envs.registration.EnvSpec(env_id, entry_point=entry, max_episode_steps=steps,
                                                 kwargs={**kwargs, "classes": list(map(int, split_classes(spec, split)))}))
    return tuple(out)


for _id, _entry in ((TOY_ID, "envs.registered:ToyEnv"), (DMC_ID, "envs.registered:DMCEnv")):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry)
