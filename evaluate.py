"""Roll out a saved policy and write one JSON result per run (OILCA §5: returns of the learned policy).

The policy artifact (docs/contract.md, `kind: policy`) is self-contained: normalisation, action bounds and the env it
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

Rollouts go through envs.py to the env's backend: `toy` (vectorised over episodes), `dmc:` (1000-step episodes
in lockstep) and `cw:` (which also reports CausalWorld's fractional success). The result JSON is written by
policy.evaluate_and_save, the same code the trainers' `--final-eval` runs.

Output JSON: method, seed (training seed), env, split, classes, returns (one per episode), episode_classes,
mean_return, std_return, success / mean_success (CausalWorld), episodes, eval_seed, policy,
dataset_fingerprint, args, train_args. A policy with non-finite numbers, an env record that cannot be rolled out
(a behaviour snapshot: pass --env-dataset), rollouts that return NaN, or an --out that is an input are refused with
one line naming the file or flag, and nothing is written.
"""

import os
from dataclasses import asdict, dataclass
from typing import Literal, Optional, Tuple

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from training import policy as policy_mod


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
    seed: int = policy_mod.EVAL_SEED
    """evaluation seed (keep it apart from data and training seeds)"""
    env_dataset: Optional[str] = None
    """evaluate on the env described by this dataset's metadata instead of the one recorded in the policy"""
    out: Optional[str] = None
    """result JSON path; `{split}` in it is replaced by the split (not given: beside the policy, eval_<split>.json)"""
    method: Optional[str] = None
    """label for the result (not given: the method recorded in the policy)"""
    reference: Optional[Literal["expert", "random"]] = None
    """evaluate the env's own goal-seeking controller or uniform-random actions instead of --policy
    (reference rows of the result table; needs --env-dataset)"""


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> list:
    checks.fields(args, episodes=checks.COUNT, seed=checks.SEED, classes=checks.COUNT0, method=checks.LABEL)
    if args.reference:
        if args.env_dataset is None:
            raise ValueError("--reference needs --env-dataset (the env to run the reference policy in)")
        spec = envs.env_spec(envs.load_dataset(args.env_dataset)["metadata"])
        info = {"method": f"reference_{args.reference}", "seed": 0, "dataset_fingerprint": None, "policy": None}
        policy = envs.reference_policy(spec, args.reference, args.seed)
    else:
        art = contract.load_policy(args.policy)
        spec = art["env"] if args.env_dataset is None else envs.env_spec(envs.load_dataset(args.env_dataset)["metadata"])
        if args.env_dataset is None:  # a dataset's env was checked by load_dataset
            try:
                envs.check_spec(spec)
            except (ValueError, KeyError, TypeError) as e:
                raise contract.ContractError(f"{args.policy}: its env record cannot be rolled out: {e}") from None
        policy_mod.check_dims(args.policy, art, spec)
        info = policy_mod.artifact_info(art, args.policy)
        policy = contract.build_policy(art)
    if args.env is not None and args.env != spec["env_id"]:
        raise ValueError(f"--env {args.env} does not match the env of the policy/dataset ({spec['env_id']})")
    if args.method:
        info["method"] = args.method
    splits = args.space or args.split or envs.default_splits(spec)
    for split in splits:
        try:
            envs.split_classes(spec, split, args.classes)
        except ValueError as e:
            raise ValueError(f"{'--classes' if args.classes else f'--split {split}'}: {e}") from None
    if len(splits) > 1 and args.out and "{split}" not in args.out:
        raise ValueError("with several splits, --out must contain {split}")
    if args.out:
        out = args.out
    elif args.reference:
        out = f"eval_{info['method']}_{{split}}.json"
    else:
        out = os.path.join(os.path.dirname(args.policy), "eval_{split}.json")
    names = [split if not args.classes else "classes_" + "_".join(map(str, args.classes)) for split in splits]
    paths = [out.replace("{split}", name) for name in names]
    contract.check_paths({"--policy": None if args.reference else args.policy, "--env-dataset": args.env_dataset},
                         files={"--out": paths})
    for path in dict.fromkeys(paths):
        contract.claim(path)  # a second writer to the same result file is refused while this one runs
    return [policy_mod.evaluate_and_save(policy, info, spec, split, args.classes, args.episodes, args.seed, out, asdict(args))
            for split in splits]


if __name__ == "__main__":
    cli.run(main, Args, refused=(ValueError, NotImplementedError))
