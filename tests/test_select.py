"""The offline sampler choice: cv_split.py's folds of D_E and select_sampler.py's cross-validated score.

Unit tests of the split and the score, in-process `main(Args(...))` checks of outputs and refusals (nothing written),
and one subprocess smoke run of each script. Fold and full-data policies are built by hand as policy artifacts: a
one-layer net whose action is exactly the (rewritten) expert action of the tiny dataset, and worse ones.
"""
import dataclasses
import json
import os

import numpy as np
import pytest
import torch
import torch.nn as nn

import collect_data
from oilca import contract
import cv_split
import envs
import select_sampler
from conftest import one_line_error, run
from envs.toy import ToyConfig, ToyEnvConfig

FOLDS = 3
W_GOOD, B_GOOD = np.array([[0.8, -0.3], [0.2, 0.6]], np.float32), np.array([0.1, -0.2], np.float32)


def linear_artifact(meta, W, b, **info):
    """A policy artifact whose action is low + (tanh(W s + b) + 1) / 2 (high - low) (no normalisation)."""
    net = nn.Sequential(nn.Linear(meta["obs_dim"], meta["act_dim"]))
    with torch.no_grad():
        net[0].weight.copy_(torch.as_tensor(W))
        net[0].bias.copy_(torch.as_tensor(b))
    return contract.policy_artifact(net, np.zeros(meta["obs_dim"]), np.ones(meta["obs_dim"]), meta["action_low"],
                                    meta["action_high"], env=envs.env_spec(meta), **info)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A tiny toy dataset with 6 D_E episodes of 12 whose actions are rewritten as the linear policy W_GOOD's (the
    contract does not tie actions to next states), so that policy is exact on every held-out row."""
    folder = tmp_path_factory.mktemp("select")
    path = str(folder / "tiny.npz")
    collect_data.main(collect_data.Args(out=path, seed=3, positive_frac=0.5, expert_prob=1.0,
                                        toy=ToyConfig(n_classes=2, episodes_per_class=6, env=ToyEnvConfig(episode_len=10))))
    raw, data = envs.load_dataset_raw(path)
    meta = data["metadata"]
    perfect = contract.build_policy(linear_artifact(meta, W_GOOD, B_GOOD, method="x", seed=0, dataset_fingerprint=""))
    raw = dict(raw, actions=perfect(raw["observations"]).astype(raw["actions"].dtype))
    envs.validate_dataset(path, raw)
    contract.save_npz(path, raw)
    return path


@pytest.fixture(scope="module")
def folds(dataset, tmp_path_factory):
    """The 3 folds of `dataset` (seed 0): [(train path, held-out path)]."""
    folder = tmp_path_factory.mktemp("folds")
    out = []
    for k in range(FOLDS):
        train, held = str(folder / f"f{k}.npz"), str(folder / f"f{k}_heldout.npz")
        cv_split.main(cv_split.Args(dataset=dataset, folds=FOLDS, fold=k, seed=0, out=train, heldout_out=held))
        out.append((train, held))
    return out


def write_policies(root, dataset, folds, specs, seeds=(0, 1)):
    """Fold and full-data artifacts of each candidate: specs = {candidate: (W, b)}. Returns select_sampler.Args."""
    meta = envs.load_dataset(dataset)["metadata"]
    full_fp = contract.fingerprint(envs.load_dataset(dataset))
    for c, (W, b) in specs.items():
        for k, (train, _) in enumerate(folds):
            fp = contract.fingerprint(envs.load_dataset(train))
            contract.save_policy(os.path.join(root, f"{c}_f{k}", "policy.pt"),
                                 linear_artifact(meta, W, b, method=c, seed=0, dataset_fingerprint=fp))
        for s in seeds:
            contract.save_policy(os.path.join(root, f"{c}_s{s}", "policy.pt"),
                                 linear_artifact(meta, W + 0.01 * s, b, method=c, seed=s, dataset_fingerprint=full_fp))
    folder = os.path.dirname(folds[0][0])
    return select_sampler.Args(
        dataset=dataset, folds=len(folds), candidates=tuple(specs), heldout=os.path.join(folder, "f{fold}_heldout.npz"),
        fold_dataset=os.path.join(folder, "f{fold}.npz"), fold_policy=os.path.join(root, "{candidate}_f{fold}", "policy.pt"),
        full_policy=os.path.join(root, "{candidate}_s{seed}", "policy.pt"), seeds=tuple(seeds),
        out=os.path.join(root, "out", "selection.json"), out_policy=os.path.join(root, "out", "sel_s{seed}", "policy.pt"))


# ------------------------------------------------------------------------------------------------ cv_split.py
def test_every_expert_episode_is_held_out_once(dataset, folds):
    src = envs.load_dataset(dataset)
    expert_eps = set(np.unique(src["episode_ids"][src["expert"]]).tolist())
    held_sets = []
    for k, (train, held) in enumerate(folds):
        t, h = envs.load_dataset(train), envs.load_dataset(held)  # both are contract-valid
        ids = set(np.unique(h["episode_ids"]).tolist())
        held_sets.append(ids)
        assert h["expert"].all() and not ids & set(t["episode_ids"].tolist())  # none of the fold's rows remain
        rows = np.isin(src["episode_ids"], sorted(ids))
        for key in ("observations", "actions", "exogenous", "policy_ids", "aux", "episode_ids", "episode_returns"):
            assert np.array_equal(h[key], src[key][rows]) and np.array_equal(t[key], src[key][~rows]), key
        rec = t["metadata"]["cv_split"]
        assert (rec["part"], rec["fold"], rec["folds"], rec["heldout_episodes"]) == ("train", k, FOLDS, sorted(ids))
        assert t["metadata"]["split"]["n_expert_episodes"] == len(expert_eps) - len(ids)
        assert h["metadata"]["split"]["n_expert_episodes"] == len(ids)
        assert {k2: v for k2, v in t["metadata"].items() if k2 not in ("cv_split", "split")} == \
            {k2: v for k2, v in src["metadata"].items() if k2 != "split"}
    assert set().union(*held_sets) == expert_eps and sum(map(len, held_sets)) == len(expert_eps)
    assert max(map(len, held_sets)) - min(map(len, held_sets)) <= 1


def test_same_seed_same_split(dataset):
    data = envs.load_dataset(dataset)
    eps = np.arange(20)
    assert np.array_equal(cv_split.assign_folds(eps, 4, 7), cv_split.assign_folds(eps, 4, 7))
    assert not np.array_equal(cv_split.assign_folds(eps, 4, 7), cv_split.assign_folds(eps, 4, 8))
    assert np.bincount(cv_split.assign_folds(eps, 3, 0)).tolist() == [7, 7, 6]
    splits = [[cv_split.heldout_episodes(data, FOLDS, k, seed).tolist() for k in range(FOLDS)] for seed in (0, 0, 1)]
    assert splits[0] == splits[1] and splits[0] != splits[2]


def test_rerun_keeps_same_arguments_and_refuses_others(dataset, tmp_path):
    a = cv_split.Args(dataset=dataset, folds=FOLDS, fold=1, out=str(tmp_path / "t.npz"), heldout_out=str(tmp_path / "h.npz"))
    assert not cv_split.main(a)["skipped"]
    before = open(a.out, "rb").read()
    assert cv_split.main(a)["skipped"]
    with pytest.raises(ValueError, match="--out .* exists and was made with other arguments"):
        cv_split.main(dataclasses.replace(a, seed=5))
    assert open(a.out, "rb").read() == before
    cv_split.main(dataclasses.replace(a, seed=5, force=True))
    assert envs.load_dataset(a.out)["metadata"]["cv_split"]["seed"] == 5


def augmented_copy(dataset, path):
    """`dataset` plus one counterfactual row (as augment.py marks them)."""
    raw, data = envs.load_dataset_raw(dataset)
    n = len(raw["rewards"])
    out = {k: np.concatenate([v, v[:1]]) for k, v in raw.items() if k != "metadata"}
    out.update(augmented=np.r_[np.zeros(n, bool), True], aug_source=np.r_[np.full(n, -1), 0],
               aug_partner=np.r_[np.full(n, -1), 1], metadata=raw["metadata"])
    out["episode_ids"][-1], out["terminals"][-1], out["timeouts"][-1], out["expert"][-1] = -1, False, False, True
    envs.validate_dataset(path, out)
    contract.save_npz(path, out)
    return path


def test_cv_split_refusals_write_nothing(dataset, tmp_path):
    aug = augmented_copy(dataset, str(tmp_path / "aug.npz"))
    base = cv_split.Args(dataset=dataset, folds=FOLDS, out=str(tmp_path / "o" / "t.npz"), heldout_out=str(tmp_path / "o" / "h.npz"))
    cases = [(dict(dataset=aug), "is augmented"), (dict(folds=1), "--folds"), (dict(folds=7), "--folds 7 exceeds the 6 D_E"),
             (dict(fold=3), "--fold 3 must lie in [0, 3)"), (dict(fold=-1), "--fold"), (dict(out=dataset), "--out"),
             (dict(heldout_out=dataset), "--heldout-out"), (dict(heldout_out=base.out), "two outputs")]
    for change, words in cases:
        with pytest.raises(ValueError) as e:
            cv_split.main(dataclasses.replace(base, **change))
        assert words in str(e.value) and "\n" not in str(e.value), (change, e.value)
        assert not os.path.exists(tmp_path / "o") or not os.listdir(tmp_path / "o"), change


def test_cv_split_script(dataset, tmp_path):
    out, held = str(tmp_path / "t.npz"), str(tmp_path / "h.npz")
    proc = run("cv_split.py", "--dataset", dataset, "--folds", "2", "--fold", "1", "--seed", "4", "--out", out,
               "--heldout-out", held)
    assert "held out 3 of 6 D_E episodes" in proc.stdout and envs.load_dataset(held)["expert"].all()
    proc = run("cv_split.py", "--dataset", dataset, "--folds", "2", "--fold", "2", "--out", str(tmp_path / "x.npz"),
               "--heldout-out", str(tmp_path / "y.npz"), ok=False)
    assert one_line_error(proc, "--fold 2") and not os.path.exists(tmp_path / "x.npz")


# ------------------------------------------------------------------------------------------------ select_sampler.py
def test_score_and_choice_units():
    low, high = [0.0, -2.0], [2.0, 2.0]
    assert select_sampler.action_mse(np.array([[2.0, 2.0]]), np.array([[0.0, -2.0]]), low, high) == 4.0
    assert select_sampler.action_mse(np.array([[1.0, 1.0]]), np.array([[1.0, 0.0]]), low, high) == pytest.approx(0.125)
    assert select_sampler.choose({"a": 1.0, "b": 0.5, "c": 0.5}, ["a", "b", "c"]) == "b"
    assert select_sampler.choose({"a": 1.0, "b": 0.5, "c": 0.5}, ["c", "b", "a"]) == "c"
    assert select_sampler.fill("r/{candidate}_f{fold}/{x}", candidate="bc", fold=2) == "r/bc_f2/{x}"


def test_exact_policy_scores_zero_and_is_chosen(dataset, folds, tmp_path):
    args = write_policies(str(tmp_path), dataset, folds, {"worse": (W_GOOD * 0.5, B_GOOD), "exact": (W_GOOD, B_GOOD)})
    rec = select_sampler.main(args)
    assert rec["choice"] == "exact" and rec["scores"]["exact"]["mean"] < 1e-10
    assert rec["scores"]["worse"]["mean"] > 1e-4 and len(rec["scores"]["worse"]["per_fold"]) == FOLDS
    saved = json.load(open(args.out))
    assert saved["choice"] == "exact" and not {"method", "seed", "split", "returns"} & set(saved)  # report.py skips it
    full_fp = contract.fingerprint(envs.load_dataset(dataset))
    for s in args.seeds:
        art = contract.load_policy(args.out_policy.replace("{seed}", str(s)))
        src = contract.load_policy(args.full_policy.replace("{candidate}", "exact").replace("{seed}", str(s)))
        assert (art["method"], art["selected_from"], art["seed"], art["selection"]) == ("sampler_selected", "exact", s, args.out)
        assert art["dataset_fingerprint"] == full_fp  # what augment.py --sampler checks
        assert all(torch.equal(art["state_dict"][k], src["state_dict"][k]) for k in src["state_dict"])


def test_tie_goes_to_the_first_candidate(dataset, folds, tmp_path):
    same = (W_GOOD * 0.5, B_GOOD)
    args = write_policies(str(tmp_path), dataset, folds, {"first": same, "second": same}, seeds=(0,))
    assert select_sampler.main(args)["choice"] == "first"
    assert select_sampler.main(dataclasses.replace(args, candidates=("second", "first")))["choice"] == "second"


def test_select_refusals_write_nothing(dataset, folds, tmp_path):
    args = write_policies(str(tmp_path), dataset, folds, {"a": (W_GOOD, B_GOOD), "b": (W_GOOD * 0.5, B_GOOD)})
    other = [cv_split.main(cv_split.Args(dataset=dataset, folds=FOLDS, fold=k, seed=1, out=str(tmp_path / f"s1_f{k}.npz"),
                                         heldout_out=str(tmp_path / f"s1_f{k}_heldout.npz"))) for k in range(FOLDS)]
    assert other
    policy_a = args.fold_policy.replace("{candidate}", "a")
    swapped = str(tmp_path / "swap_{candidate}_{fold}.pt")  # fold k's policy trained on fold k+1's dataset
    wrong_full = str(tmp_path / "full_{candidate}_{seed}.pt")  # a fold policy where a full-data one belongs
    for k in range(FOLDS):
        os.link(policy_a.replace("{fold}", str((k + 1) % FOLDS)), swapped.replace("{candidate}", "a").replace("{fold}", str(k)))
    mislabelled = str(tmp_path / "mis_{candidate}_{fold}.pt")  # b's fold policies given as a's
    for k in range(FOLDS):
        os.link(args.fold_policy.replace("{candidate}", "b").replace("{fold}", str(k)),
                mislabelled.replace("{candidate}", "a").replace("{fold}", str(k)))
    for s in args.seeds:
        os.link(policy_a.replace("{fold}", "0"), wrong_full.replace("{candidate}", "a").replace("{seed}", str(s)))
    cases = [
        (dict(fold_policy=swapped, candidates=("a",)), f"trained on another dataset than {args.fold_dataset.replace('{fold}', '0')}"),
        (dict(full_policy=wrong_full), f"trained on another dataset than {dataset}"),
        (dict(candidates=("a", "c")), "file not found"),
        (dict(fold_policy=mislabelled, candidates=("a",)), "a 'b' policy, not candidate 'a'"),
        (dict(heldout=str(tmp_path / "s1_f{fold}_heldout.npz")), "not the complement"),
        (dict(folds=2), "cv_split folds is 3, expected 2"),
        (dict(heldout=args.heldout.replace("{fold}", "0")), "--heldout"),
        (dict(seeds=(0, 0)), "--seeds lists a value twice"),
        (dict(seeds=(0, 2)), "file not found"),
        (dict(out_policy=args.full_policy.replace("{candidate}", "a")), "refusing to overwrite an input"),
        (dict(folds=1), "--folds"),
    ]
    for change, words in cases:
        with pytest.raises(ValueError) as e:  # ContractError is a ValueError
            select_sampler.main(dataclasses.replace(args, **change))
        msg = str(e.value)
        assert words in msg and "\n" not in msg, (change, msg)
        assert not os.path.exists(os.path.join(str(tmp_path), "out")), change


def test_select_with_trained_policies_and_script(dataset, folds, tmp_path):
    """Real train_bc.py artifacts (20 steps) pass the wiring checks, run as a user runs the script."""
    import train_bc

    small = dict(total_steps=20, hidden=16, eval_every=0, eval_episodes=0, threads=1)
    for c, kind in (("bc_exp", "expert"), ("bc_all", "all")):
        for k, (train, _) in enumerate(folds):
            train_bc.main(train_bc.Args(dataset=train, out_dir=str(tmp_path / f"{c}_f{k}"), data=kind, **small))
        train_bc.main(train_bc.Args(dataset=dataset, out_dir=str(tmp_path / f"{c}_s0"), data=kind, **small))
    folder = os.path.dirname(folds[0][0])
    flags = ["--dataset", dataset, "--folds", str(FOLDS), "--candidates", "bc_exp", "bc_all",
             "--heldout", os.path.join(folder, "f{fold}_heldout.npz"), "--fold-dataset", os.path.join(folder, "f{fold}.npz"),
             "--fold-policy", str(tmp_path / "{candidate}_f{fold}" / "policy.pt"), "--seeds", "0",
             "--full-policy", str(tmp_path / "{candidate}_s{seed}" / "policy.pt"), "--out", str(tmp_path / "sel.json"),
             "--out-policy", str(tmp_path / "sel_s{seed}" / "policy.pt")]
    proc = run("select_sampler.py", *flags)
    choice = json.load(open(tmp_path / "sel.json"))["choice"]
    assert "<- chosen" in proc.stdout and choice in ("bc_exp", "bc_all")
    assert contract.load_policy(str(tmp_path / "sel_s0" / "policy.pt"))["selected_from"] == choice
    with pytest.raises(ValueError, match="--out-policy .* must contain {seed}"):
        select_sampler.main(select_sampler.Args(out_policy=str(tmp_path / "x" / "policy.pt")))
    assert not os.path.exists(tmp_path / "x")


# ------------------------------------------------------------------------------------------------ --rule discriminator
FAST_DISC = dict(rule="discriminator", disc_steps=300, disc_batch_size=64, disc_lr=1e-3, disc_hidden=64)
EXPERT = (W_GOOD, np.array([0.9, -0.9], np.float32))  # D_E's actions in mixed_dataset: about (0.7, -0.7), far from 0
ZERO = (np.zeros((2, 2), np.float32), np.zeros(2, np.float32))  # always the middle of the action box
RANDOM = (np.random.default_rng(1).normal(size=(2, 2)).astype(np.float32), np.array([0.5, -0.4], np.float32))


@pytest.fixture(scope="module")
def mixed_dataset(tmp_path_factory):
    """The tiny toy dataset with D_E's actions rewritten as EXPERT's linear policy (a known function of s) and D_U's
    as uniform random actions within the bounds."""
    path = str(tmp_path_factory.mktemp("mixed") / "mixed.npz")
    collect_data.main(collect_data.Args(out=path, seed=3, positive_frac=0.5, expert_prob=1.0,
                                        toy=ToyConfig(n_classes=2, episodes_per_class=6, env=ToyEnvConfig(episode_len=10))))
    raw, data = envs.load_dataset_raw(path)
    meta = data["metadata"]
    perfect = contract.build_policy(linear_artifact(meta, *EXPERT, method="x", seed=0, dataset_fingerprint=""))
    low, high = np.asarray(meta["action_low"]), np.asarray(meta["action_high"])
    rand = np.random.default_rng(0).uniform(low, high, raw["actions"].shape)
    actions = np.where(data["expert"][:, None], perfect(raw["observations"]), rand).astype(raw["actions"].dtype)
    raw = dict(raw, actions=actions)
    envs.validate_dataset(path, raw)
    contract.save_npz(path, raw)
    return path


def write_full_policies(root, dataset, specs, seeds=(0, 1), **change):
    """Full-data artifacts only: specs = {candidate: (W, b)} or {candidate: [(W, b) per seed]}. Returns
    select_sampler.Args for the discriminator rule (fold templates left at their defaults: the rule ignores them)."""
    data = envs.load_dataset(dataset)
    meta, fp = data["metadata"], contract.fingerprint(data)
    for c, spec in specs.items():
        for i, s in enumerate(seeds):
            W, b = spec[i] if isinstance(spec, list) else spec
            contract.save_policy(os.path.join(root, f"{c}_s{s}", "policy.pt"),
                                 linear_artifact(meta, W, b, method=c, seed=s, dataset_fingerprint=fp))
    fields = dict(dataset=dataset, candidates=tuple(specs), full_policy=os.path.join(root, "{candidate}_s{seed}", "policy.pt"),
                  seeds=tuple(seeds), out=os.path.join(root, "out", "selection.json"),
                  out_policy=os.path.join(root, "out", "sel_s{seed}", "policy.pt"), **FAST_DISC)
    return select_sampler.Args(**{**fields, **change})


def test_discriminator_units():
    assert select_sampler.choose({"a": 1.0, "b": 2.0, "c": 2.0}, ["a", "b", "c"], higher=True) == "b"
    assert select_sampler.most_chosen(["a", "b", "b"], ["a", "b"], {"a": 0.0, "b": -1.0}) == "b"
    assert select_sampler.most_chosen(["a", "b"], ["a", "b"], {"a": -2.0, "b": -1.0}) == "b"  # tie: higher mean
    assert select_sampler.most_chosen(["b", "a"], ["a", "b"], {"a": -1.0, "b": -1.0}) == "a"  # then the order
    z = torch.tensor([0.0, 0.0])
    assert select_sampler.logistic_loss(z, z).item() == pytest.approx(np.log(2))
    big = torch.tensor([30.0])
    assert select_sampler.logistic_loss(big, -big).item() < 1e-12  # sure and right
    assert select_sampler.logistic_loss(torch.tensor([0.0]), torch.tensor([-30.0, 0.0])).item() == pytest.approx(
        0.5 * np.log(2) + 0.25 * np.log(2), rel=1e-6)  # each class weighs half whatever its share of the batch


def test_discriminator_prefers_the_expert_function(mixed_dataset, tmp_path):
    args = write_full_policies(str(tmp_path), mixed_dataset, {"zero": ZERO, "random": RANDOM, "exact": EXPERT},
                               folds=1, heldout="no/such/{fold}.npz")  # fold flags: ignored, not checked
    rec = select_sampler.main(args)
    sc = {c: rec["scores"][c]["mean"] for c in args.candidates}
    assert sc["exact"] > sc["zero"] + 0.5 and sc["exact"] > sc["random"] + 0.5, sc
    assert rec["choice"] == "exact" and rec["choice_per_seed"] == ["exact", "exact"]
    assert all(len(rec["scores"][c]["per_seed"]) == 2 for c in args.candidates)
    fit = rec["discriminator"]
    assert fit["d_expert_rows"] > 0.5 > fit["d_unlabelled_rows"] and fit["n_scored_rows"] == fit["n_unlabelled_rows"] == 60
    saved = json.load(open(args.out))
    assert saved["rule"] == select_sampler.RULE_DISCRIMINATOR and saved["folds"] is None
    assert not {"method", "seed", "split", "returns"} & set(saved)  # report.py skips it
    assert set(saved) >= {"rule", "candidates", "scores", "choice", "choice_per_seed", "inputs", "out_policies"}
    for s in args.seeds:
        art = contract.load_policy(args.out_policy.replace("{seed}", str(s)))
        assert (art["method"], art["selected_from"], art["seed"]) == ("sampler_selected", "exact", s)


def test_discriminator_choice_per_seed_and_most_seeds(mixed_dataset, tmp_path):
    good = EXPERT
    args = write_full_policies(str(tmp_path), mixed_dataset, {"a": [good, good, ZERO], "b": [ZERO, ZERO, good]},
                               seeds=(0, 1, 2))
    rec = select_sampler.main(args)
    assert rec["choice_per_seed"] == ["a", "a", "b"] and rec["choice"] == "a"
    for s, c in zip(args.seeds, rec["choice_per_seed"]):  # each seed gets its own choice's policy
        art = contract.load_policy(args.out_policy.replace("{seed}", str(s)))
        src = contract.load_policy(args.full_policy.replace("{candidate}", c).replace("{seed}", str(s)))
        assert art["selected_from"] == c and art["source_policy"].endswith(f"{c}_s{s}/policy.pt")
        assert all(torch.equal(art["state_dict"][k], src["state_dict"][k]) for k in src["state_dict"])


def test_discriminator_is_deterministic_and_report_only(mixed_dataset, tmp_path):
    args = write_full_policies(str(tmp_path), mixed_dataset, {"zero": ZERO, "exact": EXPERT}, seeds=(0,),
                               report_only=True, out_policy="ignored.pt", disc_rows=40)  # no {seed}: not needed
    runs = [select_sampler.main(dataclasses.replace(args, out=str(tmp_path / f"r{i}.json"), seed=seed))
            for i, seed in enumerate((0, 0, 1))]
    assert runs[0]["scores"] == runs[1]["scores"] and runs[0]["discriminator"] == {**runs[1]["discriminator"],
                                                                                     "seconds": runs[0]["discriminator"]["seconds"]}
    assert runs[0]["scores"] != runs[2]["scores"] and runs[0]["discriminator"]["n_scored_rows"] == 40
    assert runs[0]["out_policies"] == [] and sorted(os.listdir(tmp_path)) == ["exact_s0", "r0.json", "r1.json", "r2.json", "zero_s0"]


def test_heldout_report_only_writes_no_policy(dataset, folds, tmp_path):
    args = write_policies(str(tmp_path), dataset, folds, {"worse": (W_GOOD * 0.5, B_GOOD), "exact": (W_GOOD, B_GOOD)})
    rec = select_sampler.main(dataclasses.replace(args, report_only=True))
    assert rec["choice"] == "exact" and rec["out_policies"] == [] and os.listdir(os.path.dirname(args.out)) == ["selection.json"]


def test_discriminator_refusals_write_nothing(mixed_dataset, dataset, folds, tmp_path):
    args = write_full_policies(str(tmp_path), mixed_dataset, {"a": EXPERT, "b": ZERO})
    other = write_full_policies(str(tmp_path / "other"), dataset, {"a": (W_GOOD, B_GOOD)})  # trained on another dataset
    cases = [
        (dict(rule="both"), "--rule must be heldout or discriminator"),
        (dict(disc_steps=0), "--disc-steps"), (dict(disc_batch_size=1), "--disc-batch-size"),
        (dict(disc_rows=-1), "--disc-rows"), (dict(disc_lr=0.0), "--disc-lr"), (dict(seed=-1), "--seed"),
        (dict(out_policy=str(tmp_path / "x.pt")), "--out-policy"), (dict(full_policy=str(tmp_path / "{seed}.pt")), "{candidate}"),
        (dict(dataset=folds[0][1]), "D_U (every collected row is expert) is empty"),
        (dict(full_policy=other.full_policy, candidates=("a",)), f"trained on another dataset than {mixed_dataset}"),
        (dict(seeds=(0, 5)), "file not found"),
        (dict(out_policy=args.full_policy.replace("{candidate}", "a")), "refusing to overwrite an input"),
    ]
    for change, words in cases:
        with pytest.raises(ValueError) as e:
            select_sampler.main(dataclasses.replace(args, **change))
        msg = str(e.value)
        assert words in msg and "\n" not in msg, (change, msg)
        assert not os.path.exists(os.path.join(str(tmp_path), "out")), change


def test_discriminator_script(mixed_dataset, tmp_path):
    args = write_full_policies(str(tmp_path), mixed_dataset, {"zero": ZERO, "exact": EXPERT}, seeds=(0,))
    flags = ["--dataset", mixed_dataset, "--rule", "discriminator", "--candidates", "zero", "exact", "--seeds", "0",
             "--full-policy", args.full_policy, "--out", args.out, "--report-only", "--disc-steps", "300",
             "--disc-batch-size", "64", "--disc-lr", "1e-3", "--disc-hidden", "64", "--folds", "1"]
    proc = run("select_sampler.py", *flags)
    assert "<- chosen (most seeds)" in proc.stdout and json.load(open(args.out))["choice"] == "exact"
    assert not os.path.exists(tmp_path / "out" / "sel_s0")  # --report-only


def test_cv_split_full_disk_leaves_both_outputs_as_they_were(dataset, tmp_path, monkeypatch):
    """The second file cannot be written (a full disk): neither new file appears and the old ones are untouched."""
    import errno

    a = cv_split.Args(dataset=dataset, folds=FOLDS, fold=1, out=str(tmp_path / "t.npz"), heldout_out=str(tmp_path / "h.npz"))
    cv_split.main(a)
    before = {p: open(p, "rb").read() for p in (a.out, a.heldout_out)}
    real, calls = contract.save_npz, []

    def full_on_second(path, arrays):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, arrays)

    monkeypatch.setattr(contract, "save_npz", full_on_second)
    with pytest.raises(OSError):
        cv_split.main(dataclasses.replace(a, seed=5, force=True))
    assert {p: open(p, "rb").read() for p in before} == before
    assert sorted(os.listdir(tmp_path)) == ["h.npz", "t.npz"]  # no staged file left behind
