"""Collect an offline dataset D_all = D_E ∪ D_U with the auxiliary label c (OILCA §4, §5; Table 5).

Backends (`--env`), each owning its recipe and options:
  * `toy`                 the 2-D causal MDP of toy_env.py (§5.1), options below and `--toy.*`;
  * `dmc:<domain>-<task>` DeepMind Control (§5.2): c = one of three Gaussian action perturbations, behaviour
                          policies = train_behavior.py snapshots (`--dmc.*`, see dmc_env.py);
  * `cw:<task>`           CausalWorld (§5.3): c = one of three do-interventions inside variable space A,
                          behaviour policies = the shipped PPO experts with noise (`--cw.*`, see cw_env.py).
Every backend returns the same arrays; this file does the D_E split, the metadata and the checked, atomic write.

Toy recipe:
  * classes c = 0 … n_classes-1 appear in the data, `episodes_per_class` episodes each; the env also knows
    `heldout_classes` further classes that never appear (for out-of-distribution evaluation);
  * behavior policies of graded quality, assigned round-robin to the episodes of every class: the env's
    goal-seeking controller plus Gaussian action noise of std `noise_levels[i]`, and (with `random_policy`)
    uniform random actions;
  * the paper's split: the top `positive_frac` (20%) episodes by return are positives; each positive joins D_E
    with probability `expert_prob` (1/10). If none is drawn, the best episode joins D_E, so |D_E| ≥ 1 episode.

Output: one `.npz` following CONTRACT.md (observations, actions, next_observations, rewards, terminals,
timeouts, episode_ids, aux, expert, episode_returns, exogenous, policy_ids, metadata). The same arguments
and seed give the same file byte for byte. An existing output with the same arguments is kept (use --force).
"""

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Tuple

import numpy as np
import tyro

import contract
from cw_env import CWConfig
from dmc_env import DMCConfig
from toy_env import ToyCausalNav, ToyEnvConfig


@dataclass
class Args:
    env: str = "toy"
    """environment id: `toy`, DeepMind Control `dmc:<domain>-<task>` or CausalWorld `cw:<task>`"""
    out: str = "data/toy.npz"
    """output dataset path"""
    seed: int = 0
    """seed of the data (start states, exogenous draws, action noise, the D_E draw)"""
    n_classes: int = 3
    """toy: number of classes C of the auxiliary variable c present in the data"""
    heldout_classes: int = 1
    """toy: extra classes the env knows that never appear in the data (unseen c for out-of-distribution tests)"""
    episodes_per_class: int = 100
    """toy: episodes collected for every class c"""
    noise_levels: Tuple[float, ...] = (0.1, 0.3, 0.6, 1.0)
    """toy: std of the Gaussian action noise of each goal-seeking behavior policy (graded quality)"""
    random_policy: bool = True
    """toy: also use a uniform-random behavior policy"""
    positive_frac: float = 0.2
    """fraction of episodes (top by return) that count as positives"""
    expert_prob: float = 0.1
    """probability that a positive episode joins D_E"""
    toy: ToyEnvConfig = field(default_factory=ToyEnvConfig)
    """parameters of the toy env (its seed fixes the dynamics, shared by every dataset seed)"""
    dmc: DMCConfig = field(default_factory=DMCConfig)
    """DeepMind Control options (dmc_env.py): behaviour snapshots, episodes, the perturbation table"""
    cw: CWConfig = field(default_factory=CWConfig)
    """CausalWorld options (cw_env.py): episodes, intervened features, behaviour mix"""
    force: bool = False
    """overwrite an existing output even if it was made with the same arguments"""


def parse_env_id(env_id: str) -> Tuple[str, str]:
    """'toy' -> ('toy', ''), 'dmc:cartpole-swingup' -> ('dmc', 'cartpole-swingup'), 'cw:pushing' -> ('cw', 'pushing')."""
    backend, _, name = env_id.partition(":")
    if backend not in ("toy", "dmc", "cw") or (backend == "toy") != (name == ""):
        raise ValueError(f"unknown env id '{env_id}': use toy, dmc:<domain>-<task> or cw:<task>")
    return backend, name


def behavior_table(args: Args) -> list:
    table = [{"name": "goal_seeking", "noise_std": float(s), "label": f"goal+N(0,{s}²)"} for s in args.noise_levels]
    if args.random_policy:
        table.append({"name": "uniform_random", "label": "uniform random"})
    if not table:
        raise ValueError("no behavior policy: give --noise-levels or --random-policy")
    return table


def collect_toy(args: Args) -> dict:
    """Roll all episodes in parallel; returns the dataset arrays (without the D_E split) and env spec."""
    rng = np.random.default_rng(args.seed)
    env = ToyCausalNav(args.n_classes + args.heldout_classes, args.toy)
    behaviors = behavior_table(args)
    E, T = args.n_classes * args.episodes_per_class, args.toy.episode_len
    classes = np.repeat(np.arange(args.n_classes), args.episodes_per_class)
    policy_ids = np.tile(np.arange(args.episodes_per_class) % len(behaviors), args.n_classes)
    noise_std = np.array([b.get("noise_std", 0.0) for b in behaviors])[policy_ids][:, None]
    is_random = np.array([b["name"] == "uniform_random" for b in behaviors])[policy_ids][:, None]

    obs = np.zeros((E, T, 2)); act = np.zeros((E, T, 2)); nxt = np.zeros((E, T, 2))
    rew = np.zeros((E, T)); exo = np.zeros((E, T, 2))
    s = env.sample_start(E, rng)
    for t in range(T):
        a_goal = env.expert_action(s) + noise_std * rng.normal(size=(E, 2))
        a_rand = rng.uniform(env.action_low, env.action_high, size=(E, 2))
        a = np.clip(np.where(is_random, a_rand, a_goal), env.action_low, env.action_high)
        u = env.sample_u(classes, rng)
        s_next = env.transition(s, a, u)
        obs[:, t], act[:, t], nxt[:, t], exo[:, t] = s, a, s_next, u
        rew[:, t] = env.reward(s_next)
        s = s_next

    # store float32 and make s'_t == s_{t+1} exact after the cast (the contract checks it)
    obs, act, nxt = obs.astype(np.float32), act.astype(np.float32), nxt.astype(np.float32)
    obs[:, 1:] = nxt[:, :-1]
    rew = rew.astype(np.float32)
    returns = rew.astype(np.float64).sum(axis=1)
    timeouts = np.zeros((E, T), bool)
    timeouts[:, -1] = True  # the end of a toy episode is a time limit, never a terminal
    arrays = {
        "observations": obs.reshape(E * T, 2),
        "actions": act.reshape(E * T, 2),
        "next_observations": nxt.reshape(E * T, 2),
        "rewards": rew.reshape(E * T),
        "terminals": np.zeros(E * T, bool),
        "timeouts": timeouts.reshape(E * T),
        "episode_ids": np.repeat(np.arange(E), T).astype(np.int64),
        "aux": np.repeat(classes, T).astype(np.int64),
        "episode_returns": np.repeat(returns, T).astype(np.float32),
        "exogenous": exo.reshape(E * T, 2).astype(np.float32),
        "policy_ids": np.repeat(policy_ids, T).astype(np.int64),
    }
    spec = env.spec()
    spec.update(aux_meaning="index of the exogenous-noise class: u ~ N(mu(c), diag sigma2(c)) every step",
                heldout_classes=list(range(args.n_classes, args.n_classes + args.heldout_classes)),
                class_table={"u_mean": env.u_mean.tolist(), "u_var": env.u_var.tolist()},
                target=env.target.tolist(), behavior_policies=behaviors)
    return {"arrays": arrays, "returns": returns, "classes": classes, "policy_ids": policy_ids, "spec": spec, "rng": rng,
            "behaviors": behaviors}


def split_expert(returns: np.ndarray, positive_frac: float, expert_prob: float, rng: np.random.Generator):
    """Paper split: top `positive_frac` episodes by return are positives; each joins D_E w.p. `expert_prob`.
    Returns (positive mask, expert mask) over episodes; at least one episode (the best) is in D_E."""
    if not 0 < positive_frac <= 1 or not 0 <= expert_prob <= 1:
        raise ValueError("need 0 < positive_frac <= 1 and 0 <= expert_prob <= 1")
    n_pos = max(1, int(round(positive_frac * len(returns))))
    order = np.argsort(-returns, kind="stable")
    positive = np.zeros(len(returns), bool)
    positive[order[:n_pos]] = True
    expert = positive & (rng.random(len(returns)) < expert_prob)
    if not expert.any():
        expert[order[0]] = True
    return positive, expert


def recipe_table(returns, classes, policy_ids, positive, expert, behaviors) -> str:
    """The D_E / D_U recipe as a text table (per behavior policy and per class)."""
    lines = [f"{'group':<34}{'episodes':>9}{'return mean ± std':>22}{'positives':>10}{'in D_E':>8}"]
    groups = [(f"policy {i}: {b.get('label', b['name'])}"[:33], policy_ids == i) for i, b in enumerate(behaviors)]
    groups += [(f"class c={c}", classes == c) for c in np.unique(classes)]
    groups += [("D_E", expert), ("D_U", ~expert), ("all", np.ones_like(expert))]
    for name, m in groups:
        r = returns[m]
        lines.append(f"{name:<34}{m.sum():>9}{r.mean():>14.2f} ± {r.std():<6.2f}{(positive & m).sum():>10}{(expert & m).sum():>8}")
    return "\n".join(lines)


def backend_args(args: Args, backend: str) -> dict:
    """The arguments that shape this backend's data (other backends' options are left out of the record)."""
    arg_dict = json.loads(json.dumps(asdict(args)))
    arg_dict.pop("force"), arg_dict.pop("out")
    toy_only = ("n_classes", "heldout_classes", "episodes_per_class", "noise_levels", "random_policy", "toy")
    for key in ("toy", "dmc", "cw"):
        if key != backend:
            arg_dict.pop(key)
    if backend != "toy":
        for key in toy_only:
            arg_dict.pop(key, None)
    return arg_dict


def collect(args: Args, backend: str, name: str) -> dict:
    if backend == "toy":
        if args.n_classes < 1 or args.episodes_per_class < 1 or args.heldout_classes < 0:
            raise ValueError("need n_classes >= 1, episodes_per_class >= 1, heldout_classes >= 0")
        return collect_toy(args)
    if backend == "dmc":
        import dmc_env
        return dmc_env.collect(args.dmc, name, args.seed)
    import cw_env
    return cw_env.collect(args.cw, name, args.seed)


def main(args: Args) -> dict:
    backend, name = parse_env_id(args.env)
    arg_dict = backend_args(args, backend)
    if os.path.exists(args.out) and not args.force:
        old = contract.load_dataset(args.out)["metadata"]
        if old["collect_args"] == arg_dict:
            print(f"{args.out} exists with the same arguments: kept (use --force to rebuild)")
            return {"path": args.out, "skipped": True}
        raise SystemExit(f"error: {args.out} exists and was collected with other arguments: pass --force or another --out")

    t0 = time.time()
    out = collect(args, backend, name)
    positive, expert = split_expert(out["returns"], args.positive_frac, args.expert_prob, out["rng"])
    arrays = out["arrays"]
    arrays["expert"] = expert[arrays["episode_ids"]]
    meta = {"n_classes": args.n_classes, **out["spec"], "schema_version": contract.SCHEMA_VERSION,
            "collect_args": arg_dict, "seed": args.seed, "versions": contract.package_versions(),
            "split": {"positive_frac": args.positive_frac, "expert_prob": args.expert_prob,
                      "n_positive_episodes": int(positive.sum()), "n_expert_episodes": int(expert.sum())}}
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    contract.validate_dataset(args.out, arrays)  # never write a file that the next stage would refuse
    contract.save_npz(args.out, arrays)
    table = recipe_table(out["returns"], out["classes"], out["policy_ids"], positive, expert, out["behaviors"])
    print(table)
    seconds = time.time() - t0
    print(f"wrote {args.out}: {len(arrays['rewards'])} transitions, {len(expert)} episodes, "
          f"{expert.sum()} in D_E ({seconds:.1f}s, {len(arrays['rewards']) / seconds:.0f} env steps/s)")
    return {"path": args.out, "skipped": False, "n_transitions": len(arrays["rewards"]), "seconds": seconds,
            "n_expert_episodes": int(expert.sum()), "table": table, "returns": out["returns"], "expert": expert}


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError, NotImplementedError) as e:
        sys.exit(f"error: {e}")
