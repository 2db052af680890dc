"""Import Minari datasets into one dataset (.npz, docs/contract.md): D_all = D_E ∪ D_U with the label c.

Minari (the maintained successor of D4RL) keeps datasets in `<root>/<dataset id>/data/` (root: --root, else
$MINARI_DATASETS_PATH, else ~/.minari/datasets). This stage reads local datasets only; fetch them first with
`minari download <id>` (docs/minari.md). Each Minari episode (observations [T+1], actions, rewards, terminations,
truncations [T]) becomes T rows: observations = s_0 … s_{T-1}, next_observations = s_1 … s_T, terminals = its
termination and timeouts = its truncation, set on the last row only (an episode that ends with neither, cut by
the dataset, counts as a timeout). Actions are clipped into the action space (counted in `sources`).

The expert + supplementary protocol of DWBC, ILID and ISW-BC (paper §5.2 uses the same split of D_E and D_U):
  * `--expert <id>`: D_E = `--expert-episodes` episodes of that dataset, drawn with --seed; all its other taken
    episodes, and every episode of the other datasets, are D_U (e.g. one expert trajectory; D_U = the remaining
    expert trajectories plus random or replay data);
  * `--expert top`: the paper's split over every taken episode: the top `--positive-frac` by return are positives,
    each joins D_E with probability `--expert-prob` (at least the best episode does);
  * unset: the expert flag recorded by minari_export.py (datasets of this project only).
The auxiliary label c (`--aux`):
  * `source`: the index of the episode's dataset in --datasets (the data-collecting policy as the variation);
  * `kmeans:K`: the KMeans cluster (of K, on standardised s′) of each transition, the authors' choice for D4RL data;
    c then varies inside an episode, which the metadata states (`aux_per_row`);
  * `recorded`: the c that minari_export.py stored in the step infos; `auto` (default): recorded where every
    dataset has it, else source.
`--episodes N1 N2 …` takes that many episodes of each dataset (drawn with --seed, kept in their order).

A single dataset written by minari_export.py, imported with the defaults, gives back the identical .npz (every
array and the metadata). Other datasets need a gymnasium EnvSpec (Minari records it): the metadata stores it as
`gym_env_spec` with env id `gym:<EnvId>`, so evaluate.py and the trainers' --final-eval roll policies out in that
env (gym_env.py). The metadata's `sources` lists each dataset's id, its episodes and the ones taken.

Output: --out, one .npz of the contract (observations, actions, next_observations, rewards, terminals, timeouts,
episode_ids, aux, expert, episode_returns, and exogenous where every dataset recorded it; metadata). An existing
output is refused unless --force; the Minari datasets are only read.
"""

import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

from oilca import cli
from oilca import contract
import envs

# step-info name (minari_export.py) -> .npz key
INFO_KEYS = {"c": "aux", "expert": "expert", "episode_id": "episode_ids", "episode_return": "episode_returns",
             "exogenous": "exogenous", "policy_id": "policy_ids", "augmented": "augmented",
             "aug_source": "aug_source", "aug_partner": "aug_partner"}


@dataclass
class Args:
    datasets: Tuple[str, ...] = ()
    """Minari dataset ids, e.g. mujoco/hopper/expert-v0 mujoco/hopper/simple-v0 (local; never downloaded here)"""
    out: str = "data/minari.npz"
    """output dataset (.npz)"""
    expert: Optional[str] = None
    """where D_E comes from: one of --datasets, `top` (the paper's split), or unset (minari_export.py's expert flag)"""
    expert_episodes: int = 1
    """with --expert <id>: the number of its episodes that form D_E"""
    episodes: Optional[Tuple[int, ...]] = None
    """episodes taken from each dataset, in the order of --datasets (not given: all)"""
    aux: str = "auto"
    """the label c: `source`, `kmeans:K`, `recorded` or `auto` (recorded where every dataset has it, else source)"""
    positive_frac: float = 0.2
    """with --expert top: fraction of episodes (top by return) that count as positives"""
    expert_prob: float = 0.1
    """with --expert top: probability that a positive episode joins D_E"""
    seed: int = 0
    """seed of the episode draws and of KMeans"""
    root: Optional[str] = None
    """Minari datasets folder (not given: $MINARI_DATASETS_PATH, else ~/.minari/datasets)"""
    force: bool = False
    """overwrite an existing output"""


def minari_root(root: Optional[str]) -> str:
    return os.path.abspath(root or os.environ.get("MINARI_DATASETS_PATH") or os.path.expanduser("~/.minari/datasets"))


def parse_aux(aux: str) -> Tuple[str, int]:
    """'source' -> ('source', 0), 'kmeans:8' -> ('kmeans', 8), …; a bad spec is a one-line ValueError."""
    kind, _, k = aux.partition(":")
    if kind in ("source", "recorded", "auto") and not k:
        return kind, 0
    if kind == "kmeans" and k.isdigit() and int(k) >= 1:
        return kind, int(k)
    raise ValueError(f"bad --aux '{aux}': use source, recorded, auto or kmeans:K with an integer K >= 1 (e.g. kmeans:8)")


def open_dataset(root: str, dataset_id: str):
    """The local MinariDataset of an id, or a one-line error that says how to get it."""
    from minari import MinariDataset

    path = os.path.join(root, dataset_id, "data")
    if not os.path.isfile(os.path.join(path, "metadata.json")):
        raise ValueError(f"Minari dataset '{dataset_id}' not found in {root} (fetch it first: minari download {dataset_id}, "
                         f"or set --root / MINARI_DATASETS_PATH)")
    with unreadable(path):
        return MinariDataset(path)


@contextlib.contextmanager
def unreadable(path: str):
    """A Minari dataset's metadata or data that cannot be read (truncated HDF5, bad JSON, a missing member) becomes
    one line naming its folder, whatever h5py or minari raised."""
    try:
        yield
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: cannot read the Minari dataset's metadata (bad JSON: {e})") from None
    except (ValueError, contract.ContractError):  # this project's own one-line refusals
        raise
    except Exception as e:  # OSError (h5py: truncated or damaged HDF5), KeyError (a missing member), ...
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"{path}: cannot read the Minari dataset ({type(e).__name__}: {msg})") from None


def env_of(ds, dataset_id: str) -> dict:
    """The env part of the metadata: this project's recorded env (minari_export.py), else the gymnasium env."""
    import gymnasium as gym

    oilca = ds.storage.metadata.get("oilca_metadata")
    if oilca is not None:
        return envs.env_spec(json.loads(oilca))
    obs, act = ds.observation_space, ds.action_space
    if not isinstance(obs, gym.spaces.Box) or len(obs.shape) != 1:
        raise ValueError(f"{dataset_id}: observations must be a flat Box, found {obs}")
    if not isinstance(act, gym.spaces.Box) or len(act.shape) != 1 or not (np.isfinite(act.low).all() and np.isfinite(act.high).all()):
        raise ValueError(f"{dataset_id}: actions must be a bounded flat Box, found {act}")
    spec = ds.env_spec
    if spec is None:
        raise ValueError(f"{dataset_id} records no gymnasium env: a policy trained on it could not be evaluated")
    out = {"env_id": f"gym:{spec.id}", "gym_env_spec": spec.to_json(), "obs_dim": int(obs.shape[0]),
           "act_dim": int(act.shape[0]), "action_low": act.low.astype(np.float32).tolist(),
           "action_high": act.high.astype(np.float32).tolist(), "heldout_classes": []}
    if spec.max_episode_steps:
        out["episode_len"] = int(spec.max_episode_steps)
    eval_spec = getattr(ds, "eval_env_spec", None)
    if eval_spec is not None and eval_spec.to_json() != out["gym_env_spec"]:  # the env policies are evaluated in
        out["gym_eval_env_spec"] = eval_spec.to_json()
    return out


def read_episodes(ds, dataset_id: str, take: np.ndarray, spec: dict) -> List[dict]:
    """The taken episodes as row arrays (plus the recorded step infos, entries 1..T)."""
    low, high = np.asarray(spec["action_low"], np.float32), np.asarray(spec["action_high"], np.float32)
    out = []
    for i, ep in zip(take, ds.iterate_episodes(take.tolist())):
        obs = ep.observations
        if not isinstance(obs, np.ndarray):
            raise ValueError(f"{dataset_id}: episode {i} has structured observations ({type(obs).__name__}): only flat Box observations are supported")
        T = len(ep.rewards)
        done = np.asarray(ep.terminations, bool) | np.asarray(ep.truncations, bool)
        if T == 0 or done[:-1].any():
            raise ValueError(f"{dataset_id}: episode {i} is empty or ends before its last step")
        obs = obs.astype(np.float32).reshape(T + 1, -1)
        act = np.asarray(ep.actions, np.float32).reshape(T, -1)
        terminal = bool(ep.terminations[-1])
        infos = {INFO_KEYS[k]: np.asarray(v)[1:] for k, v in (ep.infos or {}).items() if k in INFO_KEYS}
        out.append({"observations": obs[:-1], "next_observations": obs[1:], "actions": np.clip(act, low, high),
                    "clipped": int((act != np.clip(act, low, high)).any(1).sum()),
                    "rewards": np.asarray(ep.rewards, np.float32), "terminals": np.r_[np.zeros(T - 1, bool), terminal],
                    "timeouts": np.r_[np.zeros(T - 1, bool), not terminal], "infos": infos})
    return out


def restore(ds, dataset_id: str) -> Dict[str, np.ndarray]:
    """A dataset written by minari_export.py, back to its .npz arrays, exactly (dtypes and metadata included)."""
    parts: Dict[str, list] = {}
    for ep in ds.iterate_episodes():
        rows = {"observations": ep.observations[:-1], "next_observations": ep.observations[1:], "actions": ep.actions,
                "rewards": ep.rewards, "terminals": ep.terminations, "timeouts": ep.truncations}
        rows.update({INFO_KEYS[k]: np.asarray(v)[1:] for k, v in ep.infos.items() if k in INFO_KEYS})
        for k, v in rows.items():
            parts.setdefault(k, []).append(np.asarray(v))
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    arrays["metadata"] = np.array(ds.storage.metadata["oilca_metadata"])
    return arrays


def split_expert(returns: np.ndarray, positive_frac: float, expert_prob: float, rng: np.random.Generator) -> np.ndarray:
    """The paper's split (as collect_data.py): top `positive_frac` episodes by return are positives; each joins D_E
    w.p. `expert_prob`; at least the best episode does. Returns the expert mask over episodes."""
    if not 0 < positive_frac <= 1 or not 0 <= expert_prob <= 1:
        raise ValueError("need 0 < --positive-frac <= 1 and 0 <= --expert-prob <= 1")
    order = np.argsort(-returns, kind="stable")
    positive = np.zeros(len(returns), bool)
    positive[order[:max(1, int(round(positive_frac * len(returns))))]] = True
    expert = positive & (rng.random(len(returns)) < expert_prob)
    expert[order[0]] = expert[order[0]] or not expert.any()
    return expert


def kmeans_labels(x: np.ndarray, k: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """KMeans (k-means++ start) of the standardised rows of x: (labels [N], centres [k, dim] in x's units)."""
    from scipy.cluster.vq import kmeans2

    if k > len(x):
        raise ValueError(f"--aux kmeans:{k}: more clusters than the {len(x)} transitions to cluster")
    mean, std = x.mean(0), x.std(0) + 1e-6
    centres, labels = kmeans2(((x - mean) / std).astype(np.float64), k, iter=30, minit="++", rng=np.random.default_rng(seed))
    return labels.astype(np.int64), centres * std + mean


def main(args: Args) -> dict:
    try:
        import gymnasium
        import minari
    except ImportError as e:
        raise ValueError(f"Minari is not installed: WITH_MINARI=1 bash scripts/setup.sh ({e})")
    aux_kind, k = parse_aux(args.aux)
    if not args.datasets:
        raise ValueError("no --datasets given: name one or more Minari dataset ids")
    if len(set(args.datasets)) < len(args.datasets):
        raise ValueError(f"--datasets names a dataset twice: {list(args.datasets)}")
    if args.expert not in (None, "top") and args.expert not in args.datasets:
        raise ValueError(f"--expert {args.expert} is not one of --datasets ({', '.join(args.datasets)}) nor 'top'")
    if args.episodes is not None and len(args.episodes) != len(args.datasets):
        raise ValueError(f"--episodes needs one count per dataset ({len(args.datasets)}), got {len(args.episodes)}")
    root = minari_root(args.root)
    for d in args.datasets:  # --out inside an input dataset's folder (through symbolic links too) would replace it
        folder = os.path.realpath(os.path.join(root, d))
        if os.path.realpath(args.out).startswith(folder + os.sep):
            raise ValueError(f"--out {args.out} lies inside the input Minari dataset {folder}: refusing to overwrite an input")
    if os.path.exists(args.out) and not args.force:
        raise ValueError(f"{args.out} exists: pass --force to overwrite it, or another --out")
    sets = [open_dataset(root, d) for d in args.datasets]
    recorded = [ds.storage.metadata.get("oilca_metadata") is not None for ds in sets]

    if len(sets) == 1 and recorded[0] and args.expert is None and aux_kind in ("auto", "recorded") and args.episodes is None:
        with unreadable(os.path.join(root, args.datasets[0], "data")):
            arrays = restore(sets[0], args.datasets[0])
        data = envs.validate_dataset(args.out, arrays)
        contract.save_npz(args.out, arrays)
        print(f"wrote {args.out}: {contract.describe(data)} (restored from {args.datasets[0]}, written by minari_export.py)")
        return {"path": args.out, "restored": True, "n_transitions": len(data["rewards"])}

    # the env: one for all datasets
    specs = [env_of(ds, d) for ds, d in zip(sets, args.datasets)]
    for d, s in zip(args.datasets[1:], specs[1:]):
        if (s["env_id"], s["obs_dim"], s["act_dim"]) != (specs[0]["env_id"], specs[0]["obs_dim"], specs[0]["act_dim"]):
            raise ValueError(f"{d} ({s['env_id']}, obs {s['obs_dim']}, act {s['act_dim']}) does not share the env of "
                             f"{args.datasets[0]} ({specs[0]['env_id']}, obs {specs[0]['obs_dim']}, act {specs[0]['act_dim']})")
    spec = dict(specs[0])
    if aux_kind == "auto":
        aux_kind = "recorded" if all(recorded) else "source"
    if aux_kind == "recorded" and not all(recorded):
        raise ValueError(f"--aux recorded needs datasets written by minari_export.py; {args.datasets[recorded.index(False)]} is not")
    if aux_kind != "recorded" and not spec["env_id"].startswith("gym:"):
        raise ValueError(f"c of {spec['env_id']} data is the env's own variation: import it with --aux recorded")
    if args.expert is None and not all(recorded):
        raise ValueError("missing --expert: name the dataset D_E is drawn from (one of --datasets), or top")

    # the episodes
    rng = np.random.default_rng(args.seed)
    episodes, source, n_total = [], [], []
    for i, (ds, d) in enumerate(zip(sets, args.datasets)):
        n = ds.total_episodes
        want = n if args.episodes is None else args.episodes[i]
        if not 1 <= want <= n:
            raise ValueError(f"--episodes {want} for {d}, which has {n} episodes")
        take = np.arange(n) if want == n else np.sort(rng.choice(n, size=want, replace=False))
        with unreadable(os.path.join(root, d, "data")):
            eps = read_episodes(ds, d, take, spec)
        n_aug = sum(bool(e["infos"].get("augmented", [False])[0]) for e in eps)
        if n_aug:  # augment.py's single rows have no place in a re-split dataset: re-run augment.py on the result
            eps = [e for e in eps if not e["infos"].get("augmented", [False])[0]]
            print(f"{d}: {n_aug} augmented rows left out")
        episodes += eps
        source += [i] * len(eps)
        n_total.append({"dataset_id": d, "total_episodes": n, "taken_episodes": take.tolist(),
                        "actions_clipped": int(sum(e["clipped"] for e in eps)),
                        **{k: float(ds.storage.metadata[k]) for k in ("ref_min_score", "ref_max_score")  # D4RL-style
                           if ds.storage.metadata.get(k) is not None}})  # normalisation references, where it has them
    source = np.asarray(source)
    returns = np.array([e["rewards"].astype(np.float64).sum() for e in episodes])

    # D_E
    if args.expert is None:
        expert = np.array([bool(e["infos"]["expert"][0]) for e in episodes])
        rule = "recorded by minari_export.py"
    elif args.expert == "top":
        expert = split_expert(returns, args.positive_frac, args.expert_prob, rng)
        rule = f"top {args.positive_frac} of episodes by return are positives, each in D_E w.p. {args.expert_prob}"
    else:
        pool = np.flatnonzero(source == args.datasets.index(args.expert))
        if not 1 <= args.expert_episodes <= len(pool):
            raise ValueError(f"--expert-episodes {args.expert_episodes}: {args.expert} has {len(pool)} taken episodes")
        expert = np.zeros(len(episodes), bool)
        expert[rng.choice(pool, size=args.expert_episodes, replace=False)] = True
        rule = f"{args.expert_episodes} episodes of {args.expert} (drawn with the seed); every other episode is D_U"

    # rows
    T = np.array([len(e["rewards"]) for e in episodes])
    cat = lambda key: np.concatenate([e[key] for e in episodes])  # noqa: E731
    arrays = {key: cat(key) for key in ("observations", "actions", "next_observations", "rewards", "terminals", "timeouts")}
    arrays.update(episode_ids=np.repeat(np.arange(len(episodes)), T).astype(np.int64), expert=np.repeat(expert, T),
                  episode_returns=np.repeat(returns, T).astype(np.float32))
    if all("exogenous" in e["infos"] for e in episodes):
        arrays["exogenous"] = np.concatenate([e["infos"]["exogenous"] for e in episodes]).astype(np.float32)
    else:
        spec.pop("u_dim", None)
    if aux_kind == "recorded":
        arrays["aux"] = np.concatenate([e["infos"]["aux"] for e in episodes]).astype(np.int64)
        spec["n_classes"] = max(int(s["n_classes"]) for s in specs)
    elif aux_kind == "source":
        arrays["aux"] = np.repeat(source, T).astype(np.int64)
        spec.update(n_classes=len(sets), aux_meaning=f"index of the episode's source Minari dataset in {list(args.datasets)}")
    else:
        arrays["aux"], centres = kmeans_labels(arrays["next_observations"], k, args.seed)
        spec.update(n_classes=k, aux_per_row=True, kmeans={"k": k, "seed": args.seed, "centres": centres.round(6).tolist()},
                    aux_meaning=f"KMeans cluster (of {k}) of the standardised next observation s' of each transition")
    arg_dict = {key: v for key, v in json.loads(json.dumps(asdict(args))).items() if key not in ("out", "force", "root")}
    meta = {**spec, "schema_version": contract.SCHEMA_VERSION, "collect_args": arg_dict, "seed": args.seed,
            "versions": {**contract.package_versions(), "minari": minari.__version__, "gymnasium": gymnasium.__version__},
            "split": {"rule": rule, "n_expert_episodes": int(expert.sum())}, "sources": n_total}
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    data = envs.validate_dataset(args.out, arrays)  # never write a file the next stage would refuse
    contract.save_npz(args.out, arrays)

    print(f"{'source':<40}{'episodes':>9}{'steps':>9}{'return mean ± std':>22}{'in D_E':>8}")
    for i, d in enumerate(args.datasets):
        m = source == i
        print(f"{d[:39]:<40}{m.sum():>9}{T[m].sum():>9}{returns[m].mean():>14.2f} ± {returns[m].std():<6.2f}{expert[m].sum():>8}")
    print(f"wrote {args.out}: {contract.describe(data)}; c = {aux_kind}{f':{k}' if k else ''}; D_E: {rule}")
    return {"path": args.out, "restored": False, "n_transitions": len(data["rewards"]), "n_expert_episodes": int(expert.sum()),
            "returns": returns, "expert": expert, "source": source}


if __name__ == "__main__":
    cli.run(main, Args)
