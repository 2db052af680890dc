"""select_budget.py: the budget chosen without rollouts, by the held-out error of the expert's actions.

Fold policies are built by hand as policy artifacts (test_select.py's linear policies): at one budget the policy is
exactly the expert of the tiny dataset, at the others it is perturbed; full-data results are written by hand. The
runner's end-to-end run of the selection is in tests/test_runner.py (test_budget_study_…).
"""
import dataclasses
import json
import os

import numpy as np
import pytest

from oilca import contract
import envs
import select_budget
from conftest import one_line_error, run
from test_select import B_GOOD, FOLDS, W_GOOD, dataset, folds, linear_artifact  # noqa: F401 (fixtures)

BUDGETS = (10, 20, 30)


def write_inputs(root, dataset, folds, weights, method="dwbc", step_of=None, trained_on=None, seeds=(0, 1),
                 splits=("train", "heldout")):
    """Fold policies (weights = {budget: (W, b)}) for folds 0 and 1, and a full-data result per budget, seed and
    split whose returns encode them; returns select_budget.Args."""
    meta = envs.load_dataset(dataset)["metadata"]
    for k in (0, 1):
        train = trained_on or folds[k][0]
        fp = contract.fingerprint(envs.load_dataset(train))
        for b, (W, bias) in weights.items():
            art = linear_artifact(meta, W, bias, method=method, seed=0, dataset_fingerprint=fp, dataset=train,
                                  policy_step=(step_of or {}).get(b, b))
            contract.save_policy(os.path.join(root, f"f{k}", f"policy_step{b}.pt"), art)
    for b in weights:
        for s in seeds:
            for sp in splits:
                contract.save_json(os.path.join(root, "res", f"{method}_b{b}_s{s}_{sp}.json"),
                                   {"method": method, "seed": s, "split": sp, "policy_step": b, "env": "toy",
                                    "returns": [float(-b - s)], "mean_return": float(-b - s)})
    return select_budget.Args(
        method=method, dataset=dataset, folds=FOLDS, fold_ids=(0, 1), budgets=tuple(weights),
        heldout=folds[0][1].replace("f0_heldout", "f{fold}_heldout"),
        fold_policy=os.path.join(root, "f{fold}", "policy_step{budget}.pt"),
        results=os.path.join(root, "res", method + "_b{budget}_s{seed}_{split}.json"), seeds=seeds, splits=splits,
        out=os.path.join(root, "sel", "record.json"), out_result=os.path.join(root, "sel", method + "_sel_s{seed}_{split}.json"))


def perturbed(scale):
    return W_GOOD + scale, B_GOOD - scale


def test_the_budget_whose_policy_is_the_expert_is_chosen_and_its_results_copied(dataset, folds, tmp_path):  # noqa: F811
    args = write_inputs(str(tmp_path), dataset, folds, {10: perturbed(0.5), 20: (W_GOOD, B_GOOD), 30: perturbed(0.2)})
    rec = select_budget.main(args)
    assert rec["choice"] == 20 and rec["scores"]["20"]["mean"] == pytest.approx(0.0, abs=1e-10)
    assert rec["scores"]["10"]["mean"] > rec["scores"]["30"]["mean"] > 0  # the larger perturbation errs more
    assert len(rec["scores"]["10"]["per_fold"]) == 2 and rec["fold_ids"] == [0, 1]
    # the score is select_sampler's held-out action error: recompute fold 1 at budget 10 by hand
    held = envs.load_dataset(folds[1][1])
    meta = held["metadata"]
    pred = contract.build_policy(contract.load_policy(args.fold_policy.format(fold=1, budget=10)))(held["observations"])
    scale = lambda a: 2 * (a - np.asarray(meta["action_low"])) / (np.asarray(meta["action_high"]) - np.asarray(meta["action_low"])) - 1  # noqa: E731
    assert rec["scores"]["10"]["per_fold"][1] == pytest.approx(float(np.mean((scale(pred) - scale(held["actions"])) ** 2)))
    for s in (0, 1):
        for sp in ("train", "heldout"):
            with open(args.out_result.format(seed=s, split=sp)) as f:
                r = json.load(f)
            assert r["method"] == "dwbc_sel" and r["returns"] == [-20.0 - s] and r["policy_step"] == 20
            assert r["budget_selection"]["budget"] == 20 and r["source_result"].endswith(f"dwbc_b20_s{s}_{sp}.json")
    with open(args.out) as f:
        assert not {"method", "seed", "split", "returns"} & set(json.load(f))  # report.py skips the record


def test_a_tie_goes_to_the_smaller_budget(dataset, folds, tmp_path):  # noqa: F811
    args = write_inputs(str(tmp_path), dataset, folds, {30: (W_GOOD, B_GOOD), 10: (W_GOOD, B_GOOD), 20: perturbed(0.3)})
    assert select_budget.main(args)["choice"] == 10


def bad_cases(root, dataset, folds):  # noqa: F811
    good = {10: perturbed(0.5), 20: (W_GOOD, B_GOOD)}
    yield "held-out", write_inputs(os.path.join(root, "a"), dataset, folds, good, trained_on=dataset)
    yield "not 20", write_inputs(os.path.join(root, "b"), dataset, folds, good, step_of={20: 25})
    other = write_inputs(os.path.join(root, "c"), dataset, folds, good, method="bc_exp")
    yield "not --method dwbc", dataclasses.replace(other, method="dwbc")
    args = write_inputs(os.path.join(root, "d"), dataset, folds, good)
    yield "--fold-ids", dataclasses.replace(args, fold_ids=(0, 3))
    yield "{budget}", dataclasses.replace(args, fold_policy=args.fold_policy.replace("{budget}", "10"))
    yield "--budgets", dataclasses.replace(args, budgets=(10, 10))


def test_refusals_write_nothing(dataset, folds, tmp_path):  # noqa: F811
    for words, args in bad_cases(str(tmp_path), dataset, folds):
        with pytest.raises((ValueError, contract.ContractError), match=words.replace("{", r"\{").replace("}", r"\}")):
            select_budget.main(args)
        assert not os.path.exists(os.path.dirname(args.out)) or not os.listdir(os.path.dirname(args.out)), words


def test_a_result_of_another_step_is_refused_by_the_script(dataset, folds, tmp_path):  # noqa: F811
    args = write_inputs(str(tmp_path), dataset, folds, {10: perturbed(0.5), 20: (W_GOOD, B_GOOD)})
    path = args.results.format(budget=20, seed=1, split="heldout")
    with open(path) as f:
        r = json.load(f)
    contract.save_json(path, {**r, "policy_step": 10})
    proc = run("select_budget.py", "--method", "dwbc", "--dataset", dataset, "--folds", str(FOLDS), "--fold-ids", "0",
               "1", "--budgets", "10", "20", "--heldout", args.heldout, "--fold-policy", args.fold_policy,
               "--results", args.results, "--seeds", "0", "1", "--out", args.out, "--out-result", args.out_result,
               ok=False)
    assert one_line_error(proc, "policy step 10") and not os.path.exists(args.out)
