"""Choose a method's training budget without rollouts (docs/budget.md): the held-out error of its expert actions.

A practitioner has no rollouts to pick the number of gradient steps with. This stage picks it from data alone, the
same way for every method: D_E episodes are held out of training (cv_split.py), the method is trained on the rest
with its usual trainer and its policy is saved at each budget b, and

    score(b) = (1/|F|) Σ_{k ∈ F}  mean_{(s, a) ∈ H_k} (1/|A|) ‖ n(π_b^{-k}(s)) − n(a) ‖²,     choice = argmin_b score(b)

where F are the folds used (--fold-ids, of a --folds split), H_k fold k's held-out D_E episodes, π_b^{-k} the
deterministic policy after b steps trained without them, and n(a) = 2 (a − low) / (high − low) − 1 the action scaled
to [-1, 1] by the dataset's bounds (select_sampler.py's held-out score, over budgets instead of samplers). Ties go
to the smaller budget. The choice is then applied to the runs trained on all of D_all: for every seed and split,
that seed's result at the chosen budget is copied to --out-result with method `<method>_sel` (the budget a
practitioner would have used), its other facts unchanged, plus `budget_selection` {budget, rule, record}.

Inputs (path templates; `{fold}`, `{budget}`, `{seed}` and `{split}` are filled in):
  --heldout      fold k's held-out D_E episodes (cv_split.py --heldout-out);
  --fold-policy  the policy after b steps trained without fold k's episodes (e.g. a run's policy_step{budget}.pt);
  --last-policy  optional: the policy at the largest budget where the run saved it as policy.pt instead;
  --results      the full-data result JSON of budget b, seed s, split (runner --budgets' files).
Before scoring, the wiring is checked: each held-out file is fold k of a cv_split.py run on --dataset (its source
fingerprint), holds D_E rows only; each fold policy was trained after exactly b steps (`policy_step`), is the method's
(`method` is --method or --method_b<b>), and its training dataset (the artifact's `dataset`, read and fingerprinted)
is fold k's training part of the same split (raw, or augmented from it): no held-out episode reached it; each result
is --method's at budget b, seed s, split, and none is a selection already.

Outputs, written only after every input has passed: --out, JSON: rule, of_method, budgets, fold_ids, folds, cv_seed,
scores {budget: {per_fold, mean}}, choice, heldout episodes and rows per fold, inputs; it has no `method`, `seed`,
`split` or `returns` key, so report.py skips it beside the results. --out-result per seed and split.
"""

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from select_sampler import action_mse, cv_record, fill, read_result
from training.policy import check_dims

RULE = ("held-out expert-action error: D_E episodes of the folds used are held out of training (cv_split.py); the "
        "method's policy after each budget b, trained without them, is scored by the mean squared error between its "
        "deterministic action and the held-out expert's recorded action, both scaled to [-1, 1] by the dataset's "
        "action bounds (mean over rows and action dims), averaged over the folds; choice = the lowest score, ties to "
        "the smaller budget")


@dataclass
class Args:
    method: str = "dwbc"
    """the method whose budget is chosen (the `method` of its policies and results, e.g. bc_exp, dwbc, oilca)"""
    dataset: str = "data/toy.npz"
    """the full dataset D_all (raw), split by cv_split.py"""
    folds: int = 3
    """number of folds K of the cv_split.py split"""
    fold_ids: Tuple[int, ...] = (0,)
    """the folds used (each in [0, K)): one is a validation set of D_E episodes, all K a cross-validation"""
    budgets: Tuple[int, ...] = (5000, 20000, 50000, 100000)
    """the candidate budgets (policy gradient steps)"""
    heldout: str = "data/toy_cv3_f{fold}_heldout.npz"
    """template: fold k's held-out D_E episodes"""
    fold_policy: str = "runs/toy/bsel_dwbc_f{fold}_b100000_s0/policy_step{budget}.pt"
    """template: the policy after {budget} steps trained on fold k's training part"""
    last_policy: Optional[str] = None
    """template: the policy at the largest budget, where the run saved it elsewhere (its policy.pt)"""
    results: str = "results/toy/dwbc_b{budget}_s{seed}_{split}.json"
    """template: the full-data result of budget b, seed s and split"""
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    """training seeds of the full-data results"""
    splits: Tuple[str, ...] = ("train", "heldout")
    """evaluation splits of the full-data results"""
    out: str = "results/toy/budget_selection_dwbc.json"
    """output: the selection record (JSON)"""
    out_result: str = "results/toy/dwbc_sel_s{seed}_{split}.json"
    """template: output, seed s's result at the chosen budget, as method <method>_sel"""
    threads: int = 1
    """torch CPU threads"""


def check_args(args: Args) -> None:
    checks.fields(args, method=checks.LABEL, folds=checks.Int(2), budgets=checks.COUNT, seeds=checks.SEED,
                  threads=checks.COUNT)
    for flag, values in (("--fold-ids", args.fold_ids), ("--budgets", args.budgets), ("--seeds", args.seeds),
                         ("--splits", args.splits)):
        if not values:
            raise ValueError(f"{flag} needs at least one value")
        if len(set(values)) != len(values):
            raise ValueError(f"{flag} lists a value twice: {list(values)}")
    bad = [k for k in args.fold_ids if not 0 <= k < args.folds]
    if bad:
        raise ValueError(f"--fold-ids {bad}: each must be in [0, --folds {args.folds})")
    templates = [("--heldout", args.heldout, ("fold",)), ("--fold-policy", args.fold_policy, ("fold", "budget")),
                 ("--results", args.results, ("budget", "seed", "split")),
                 ("--out-result", args.out_result, ("seed", "split"))]
    if args.last_policy is not None:
        templates.append(("--last-policy", args.last_policy, ("fold",)))
    for flag, template, names in templates:
        missing = [n for n in names if "{" + n + "}" not in template]
        if missing:
            raise ValueError(f"{flag} {template} must contain " + " and ".join("{" + n + "}" for n in missing))


def policy_path(args: Args, fold: int, budget: int) -> str:
    if args.last_policy is not None and budget == max(args.budgets):
        return fill(args.last_policy, fold=fold)
    return fill(args.fold_policy, fold=fold, budget=budget)


def of_method(name, method: str, budget: int) -> bool:
    """A policy or result label is the method's at this budget: `method` itself or `method_b<budget>`."""
    return name in (method, f"{method}_b{budget}")


def check_fold_policy(path: str, art: dict, args: Args, budget: int, fold_rec: dict, meta: dict,
                      trained_on: Dict[str, dict]) -> None:
    """A fold policy: the method's, after `budget` steps, trained on the fold's training part (raw or augmented)."""
    if not of_method(art.get("method"), args.method, budget):
        raise contract.ContractError(f"{path}: a '{art.get('method')}' policy, not --method {args.method}")
    if art.get("policy_step") != budget:
        raise contract.ContractError(f"{path}: the policy after {art.get('policy_step')} steps, not {budget} "
                                     f"(--fold-policy, --budgets)")
    check_dims(path, art, envs.env_spec(meta))
    src = art.get("dataset")
    if not isinstance(src, str) or not os.path.isfile(src):
        raise contract.ContractError(f"{path}: its training dataset {src!r} is not a file here (needed to check that "
                                     f"no held-out episode was trained on)")
    if src not in trained_on:
        data = envs.load_dataset(src)
        trained_on[src] = {"fingerprint": contract.fingerprint(data), "cv_split": data["metadata"].get("cv_split")}
    got = trained_on[src]
    if got["fingerprint"] != art.get("dataset_fingerprint"):
        raise contract.ContractError(f"{path}: trained on another dataset than {src} holds now (fingerprint)")
    rec = got["cv_split"] if isinstance(got["cv_split"], dict) else {}
    want = {"part": "train", "fold": fold_rec["fold"], "folds": fold_rec["folds"], "seed": fold_rec["seed"],
            "source_fingerprint": fold_rec["source_fingerprint"], "heldout_episodes": fold_rec["heldout_episodes"]}
    wrong = [k for k, v in want.items() if rec.get(k) != v]
    if wrong:
        raise contract.ContractError(f"{path}: trained on {src}, which is not fold {fold_rec['fold']}'s training part "
                                     f"of this split ({', '.join(wrong)} differ): it may have seen held-out episodes")


def load_result(path: str, args: Args, budget: int, seed: int, split: str) -> dict:
    r = read_result(path)
    if "budget_selection" in r:
        raise contract.ContractError(f"{path}: a selected result already; give the results of each budget")
    if not of_method(r.get("method"), args.method, budget):
        raise contract.ContractError(f"{path}: method {r.get('method')!r}, not --method {args.method}")
    if (r.get("policy_step"), r.get("seed"), r.get("split")) != (budget, seed, split):
        raise contract.ContractError(f"{path}: the result of policy step {r.get('policy_step')}, seed {r.get('seed')}, "
                                     f"split {r.get('split')!r}, not {budget}, {seed}, {split!r}")
    return r


@contract.all_or_nothing
@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    check_args(args)
    F, B = list(args.fold_ids), sorted(args.budgets)
    heldouts = {k: fill(args.heldout, fold=k) for k in F}
    policies = {(k, b): policy_path(args, k, b) for k in F for b in B}
    results = {(b, s, sp): fill(args.results, budget=b, seed=s, split=sp) for b in B for s in args.seeds
               for sp in args.splits}
    outs = {(s, sp): fill(args.out_result, seed=s, split=sp) for s in args.seeds for sp in args.splits}
    contract.check_paths({"--dataset": args.dataset, "--heldout": list(heldouts.values()),
                          "--fold-policy": list(policies.values()), "--results": list(results.values())},
                         files={"--out": args.out, "--out-result": list(outs.values())})
    torch.set_num_threads(args.threads)
    data = envs.load_dataset(args.dataset)
    fp, meta = contract.fingerprint(data), data["metadata"]

    held, fold_recs = {}, {}
    for k in F:
        h = envs.load_dataset(heldouts[k])
        fold_recs[k] = cv_record(heldouts[k], h, "heldout", k, args.folds, fp)
        if not h["expert"].all():
            raise contract.ContractError(f"{heldouts[k]}: holds non-expert rows; a held-out file holds D_E episodes only")
        held[k] = h
    seeds = {fold_recs[k].get("seed") for k in F}
    if len(seeds) != 1:
        raise contract.ContractError(f"--heldout: the folds come from cv_split.py runs with different seeds {sorted(seeds)}")

    trained_on: Dict[str, dict] = {}
    per_fold: Dict[int, List[float]] = {b: [] for b in B}
    for k in F:
        for b in B:
            art = contract.load_policy(policies[k, b])
            check_fold_policy(policies[k, b], art, args, b, fold_recs[k], meta, trained_on)
            pred = contract.build_policy(art)(held[k]["observations"])
            per_fold[b].append(action_mse(pred, held[k]["actions"], meta["action_low"], meta["action_high"]))
    full = {key: load_result(path, args, *key) for key, path in results.items()}  # every result checked first
    scores = {b: float(np.mean(per_fold[b])) for b in B}
    choice = min(B, key=lambda b: (scores[b], b))
    record = {"rule": RULE, "of_method": args.method, "budgets": B, "folds": args.folds, "fold_ids": F,
              "cv_seed": seeds.pop(), "choice": choice,
              "scores": {str(b): {"per_fold": per_fold[b], "mean": scores[b]} for b in B},
              "heldout_episodes": [fold_recs[k]["heldout_episodes"] for k in F],
              "heldout_rows": [int(len(held[k]["rewards"])) for k in F],
              "inputs": {"dataset": args.dataset, "dataset_fingerprint": fp, "heldout": list(heldouts.values()),
                         "fold_policy": {f"{k}:{b}": p for (k, b), p in policies.items()},
                         "results": args.results, "seeds": list(args.seeds), "splits": list(args.splits)}}
    print(f"{args.method}: held-out expert-action error per budget (folds {F})")
    for b in B:
        print(f"  {b:>9,}  " + "  ".join(f"{x:.5f}" for x in per_fold[b]) + f"  mean {scores[b]:.5f}"
              + ("  <- chosen" if b == choice else ""))

    for path in list(outs.values()) + [args.out]:
        contract.claim(path)  # a second writer to the same output is refused while this run goes on
    for (s, sp), path in outs.items():
        src = results[choice, s, sp]
        contract.save_json(path, {**full[choice, s, sp], "method": f"{args.method}_sel", "source_result": src,
                                  "budget_selection": {"budget": choice, "rule": RULE, "record": args.out}})
    contract.save_json(args.out, record)
    print(f"wrote {args.out} and {len(outs)} results ({next(iter(outs.values()))} …): budget {choice:,}")
    return record


if __name__ == "__main__":
    cli.run(main, Args)
