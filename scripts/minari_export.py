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
the input .npz is only read. Minari (HDF5) writes in a child process: a write it cannot finish (a full disk) is one
line on stderr however HDF5 reports it, and the temporary folder is removed; the temporary folders of exports that
were killed are removed by the next export to the same root.
"""

import json
import os
import re
import signal
import sys
import shutil
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

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
    """Minari datasets folder (not given: $MINARI_DATASETS_PATH, else ~/.minari/datasets)"""
    author: str = "oilca"
    """author recorded in the Minari metadata"""
    description: Optional[str] = None
    """description recorded in the Minari metadata (not given: one line naming the env, c and D_E)"""
    force: bool = False
    """replace an existing Minari dataset of that id"""
    ref_results: Tuple[str, ...] = ()
    """two result JSONs (evaluate.py's, e.g. the runner's reference_expert_s0_train.json and
    reference_random_s0_train.json) whose mean returns become ref_max_score and ref_min_score (not given: the toy's
    are measured here, 100 episodes each of its expert and of uniform actions on the training classes, evaluation
    seed 10000; other envs get none)"""
    code_permalink: Optional[str] = None
    """code_permalink recorded in the Minari metadata (e.g. the URL of this repository at the commit that made the
    data)"""


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


def reference_scores(paths: Tuple[str, ...], meta: dict) -> Tuple[Optional[float], Optional[float]]:
    """(ref_min_score, ref_max_score): the mean returns of --ref-results (expert, random), or the toy's measured
    here (its expert and uniform actions, 100 episodes each on the training classes, seed 10000), else (None, None)."""
    if paths:
        if len(paths) != 2:
            raise ValueError(f"--ref-results takes two result JSONs (expert, random), got {len(paths)}")
        means = []
        for p in paths:
            try:
                with open(p) as f:
                    r = json.load(f)
                means.append(float(np.mean(r["returns"])))
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise ValueError(f"--ref-results {p}: not a result JSON with 'returns' ({e})") from None
        return means[1], means[0]
    if meta["env_id"] != "toy":
        return None, None
    spec = envs.env_spec(meta)
    train = envs.split_classes(spec, "train")
    score = lambda kind: float(np.mean(envs.rollout(spec, envs.reference_policy(spec, kind, 10_000), "train", train,  # noqa: E731
                                                    100, 10_000)["returns"]))
    return score("random"), score("expert")


def requirements(meta: dict) -> list:
    """The packages recover_environment() needs beside this repository (on the path), at their installed versions."""
    import importlib.metadata

    names = ["gymnasium", "numpy"] + (["dm_control", "mujoco"] if meta["env_id"].startswith("dmc:") else [])
    return [f"{n}=={importlib.metadata.version(n)}" for n in names]


def clean_stale_exports(root: str) -> list:
    """Remove the temporary `.export-<pid>-…` folders of exports whose process is gone (killed), and those of older
    exports without a pid that are over an hour old. Returns what it removed."""
    removed = []
    for entry in os.listdir(root) if os.path.isdir(root) else ():
        if not entry.startswith(".export-"):
            continue
        full, m = os.path.join(root, entry), re.fullmatch(r"\.export-(\d+)-.+", entry)
        try:
            stale = (not contract._pid_alive(int(m.group(1)))) if m else \
                time.time() - os.lstat(full).st_mtime > contract.STALE_AGE_S
            if stale and os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
                removed.append(full)
        except OSError:
            continue
    return removed


def isolated(fn, where: str) -> None:
    """Run fn() in a forked child whose stdout and stderr the parent reads: HDF5 reports a write it cannot finish
    (a full disk) with hundreds of lines, sometimes a crash; here any failure of the child is one ContractError line.
    SIGINT/SIGTERM to the parent stops the child too. Where there is no fork (Windows), fn() runs here."""
    if not hasattr(os, "fork"):
        return fn()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: everything it prints goes to the pipe
        code = 1
        try:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            fn()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    chunks = []
    try:
        while True:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(r)
    text = b"".join(chunks).decode(errors="replace")
    if status == 0:
        print(text, end="")
        return
    if "errno = 28" in text or "No space left on device" in text:
        raise contract.ContractError(f"{where}: cannot write (No space left on device)")
    last = [line.strip() for line in text.splitlines() if line.strip()][-1:] or ["no message"]
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
    raise contract.ContractError(f"{where}: Minari could not write the dataset ({how}: {last[0][:200]})")


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
    if os.path.realpath(args.dataset).startswith(os.path.realpath(target) + os.sep):  # also through symbolic links
        raise ValueError(f"the input {args.dataset} lies inside the target Minari dataset {target}")
    if os.path.exists(target) and not args.force:
        raise ValueError(f"Minari dataset '{dataset_id}' exists in {root}: pass --force to replace it, or another --dataset-id")

    obs_space = gym.spaces.Box(-np.inf, np.inf, (meta["obs_dim"],), raw["observations"].dtype)
    act_space = gym.spaces.Box(np.asarray(meta["action_low"], raw["actions"].dtype),
                               np.asarray(meta["action_high"], raw["actions"].dtype), dtype=raw["actions"].dtype)
    env = eval_env = None
    if meta["env_id"].startswith("gym:") and meta.get("gym_env_spec"):
        env = gym.envs.registration.EnvSpec.from_json(meta["gym_env_spec"])
        if meta.get("gym_eval_env_spec"):
            eval_env = gym.envs.registration.EnvSpec.from_json(meta["gym_eval_env_spec"])
    elif not meta["env_id"].startswith("cw:"):
        from envs import registered  # the toy and DeepMind Control as gymnasium envs (oilca/Toy-v0, oilca/DMC-v0)

        env, eval_env = registered.env_specs(meta)
    ref_min, ref_max = reference_scores(args.ref_results, meta)
    n_exp = len(np.unique(data["episode_ids"][data["expert"] & (data["episode_ids"] >= 0)]))
    description = args.description or (f"OILCA dataset {os.path.basename(args.dataset)} of {meta['env_id']}: "
                                       f"c = {meta['aux_meaning']}; {n_exp} D_E episodes (infos 'expert')")
    buffers = episode_buffers(raw, data)

    try:
        os.makedirs(root, exist_ok=True)
        clean_stale_exports(root)
        tmp_root = tempfile.mkdtemp(dir=root, prefix=f".export-{os.getpid()}-")
    except OSError as e:
        raise contract.ContractError(f"{root}: cannot write ({e.strerror or e})") from None
    old_env = os.environ.get("MINARI_DATASETS_PATH")

    def write():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # minari warns about every metadata field left unset
            ds = minari.create_dataset_from_buffers(
                dataset_id, buffers, env=env, observation_space=obs_space, action_space=act_space,
                algorithm_name="oilca " + meta["env_id"], author=args.author, description=description,
                data_format="hdf5", eval_env=eval_env, ref_min_score=ref_min, ref_max_score=ref_max,
                code_permalink=args.code_permalink, requirements=requirements(meta))
        ds.storage.update_metadata({"oilca_format": FORMAT, "oilca_metadata": str(raw["metadata"])})

    try:
        os.environ["MINARI_DATASETS_PATH"] = tmp_root  # minari writes under this folder; renamed into place below
        isolated(write, target)
        aside = os.path.join(tmp_root, ".previous")  # a replaced dataset waits here until the new one is in place
        try:
            if namespace:  # minari's namespace files (one per level), where the root does not have them yet
                parts = namespace.split("/")
                for i in range(1, len(parts) + 1):
                    rel = os.path.join(*parts[:i], "namespace_metadata.json")
                    if os.path.exists(os.path.join(tmp_root, rel)) and not os.path.exists(os.path.join(root, rel)):
                        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                        contract.save_text(os.path.join(root, rel), open(os.path.join(tmp_root, rel)).read())
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.exists(target):
                os.rename(target, aside)
            os.replace(os.path.join(tmp_root, dataset_id), target)
        except OSError as e:
            if os.path.exists(aside) and not os.path.exists(target):
                os.rename(aside, target)
            raise contract.ContractError(f"{target}: cannot write ({e.strerror or e})") from None
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
