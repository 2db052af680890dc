"""Collect an offline dataset D_all = D_E ∪ D_U with the auxiliary label c (OILCA §4, §5; Table 5).

Backends (`--env`, dispatched by envs.py), each owning its recipe and options:
  * `toy`                 the 2-D causal MDP of toy_env.py (§5.1), options `--toy.*` (recipe below) and `--toy.env.*`;
  * `dmc:<domain>-<task>` DeepMind Control (§5.2): c = one of three Gaussian action perturbations, behaviour
                          policies = train_behavior.py snapshots (`--dmc.*`, see dmc_env.py);
  * `cw:<task>`           CausalWorld (§5.3): c = one of three do-interventions inside variable space A,
                          behaviour policies = the shipped PPO experts with noise (`--cw.*`, see cw_env.py).
Every backend returns the same arrays; this file does the D_E split, the metadata and the checked, atomic write.

Toy recipe (toy_env.collect):
  * classes c = 0 … n_classes-1 appear in the data, `--toy.episodes-per-class` episodes each; the env also knows
    `--toy.heldout-classes` further classes that never appear (for out-of-distribution evaluation);
  * behavior policies of graded quality, assigned round-robin to the episodes of every class: the env's
    goal-seeking controller plus Gaussian action noise of std `--toy.noise-levels[i]`, and (with
    `--toy.random-policy`) uniform random actions.
Every backend, the paper's split: the top `positive_frac` (20%) episodes by return are positives; each positive joins D_E
    with probability `expert_prob` (1/10). If none is drawn, the best episode joins D_E, so |D_E| ≥ 1 episode.
    `--expert-episodes N` instead puts exactly N positives, drawn at random, in D_E (the paper's Table 5 gives |D_E|
    per task, e.g. 2 of cartpole-swingup's 40 episodes; the runner's paper protocol passes it).

Output: one `.npz` following docs/contract.md (observations, actions, next_observations, rewards, terminals,
timeouts, episode_ids, aux, expert, episode_returns, exogenous, policy_ids, metadata). The same arguments
and seed give the same file byte for byte. An existing output with the same arguments is kept (use --force).
Every flag is checked before collecting; while it runs, --out is locked (a second collection to it is refused).
CausalWorld collections are long (hours for towers): every finished batch of `--cw.lockstep` episodes is kept in
`<out>.parts/` until the dataset is written, so a stopped collection run again with the same arguments (and code)
runs only the missing batches; `--cw.workers N` runs the batches in N processes. Neither changes a byte.
DeepMind Control collections likewise share their lockstep batches among `--dmc.workers N` processes (the same bytes;
not resumable: a stopped one starts again).
`--uncompressed` stores the arrays uncompressed, for datasets near or above the memory size: every stage then
memory-maps them (docs/contract.md), and a CausalWorld collection keeps its observations in `<out>.parts/` while it
runs. The arrays are the same as without it.
"""

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from envs.cw import CWConfig
from envs.dmc import DMCConfig
from envs.toy import ToyConfig, check_recipe


@dataclass
class Args:
    env: str = "toy"
    """environment id: `toy`, DeepMind Control `dmc:<domain>-<task>` or CausalWorld `cw:<task>`"""
    out: str = "data/toy.npz"
    """output dataset path"""
    seed: int = 0
    """seed of the data (start states, exogenous draws, action noise, the D_E draw)"""
    positive_frac: float = 0.2
    """fraction of episodes (top by return) that count as positives"""
    expert_prob: float = 0.1
    """probability that a positive episode joins D_E"""
    expert_episodes: Optional[int] = None
    """exactly this many positive episodes, drawn at random, join D_E (instead of each w.p. expert_prob)"""
    toy: ToyConfig = field(default_factory=ToyConfig)
    """toy recipe (toy_env.py): classes, episodes per class, behaviour noise levels, and the env's parameters (`--toy.env.*`)"""
    dmc: DMCConfig = field(default_factory=DMCConfig)
    """DeepMind Control options (dmc_env.py): behaviour snapshots, episodes, the perturbation table"""
    cw: CWConfig = field(default_factory=CWConfig)
    """CausalWorld options (cw_env.py): episodes, intervened features, behaviour mix"""
    force: bool = False
    """overwrite an existing output even if it was made with the same arguments"""
    uncompressed: bool = False
    """store the arrays uncompressed: every stage then memory-maps them instead of reading them into memory, and a
    CausalWorld collection keeps its observations in a file while it runs (datasets near or above the memory size;
    the arrays and so every result are the same, the file is larger)"""


def split_expert(returns: np.ndarray, positive_frac: float, expert_prob: float, rng: np.random.Generator,
                 n_expert: Optional[int] = None):
    """Paper split: top `positive_frac` episodes by return are positives; each joins D_E w.p. `expert_prob`, or,
    with `n_expert`, exactly n_expert of them drawn without replacement. Returns (positive mask, expert mask) over
    episodes; at least one episode (the best) is in D_E."""
    if not 0 < positive_frac <= 1 or not 0 <= expert_prob <= 1:
        raise ValueError("need 0 < positive_frac <= 1 and 0 <= expert_prob <= 1")
    n_pos = max(1, int(round(positive_frac * len(returns))))
    order = np.argsort(-returns, kind="stable")
    positive = np.zeros(len(returns), bool)
    positive[order[:n_pos]] = True
    if n_expert is not None:
        if not 1 <= n_expert <= n_pos:
            raise ValueError(f"--expert-episodes: {n_expert} is not between 1 and the {n_pos} positive episodes")
        expert = np.zeros(len(returns), bool)
        expert[rng.choice(order[:n_pos], n_expert, replace=False)] = True
        return positive, expert
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
        stats = f"{r.mean():>14.2f} ± {r.std():<6.2f}" if len(r) else f"{'–':>14}   {'':<6}"  # a group without episodes
        lines.append(f"{name:<34}{m.sum():>9}{stats}{(positive & m).sum():>10}{(expert & m).sum():>8}")
    return "\n".join(lines)


def backend_args(args: Args, backend: str) -> dict:
    """The arguments that shape this backend's data (other backends' options are left out of the record)."""
    arg_dict = json.loads(json.dumps(asdict(args)))
    arg_dict.pop("force"), arg_dict.pop("out"), arg_dict.pop("uncompressed")  # how it is stored: not the data
    if arg_dict["expert_episodes"] is None:
        arg_dict.pop("expert_episodes")  # datasets made before the flag existed keep their records
    if arg_dict.get("cw", {}).get("expert") == "shipped":
        arg_dict["cw"].pop("expert")  # datasets made before --cw.expert existed keep their records
    for key in ("cw", "dmc"):
        if key in arg_dict:
            arg_dict[key].pop("workers")  # how many processes collected: the bytes do not depend on it
    for key in envs.BACKENDS:
        if key != backend:
            arg_dict.pop(key, None)  # gym: has no collection options (its data comes from minari_import.py)
    return arg_dict


def check_args(args: Args, backend: str) -> None:
    """Every flag of this backend, and the output path, before anything is collected (one-line ValueError)."""
    checks.fields(args, seed=checks.SEED, positive_frac=checks.Real(0, 1, low_open=True), expert_prob=checks.UNIT,
                  expert_episodes=checks.COUNT)
    if backend == "toy":
        check_recipe(args.toy)
    elif backend == "dmc":
        checks.fields(args.dmc, "--dmc.", episodes=checks.COUNT, n_classes=checks.COUNT, noise_seed=checks.SEED,
                      noise_mean=checks.NON_NEGATIVE, noise_std_low=checks.NON_NEGATIVE,
                      noise_std_high=checks.Real(max(0.0, args.dmc.noise_std_low)), lockstep=checks.COUNT,
                      workers=checks.COUNT)
    else:
        checks.fields(args.cw, "--cw.", episodes=checks.COUNT, n_classes=checks.COUNT, noise_levels=checks.NON_NEGATIVE,
                      skip_frame=checks.COUNT, episode_len=checks.COUNT, lockstep=checks.COUNT, workers=checks.COUNT)
    snapshots = {"dmc": {"--dmc.snapshots": list(args.dmc.snapshots)},
                 "cw": {"--cw.snapshots": list(args.cw.snapshots), "--cw.expert-snapshot": args.cw.expert_snapshot}}
    contract.check_paths(snapshots.get(backend, {}), files={"--out": args.out})


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    try:
        backend, _ = envs.parse_env_id(args.env)
    except ValueError as e:
        raise ValueError(f"--env: {e}") from None
    check_args(args, backend)
    arg_dict = backend_args(args, backend)
    contract.claim(args.out)  # a second collection to the same --out is refused while this one runs
    if os.path.exists(args.out) and not args.force:
        old = envs.load_dataset(args.out)["metadata"]
        if old["collect_args"] == arg_dict:
            print(f"{args.out} exists with the same arguments: kept (use --force to rebuild)")
            return {"path": args.out, "skipped": True}
        raise SystemExit(f"error: {args.out} exists and was collected with other arguments: pass --force or another --out")

    t0 = time.time()
    parts = {"parts": args.out + ".parts", "spill": args.uncompressed} if backend == "cw" else {}  # kept for a resume
    out = envs.collect(args.env, getattr(args, backend, None), args.seed, **parts)
    positive, expert = split_expert(out["returns"], args.positive_frac, args.expert_prob, out["rng"],
                                    args.expert_episodes)
    arrays = out["arrays"]
    arrays["expert"] = expert[arrays["episode_ids"]]
    meta = {**out["spec"], "schema_version": contract.SCHEMA_VERSION,
            "collect_args": arg_dict, "seed": args.seed, "versions": contract.package_versions(),
            "split": {"positive_frac": args.positive_frac, "expert_prob": args.expert_prob,
                      **({"expert_episodes": args.expert_episodes} if args.expert_episodes else {}),
                      "n_positive_episodes": int(positive.sum()), "n_expert_episodes": int(expert.sum())}}
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    # observations spilled to <out>.parts (only with --uncompressed) are written block by block and checked as written
    envs.save_dataset(args.out, arrays, compress=not args.uncompressed)
    if parts:
        shutil.rmtree(parts["parts"], ignore_errors=True)  # the dataset is written: its batches are no longer needed
    table = recipe_table(out["returns"], out["classes"], out["policy_ids"], positive, expert, out["behaviors"])
    print(table)
    seconds = time.time() - t0
    print(f"wrote {args.out}: {len(arrays['rewards'])} transitions, {len(expert)} episodes, "
          f"{expert.sum()} in D_E ({seconds:.1f}s, {len(arrays['rewards']) / seconds:.0f} env steps/s)")
    return {"path": args.out, "skipped": False, "n_transitions": len(arrays["rewards"]), "seconds": seconds,
            "n_expert_episodes": int(expert.sum()), "table": table, "returns": out["returns"], "expert": expert}


if __name__ == "__main__":
    cli.run(main, Args, refused=(ValueError, NotImplementedError))
