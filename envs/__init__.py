"""Environments: one interface over the three backends, so a stage never needs to know which one it runs on.

An env id names a backend and a task: `toy` (envs/toy.py, OILCA §5.1), `dmc:<domain>-<task>` (envs/dmc.py, DeepMind
Control, §5.2), `cw:<task>` (envs/cw.py, CausalWorld, §5.3) or `gym:<EnvId>` (envs/gym.py, the gymnasium env of a
dataset imported from Minari by minari_import.py). Every backend module provides the same five functions:

    collect(cfg, name, seed)                         -> {"arrays", "returns", "classes", "policy_ids", "behaviors",
                                                         "spec", "rng"}   (collect_data.py adds the D_E split)
    check_spec(spec)                                 -> None, or a one-line ValueError (an env it cannot build)
    rollout(spec, policy, split, classes, episodes, seed) -> {"returns" [E], "episode_classes" [E] or None,
                                                         "success" [E] (CausalWorld only)}
    reference_policy(spec, kind, seed)               -> obs [N, obs_dim] -> action [N, act_dim]  ("expert" or "random")
    expert_episodes(spec, classes, seed)             -> rows [E·T] of whole expert episodes, episode i under classes[i]
                                                        (observations, actions, next_observations, rewards, aux,
                                                        episode_returns, and exogenous where the env knows it)

`spec` is the env part of a dataset's metadata (`env_spec`), also stored in every policy artifact, so a policy can
be rolled out with nothing but itself. Splits name what an evaluation runs on: `train` (the classes of c in the
data), `heldout` (classes the env knows but the data never showed; toy), or CausalWorld's variable spaces `A`
(in distribution) and `B` (out of distribution).
"""

import importlib
from typing import Callable, Optional, Sequence, Tuple

from oilca import contract

BACKENDS = {"toy": "envs.toy", "dmc": "envs.dmc", "cw": "envs.cw", "gym": "envs.gym"}
DATASET_ONLY = contract.DATASET_ONLY  # metadata that is not the env


def parse_env_id(env_id: str) -> Tuple[str, str]:
    """'toy' -> ('toy', ''), 'dmc:cartpole-swingup' -> ('dmc', 'cartpole-swingup'), 'cw:pushing' -> ('cw', 'pushing'),
    'gym:Hopper-v5' -> ('gym', 'Hopper-v5')."""
    backend, _, name = env_id.partition(":")
    if backend not in BACKENDS or (backend == "toy") != (name == ""):
        raise ValueError(f"unknown env id '{env_id}': use toy, dmc:<domain>-<task>, cw:<task> or gym:<EnvId>")
    return backend, name


def backend(spec: dict) -> str:
    """The backend ('toy', 'dmc', 'cw' or 'gym') of an env description."""
    return parse_env_id(spec["env_id"])[0]


def backend_module(env_id: str):
    """The backend module of an env id (imported on first use: dm_control and CausalWorld load slowly)."""
    return importlib.import_module(BACKENDS[parse_env_id(env_id)[0]])


def check_spec(spec: dict) -> None:
    """A one-line ValueError unless `spec` describes an env its backend can build and roll out (each backend's
    `check_spec`: the toy's env_config, DeepMind Control's task and perturbation table, CausalWorld's config)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("env_id"), str):
        raise ValueError("the env description has no env_id")
    backend_module(spec["env_id"]).check_spec(spec)


def env_spec(meta: dict) -> dict:
    """The part of a dataset's metadata that describes the env (stored in every policy artifact)."""
    return {k: v for k, v in meta.items() if k not in DATASET_ONLY}


def collect(env_id: str, cfg, seed: int, **options) -> dict:
    """Run the backend's data collection (`cfg` is its config: ToyConfig, DMCConfig or CWConfig; gym: data comes
    from Minari instead); `options` go to the backend as they are (CausalWorld: `parts`, the folder of finished
    batches)."""
    return backend_module(env_id).collect(cfg, parse_env_id(env_id)[1], seed, **options)


def default_splits(spec: dict) -> tuple:
    """Every split the env has: ('A', 'B') for CausalWorld, else ('train', 'heldout') or ('train',)."""
    if backend(spec) == "cw":
        return ("A", "B")
    return ("train", "heldout") if spec.get("heldout_classes") else ("train",)


def split_classes(spec: dict, split: str, classes: Optional[Sequence[int]] = None) -> list:
    """The classes of c a split runs on ([] for a CausalWorld space, whose episodes draw their own variables, and for
    gymnasium data, whose c (a source dataset, a KMeans cluster) is no setting of the env: it runs plain)."""
    if backend(spec) == "gym":
        if classes:
            raise ValueError(f"c of {spec['env_id']} data ({spec.get('aux_meaning', 'a label of the data')}) is not a "
                             f"setting of the env: evaluate without --classes")
        if split != "train":
            raise ValueError(f"{spec['env_id']} has one split, train (its plain env), not '{split}'")
        return []
    if classes:
        known = {"toy": lambda: spec["env_n_classes"], "dmc": lambda: len(spec["class_table"]["mean"]),
                 "cw": lambda: 0}[backend(spec)]()
        bad = [c for c in classes if not 0 <= int(c) < known]
        if bad:
            raise ValueError(f"classes {bad} are outside the env's {known} classes of c")
        return [int(c) for c in classes]
    if backend(spec) == "cw":
        if split not in ("A", "B"):
            raise ValueError(f"CausalWorld is evaluated on variable space A or B (--space A B), not '{split}'")
        return []
    if split in ("A", "B"):
        raise ValueError(f"split '{split}' (a CausalWorld variable space) does not exist for '{spec['env_id']}'")
    if split == "train":
        return list(range(spec["n_classes"]))
    if split == "heldout":
        if not spec.get("heldout_classes"):
            raise ValueError(f"env '{spec['env_id']}' has no held-out classes of c")
        return list(spec["heldout_classes"])
    raise ValueError(f"unknown split '{split}': use train, heldout or --classes")


def rollout(spec: dict, policy: Callable, split: str, classes: Sequence[int], episodes: int, seed: int) -> dict:
    """Roll out `policy` (deterministic, batched) for `episodes` episodes on one split; see the module docstring."""
    return backend_module(spec["env_id"]).rollout(spec, policy, split, classes, episodes, seed)


def reference_policy(spec: dict, kind: str, seed: int) -> Callable:
    """The env's expert (toy: its goal-seeking controller; DeepMind Control: the most trained behaviour snapshot;
    CausalWorld: the expert the data was collected with; gym: none), an upper reference, or uniform random actions
    (a lower one)."""
    if kind not in ("expert", "random"):
        raise ValueError(f"unknown reference policy '{kind}': use expert or random")
    return backend_module(spec["env_id"]).reference_policy(spec, kind, seed)


def expert_episodes(spec: dict, classes: Sequence[int], seed: int) -> dict:
    """Whole episodes of the env's expert (reference_policy "expert") under the given classes of c, one per entry:
    "true expert data", the control that augment.py --mode expert_data adds instead of counterfactual rows."""
    return backend_module(spec["env_id"]).expert_episodes(spec, classes, seed)


def load_dataset(path: str) -> dict:
    """contract.load_dataset with the env check: the dataset's env description must be one its backend can build."""
    return contract.load_dataset(path, check_env=check_spec)


def load_dataset_raw(path: str):
    """contract.load_dataset_raw with the env check (for a lossless copy into another format)."""
    return contract.load_dataset_raw(path, check_env=check_spec)


def validate_dataset(path: str, raw: dict) -> dict:
    """contract.validate_dataset with the env check (a stage checks what it is about to write)."""
    return contract.validate_dataset(path, raw, check_env=check_spec)


def save_dataset(path: str, arrays: dict, compress: bool = True) -> None:
    """Write a dataset that the next stage will accept: arrays in memory are checked before anything is written;
    where some are `contract.Rows` (given block by block), the written file is checked before it takes `path`'s
    place. Either way a dataset that fails the contract leaves nothing at `path`."""
    if any(isinstance(a, contract.Rows) for a in arrays.values()):
        contract.save_npz(path, arrays, compress=compress,
                          check=lambda tmp: validate_dataset(path, contract.read_npz(tmp)))
    else:
        validate_dataset(path, arrays)
        contract.save_npz(path, arrays, compress=compress)
