"""Export a dataset (.npz, docs/contract.md) as a Minari dataset, one per file, for other offline-RL libraries.

Minari (the maintained successor of D4RL) stores a dataset as episodes in `<root>/<dataset id>/data/` (root: --root,
else $MINARI_DATASETS_PATH, else ~/.minari/datasets). The layout written here (docs/minari.md):

  * One Minari episode per episode of the .npz, in row order. observations [T+1] = the episode's s_0 … s_{T-1} and
    its last s′ (the contract guarantees s′_t = s_{t+1} inside an episode, so nothing is lost); actions, rewards
    [T]; terminations = `terminals`, truncations = `timeouts`.
  * One single-step Minari episode per augmented row (augment.py's counterfactual rows, which belong to no episode):
    observations [s̃′, s̃″], neither terminated nor truncated, infos `augmented` = True.
  * Step infos, T+1 entries each as Minari's own collector writes them (entry t+1 comes with the step that made
    s_{t+1}; entry 0, the reset's, repeats entry 1): `c` (the label c, the .npz `aux`), `expert`, `episode_id`,
    `episode_return`, and where the .npz has them `exogenous` (the true u), `policy_id`, `augmented`, `aug_source`,
    `aug_partner`.
  * Dataset metadata (metadata.json): `oilca_metadata`, the .npz metadata JSON verbatim (env, classes of c, D_E
    split, collection arguments, versions), and `oilca_format` = 1. Data of a gymnasium env (`gym:<EnvId>`, from
    minari_import.py) also gets the env's EnvSpec, so `MinariDataset.recover_environment()` works; toy, dmc: and
    cw: data have no gymnasium env, so only their spaces are recorded: observations a float Box (−∞, ∞), actions a
    Box within `action_low`/`action_high`.

minari_import.py reads such a dataset back into the identical .npz: every array and the metadata
(tests/test_minari.py checks it). The dataset is built in a temporary folder beside its target and renamed into
place, so an interrupted export leaves nothing half-written; an existing dataset id is refused unless --force, and
the input .npz is only read.
"""

import json
import os
import sys
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

from oilca import cli
from oilca import contract
import envs

# .npz key -> step-info name (per-row keys; the optional ones are written where the .npz has them)
INFO_KEYS = {"aux": "c", "expert": "expert", "episode_ids": "episode_id", "episode_returns": "episode_return",
             "exogenous": "exogenous", "policy_ids": "policy_id", "augmented": "augmented",
             "aug_source": "aug_source", "aug_partner": "aug_partner"}
FORMAT = 1


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset (.npz, docs/contract.md); only read"""
    dataset_id: Optional[str] = None
    """Minari dataset id `(namespace/)name-v<version>`; default oilca/<env>/<file name>-v0, e.g. oilca/toy/toy-v0"""
    root: Optional[str] = None
    """Minari datasets folder (default: $MINARI_DATASETS_PATH, else ~/.minari/datasets)"""
    author: str = "oilca"
    """author recorded in the Minari metadata"""
    description: Optional[str] = None
    """description recorded in the Minari metadata (default: one line naming the env, c and D_E)"""
    force: bool = False
    """replace an existing Minari dataset of that id"""


def minari_root(root: Optional[str]) -> str:
    return os.path.abspath(root or os.environ.get("MINARI_DATASETS_PATH") or os.path.expanduser("~/.minari/datasets"))


def default_id(path: str, env_id: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"oilca/{env_id.replace(':', '-')}/{stem}-v0"


def segments(data: Dict[str, np.ndarray]) -> List[tuple]:
    """Row ranges [a, b) of the Minari episodes: each collected episode, and each augmented row on its own."""
    ep = data["episode_ids"]
    aug = data["augmented"] if "augmented" in data else np.zeros(len(ep), bool)
    start = np.r_[True, (ep[1:] != ep[:-1]) | aug[1:] | aug[:-1]]
    bounds = np.r_[np.flatnonzero(start), len(ep)]
    return list(zip(bounds[:-1], bounds[1:]))


def episode_buffers(raw: Dict[str, np.ndarray], data: Dict[str, np.ndarray]) -> list:
    """One minari EpisodeBuffer per segment, arrays in the .npz's own dtypes."""
    from minari.data_collector import EpisodeBuffer

    out = []
    for k, (a, b) in enumerate(segments(data)):
        infos = {}
        for key, name in INFO_KEYS.items():
            if key in raw:
                v = raw[key][a:b]
                infos[name] = np.concatenate([v[:1], v])  # entry 0 (the reset's) repeats entry 1
        out.append(EpisodeBuffer(
            id=k, observations=np.concatenate([raw["observations"][a:b], raw["next_observations"][b - 1:b]]),
            actions=raw["actions"][a:b], rewards=raw["rewards"][a:b], terminations=raw["terminals"][a:b],
            truncations=raw["timeouts"][a:b], infos=infos))
    return out


def main(args: Args) -> dict:
    try:
        import gymnasium as gym
        import minari
        from minari.dataset.minari_dataset import parse_dataset_id
    except ImportError as e:
        raise ValueError(f"Minari is not installed: WITH_MINARI=1 bash scripts/setup.sh ({e})")
    raw, data = envs.load_dataset_raw(args.dataset)  # refuses a file the contract refuses
    meta = data["metadata"]
    dataset_id = args.dataset_id or default_id(args.dataset, meta["env_id"])
    try:
        namespace, _, version = parse_dataset_id(dataset_id)
    except Exception:
        version = None
    if version is None:
        raise ValueError(f"bad Minari dataset id '{dataset_id}': use (namespace/)name-v<version>, e.g. oilca/toy/toy-v0")
    root = minari_root(args.root)
    target = os.path.join(root, dataset_id)
    if os.path.abspath(args.dataset).startswith(target + os.sep):
        raise ValueError(f"the input {args.dataset} lies inside the target Minari dataset {target}")
    if os.path.exists(target) and not args.force:
        raise ValueError(f"Minari dataset '{dataset_id}' exists in {root}: pass --force to replace it, or another --dataset-id")

    obs_space = gym.spaces.Box(-np.inf, np.inf, (meta["obs_dim"],), raw["observations"].dtype)
    act_space = gym.spaces.Box(np.asarray(meta["action_low"], raw["actions"].dtype),
                               np.asarray(meta["action_high"], raw["actions"].dtype), dtype=raw["actions"].dtype)
    env = None
    if meta["env_id"].startswith("gym:") and meta.get("gym_env_spec"):
        env = gym.envs.registration.EnvSpec.from_json(meta["gym_env_spec"])
    n_exp = len(np.unique(data["episode_ids"][data["expert"] & (data["episode_ids"] >= 0)]))
    description = args.description or (f"OILCA dataset {os.path.basename(args.dataset)} of {meta['env_id']}: "
                                       f"c = {meta['aux_meaning']}; {n_exp} D_E episodes (infos 'expert')")
    buffers = episode_buffers(raw, data)

    os.makedirs(root, exist_ok=True)
    tmp_root = tempfile.mkdtemp(dir=root, prefix=".export-")
    old_env = os.environ.get("MINARI_DATASETS_PATH")
    try:
        os.environ["MINARI_DATASETS_PATH"] = tmp_root  # minari writes under this folder; renamed into place below
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # minari warns about every metadata field left unset
            ds = minari.create_dataset_from_buffers(
                dataset_id, buffers, env=env, observation_space=obs_space, action_space=act_space,
                algorithm_name="oilca " + meta["env_id"], author=args.author, description=description,
                data_format="hdf5")
        ds.storage.update_metadata({"oilca_format": FORMAT, "oilca_metadata": str(raw["metadata"])})
        if os.path.exists(target):
            shutil.rmtree(target)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(os.path.join(tmp_root, dataset_id), target)
        if namespace:  # minari's namespace files (one per level), where the root does not have them yet
            parts = namespace.split("/")
            for i in range(1, len(parts) + 1):
                rel = os.path.join(*parts[:i], "namespace_metadata.json")
                if os.path.exists(os.path.join(tmp_root, rel)) and not os.path.exists(os.path.join(root, rel)):
                    shutil.copy(os.path.join(tmp_root, rel), os.path.join(root, rel))
    finally:
        if old_env is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old_env
        shutil.rmtree(tmp_root, ignore_errors=True)
    print(f"wrote Minari dataset {dataset_id} in {root}: {len(buffers)} episodes, {len(data['rewards'])} steps "
          f"({n_exp} D_E episodes; c, expert{', exogenous' if 'exogenous' in raw else ''} in the step infos)")
    return {"dataset_id": dataset_id, "path": target, "episodes": len(buffers), "steps": int(len(data["rewards"]))}


if __name__ == "__main__":
    cli.run(main, Args)
