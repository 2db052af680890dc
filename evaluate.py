"""Roll out a saved policy and write one JSON result per run (OILCA §5: returns of the learned policy).

The policy artifact (CONTRACT.md, `kind: policy`) is self-contained: normalisation, action bounds and the env it
was trained for are inside it, so this script needs nothing from the script that trained the policy.

Splits (default: every split the env has):
  * `train`   the classes of c present in the training data (in-distribution; toy and DeepMind Control, where
              each episode runs under one of the dataset's action-perturbation distributions),
  * `heldout` the classes the env knows but the data never showed (out-of-distribution; toy env),
  * `A`, `B`  CausalWorld variable spaces (`--space A B`): every episode draws the intervened variables from
              space A (in-distribution, Table 6) or space B (out-of-distribution, Table 2),
  * `--classes 0 3` any explicit list of classes.
Episodes are spread evenly over the chosen classes. Evaluation seeds (`--seed`, default 10_000) are disjoint
from the data and training seeds. The policy acts deterministically (the tanh of its mean).

Backends: `toy` (vectorised over episodes), `dmc:` (dmc_env.rollout, 1000-step episodes in lockstep) and
`cw:` (cw_env.rollout, which also reports CausalWorld's fractional success).

Output JSON: method, seed (training seed), env, split, classes, returns (one per episode), episode_classes,
mean_return, std_return, success / mean_success (CausalWorld), episodes, eval_seed, policy,
dataset_fingerprint, args, train_args.
"""

import os
import sys
from dataclasses import asdict, dataclass
from typing import Callable, Literal, Optional, Sequence, Tuple

import numpy as np
import tyro

import contract
from toy_env import ToyCausalNav, ToyEnvConfig


@dataclass
class Args:
    policy: str = "runs/dwbc/policy.pt"
    """policy artifact to evaluate"""
    split: Optional[Tuple[str, ...]] = None
    """what to evaluate on (one JSON each): `train`, `heldout`, or CausalWorld spaces `A`/`B`; default: all the env has"""
    space: Optional[Tuple[str, ...]] = None
    """CausalWorld variable spaces to evaluate on (`A` in-distribution, `B` out-of-distribution); same as --split"""
    env: Optional[str] = None
    """env id to evaluate on; must match the env recorded in the policy (or in --env-dataset)"""
    classes: Optional[Tuple[int, ...]] = None
    """explicit classes of c (overrides --split)"""
    episodes: int = 100
    """number of evaluation episodes, spread evenly over the classes"""
    seed: int = 10_000
    """evaluation seed (keep it apart from data and training seeds)"""
    env_dataset: Optional[str] = None
    """evaluate on the env described by this dataset's metadata instead of the one recorded in the policy"""
    out: Optional[str] = None
    """result JSON path; `{split}` in it is replaced by the split (default: beside the policy, eval_<split>.json)"""
    method: Optional[str] = None
    """label for the result (default: the method recorded in the policy)"""
    reference: Optional[Literal["expert", "random"]] = None
    """evaluate the env's own goal-seeking controller or uniform-random actions instead of --policy
    (reference rows of the result table; needs --env-dataset)"""


DATASET_ONLY = ("schema_version", "collect_args", "seed", "versions", "split")


def backend(spec: dict) -> str:
    return spec["env_id"].partition(":")[0]


def make_env(spec: dict):
    """Build the toy env a dataset's metadata describes."""
    if spec["env_id"] == "toy":
        return ToyCausalNav(spec["env_n_classes"], ToyEnvConfig(**spec["env_config"]))
    raise ValueError(f"make_env builds the toy env only, not '{spec['env_id']}'")


def env_spec(meta: dict) -> dict:
    """The part of a dataset's metadata that describes the env (stored in every policy artifact)."""
    return {k: v for k, v in meta.items() if k not in DATASET_ONLY}


def default_splits(spec: dict) -> tuple:
    if backend(spec) == "cw":
        return ("A", "B")
    return ("train", "heldout") if spec.get("heldout_classes") else ("train",)


def split_classes(spec: dict, split: str, classes: Optional[Sequence[int]] = None) -> list:
    if classes:
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


def rollout_toy(env: ToyCausalNav, policy: Callable, classes: Sequence[int], episodes: int, seed: int):
    """Run `episodes` episodes in parallel (classes assigned round-robin); returns (returns [E], classes [E])."""
    rng = np.random.default_rng(seed)
    ep_classes = np.array([classes[i % len(classes)] for i in range(episodes)])
    s = env.sample_start(episodes, rng)
    returns = np.zeros(episodes)
    for _ in range(env.config.episode_len):
        a = np.clip(policy(s), env.action_low, env.action_high)
        s = env.transition(s, a, env.sample_u(ep_classes, rng))
        returns += env.reward(s)
    return returns, ep_classes


def run_split(policy: Callable, spec: dict, split: str, classes: Sequence[int], episodes: int, seed: int) -> dict:
    """Roll out `policy` on one split; returns {'returns', 'episode_classes'[, 'success']} (numpy arrays)."""
    if backend(spec) == "dmc":
        import dmc_env
        return dmc_env.rollout(spec, policy, classes, episodes, seed)
    if backend(spec) == "cw":
        import cw_env
        return cw_env.rollout(spec, policy, split, episodes, seed)
    env = make_env(spec)
    bad = [c for c in classes if not 0 <= c < env.n_classes]
    if bad:
        raise ValueError(f"classes {bad} are outside the env's {env.n_classes} classes")
    returns, ep_classes = rollout_toy(env, policy, classes, episodes, seed)
    return {"returns": returns, "episode_classes": ep_classes}


def evaluate_policy(policy: Callable, spec: dict, classes: Sequence[int], episodes: int, seed: int, split: str = "train"):
    """(returns, episode classes) of `policy` on `classes` (CausalWorld: on variable space `split`)."""
    out = run_split(policy, spec, split, classes, episodes, seed)
    return out["returns"], out["episode_classes"]


def check_dims(path: str, art: dict, spec: dict) -> None:
    cfg = art["config"]
    if (cfg["obs_dim"], cfg["act_dim"]) != (spec["obs_dim"], spec["act_dim"]):
        raise contract.ContractError(
            f"{path}: policy expects obs_dim={cfg['obs_dim']}, act_dim={cfg['act_dim']} but env '{spec['env_id']}' "
            f"has obs_dim={spec['obs_dim']}, act_dim={spec['act_dim']}")


def reference_policy(kind: str, spec: dict, seed: int) -> Callable:
    """The env's expert (toy: its goal-seeking controller; DeepMind Control: the most trained behaviour snapshot;
    CausalWorld: the shipped PPO expert), an upper reference, or uniform random actions (a lower one)."""
    if backend(spec) == "dmc":
        import dmc_env
        return dmc_env.reference_policy(spec, kind, seed)
    if backend(spec) == "cw":
        import cw_env
        return cw_env.reference_policy(spec, kind, seed)
    env = make_env(spec)
    if kind == "expert":
        return env.expert_action
    rng = np.random.default_rng(seed + 1)
    return lambda obs: rng.uniform(env.action_low, env.action_high, size=(len(obs), env.act_dim))


def main(args: Args) -> list:
    if args.reference:
        if args.env_dataset is None:
            raise ValueError("--reference needs --env-dataset (the env to run the reference policy in)")
        spec = env_spec(contract.load_dataset(args.env_dataset)["metadata"])
        art = {"method": f"reference_{args.reference}", "seed": 0, "dataset_fingerprint": None}
        policy = reference_policy(args.reference, spec, args.seed)
    else:
        art = contract.load_policy(args.policy)
        spec = art["env"] if args.env_dataset is None else env_spec(contract.load_dataset(args.env_dataset)["metadata"])
        check_dims(args.policy, art, spec)
        policy = contract.build_policy(art)
    if args.env is not None and args.env != spec["env_id"]:
        raise ValueError(f"--env {args.env} does not match the env of the policy/dataset ({spec['env_id']})")
    splits = args.space or args.split or default_splits(spec)
    if len(splits) > 1 and args.out and "{split}" not in args.out:
        raise ValueError("with several splits, --out must contain {split}")
    return [evaluate_split(args, art, spec, policy, split) for split in splits]


def evaluate_saved(policy: str, spec: dict, episodes: int, out: str) -> list:
    """Evaluate a just-saved policy on every split its env has (train/heldout, or CausalWorld's spaces A and B)."""
    return main(Args(policy=policy, split=default_splits(spec), episodes=episodes, out=out))


def evaluate_split(args: Args, art: dict, spec: dict, policy: Callable, split: str) -> dict:
    classes = split_classes(spec, split, args.classes)
    out = run_split(policy, spec, split, classes, args.episodes, args.seed)
    returns, ep_classes = out["returns"], out["episode_classes"]
    split = split if not args.classes else "classes_" + "_".join(map(str, classes))
    result = {"method": args.method or art["method"], "seed": art["seed"], "env": spec["env_id"], "split": split,
              "classes": classes, "returns": returns.tolist(),
              "episode_classes": None if ep_classes is None else np.asarray(ep_classes).tolist(),
              "mean_return": float(returns.mean()), "std_return": float(returns.std()), "episodes": args.episodes,
              "eval_seed": args.seed, "policy": None if args.reference else args.policy,
              "dataset_fingerprint": art["dataset_fingerprint"],
              "args": asdict(args), "train_args": art.get("train_args", {}),
              "augmented_de_over_du": art.get("augmented_de_over_du")}
    if out.get("success") is not None:
        result.update(success=np.asarray(out["success"]).tolist(), mean_success=float(np.mean(out["success"])))
    default = f"eval_{result['method']}_{split}.json" if args.reference else os.path.join(os.path.dirname(args.policy), f"eval_{split}.json")
    path = args.out.replace("{split}", split) if args.out else default
    contract.save_json(path, result)
    extra = f", fractional success {result['mean_success']:.3f}" if "mean_success" in result else ""
    print(f"{result['method']} (seed {result['seed']}) on {spec['env_id']} {split} classes {classes}: "
          f"return {returns.mean():.2f} ± {returns.std():.2f}{extra} over {args.episodes} episodes -> {path}")
    return result


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError, NotImplementedError) as e:
        sys.exit(f"error: {e}")
