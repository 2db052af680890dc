"""The label sources of augment.py beyond the paper (docs/labels.md): the ensemble and its disagreement filter,
self-improving rounds, any imitation policy as the labeller."""
import math
import os

import numpy as np
import pytest

import augment
from conftest import load_script
from oilca import contract
import envs


def run(tiny_dataset, tiny_ivae, folder, name, **kw):
    args = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(folder / f"{name}.npz"),
                        sampler_out=str(folder / name / "policy.pt"), ratio=0.4, posterior="mean",
                        sampler_steps=40, hidden=16, seed=2, **kw)
    augment.main(args)
    return args, envs.load_dataset(args.out)


@pytest.fixture(scope="module")
def ensemble(tiny_dataset, tiny_ivae, tmp_path_factory):
    return run(tiny_dataset, tiny_ivae, tmp_path_factory.mktemp("ens"), "ens", labels="ensemble", ensemble_size=3)


def test_ensemble_labels_are_the_members_mean(ensemble, tiny_dataset):
    args, aug = ensemble
    new = aug["augmented"]
    members = [augment.member_path(args.sampler_out, k) for k in range(3)]
    arts = [contract.load_policy(p) for p in members]
    low, high = (np.asarray(aug["metadata"][k], np.float32) for k in ("action_low", "action_high"))
    acts = np.stack([np.clip(contract.build_policy(a)(aug["observations"][new]), low, high) for a in arts])
    np.testing.assert_allclose(aug["actions"][new], acts.mean(0), atol=1e-5)
    facts = aug["metadata"]["augmentation"]
    assert facts["sampler_facts"] == {"kind": "ensemble_sampler_bc_exp", "steps": 40, "seed": 2, "size": 3, "keep": 1.0}
    assert [m["path"] for m in facts["ensemble"]["members"]] == members
    # each member is BC on a bootstrap resample of D_E's episodes: as many episodes as D_E, drawn with replacement
    raw = envs.load_dataset(tiny_dataset)
    de = set(np.unique(raw["episode_ids"][raw["expert"]]).tolist())
    for m, art in zip(facts["ensemble"]["members"], arts):
        assert len(m["bootstrap_episodes"]) == len(de) and set(m["bootstrap_episodes"]) <= de
        assert art["bootstrap_episodes"] == m["bootstrap_episodes"] and art["seed"] == m["seed"]
    assert len({m["seed"] for m in facts["ensemble"]["members"]}) == 3  # distinct members (1 D_E episode here)
    assert not np.allclose(acts[0], acts[1])


def test_samplers_train_with_the_given_act_eps(tiny_dataset, tmp_path):
    """--act-eps reaches the actor of the sampler and of every ensemble member (CausalWorld trains BC-exp, the
    sampler it stands for, with 0.01; members trained at the default 1e-6 collapsed there), is recorded where it is not
    the default, and an out-of-range value is refused with nothing written."""
    data = envs.load_dataset(tiny_dataset)
    rows = np.flatnonzero(data["expert"])
    args = augment.Args(sampler_steps=2, hidden=8, act_eps=0.25)
    actor, _, _ = augment.train_sampler(data["observations"][rows], data["actions"][rows], data["metadata"], args)
    assert actor.act_eps == 0.25
    assert augment.recorded(args)["act_eps"] == 0.25 and "act_eps" not in augment.recorded(augment.Args())
    with pytest.raises(ValueError, match="--act-eps"):
        augment.main(augment.Args(dataset=tiny_dataset, out=str(tmp_path / "x.npz"), act_eps=0.0,
                                  sampler_out=str(tmp_path / "s" / "policy.pt")))
    assert not list(tmp_path.iterdir())


def test_ensemble_members_train_and_record_their_act_eps(tiny_dataset, tiny_ivae, tmp_path, monkeypatch):
    """Every member's actor is built with --act-eps (captured as augment.py builds it), and its artifact records it."""
    built = []

    class Capture(augment.Actor):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            built.append(self.act_eps)

    monkeypatch.setattr(augment, "Actor", Capture)
    args, aug = run(tiny_dataset, tiny_ivae, tmp_path, "eps", labels="ensemble", ensemble_size=2, act_eps=0.01)
    assert built == [0.01, 0.01]  # one actor per member, each with the clip
    for k in range(2):
        assert contract.load_policy(augment.member_path(args.sampler_out, k))["train_args"]["act_eps"] == 0.01
    assert aug["metadata"]["augmentation"]["sampler_facts"]["kind"] == "ensemble_sampler_bc_exp"


def test_bootstrap_draws_whole_episodes_with_replacement():
    data = {"episode_ids": np.repeat(np.arange(6), 4)}
    exp_rows = np.flatnonzero(data["episode_ids"] < 5)  # episodes 0-4 are D_E
    draws = [augment.bootstrap_episodes(data, exp_rows, np.random.default_rng([0, k])) for k in range(20)]
    for rows, eps in draws:
        assert len(eps) == 5 and set(eps) <= set(range(5))
        np.testing.assert_array_equal(rows, np.concatenate([np.arange(4 * e, 4 * e + 4) for e in eps]))
    assert any(len(set(eps)) < 5 for _, eps in draws)  # with replacement
    assert len({tuple(eps) for _, eps in draws}) > 1


def test_keep_one_uses_the_plain_modes_rows(ensemble, tiny_dataset, tiny_ivae, tmp_path):
    """q = 1: the same counterfactual states as the plain sampler mode with the same seed; only labels differ."""
    args, aug = ensemble
    _, plain = run(tiny_dataset, tiny_ivae, tmp_path, "plain")
    new = aug["augmented"]
    for key in ("observations", "aug_source", "aug_partner", "aux"):
        np.testing.assert_array_equal(aug[key][new], plain[key][plain["augmented"]])
    assert not np.allclose(aug["actions"][new], plain["actions"][plain["augmented"]])


def test_keep_drops_the_most_disputed_candidates(ensemble, tiny_dataset, tiny_ivae, tmp_path):
    args, full = ensemble
    members = tuple(augment.member_path(args.sampler_out, k) for k in range(3))
    _, kept = run(tiny_dataset, tiny_ivae, tmp_path, "keep", labels="ensemble", ensemble_members=members,
                  ensemble_keep=0.5)
    n = int(full["augmented"].sum())
    assert int(kept["augmented"].sum()) == n  # the row count of the ratio is kept
    ens = kept["metadata"]["augmentation"]["ensemble"]
    assert ens["candidates"] == math.ceil(n / 0.5) and ens["kept"] == n
    assert ens["disagreement_kept"]["max"] == ens["disagreement_threshold"] <= ens["disagreement_all"]["max"]
    # recompute: every kept row's disagreement is at most the threshold, and is the members' spread at its state
    arts = [contract.load_policy(p) for p in members]
    low, high = (np.asarray(kept["metadata"][k], np.float64) for k in ("action_low", "action_high"))
    mean, d = augment.ensemble_labels([contract.build_policy(a) for a in arts], kept["observations"][kept["augmented"]],
                                      low, high)
    assert d.max() <= ens["disagreement_threshold"] + 1e-6
    np.testing.assert_allclose(kept["actions"][kept["augmented"]], mean, atol=1e-5)
    assert ens["disagreement_kept"]["median"] <= ens["disagreement_all"]["median"]


def test_disagreement_is_the_mean_std_in_unit_actions():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    pols = [lambda o: np.tile([[-2.0, 0.0]], (len(o), 1)), lambda o: np.tile([[2.0, 1.0]], (len(o), 1))]
    mean, d = augment.ensemble_labels(pols, np.zeros((4, 3)), low, high)
    np.testing.assert_allclose(mean, [[0.0, 0.5]] * 4)
    np.testing.assert_allclose(d, [1.0] * 4)  # each dim spans [-1, 1] in unit actions: std 1


def test_self_improving_round_is_recorded(tiny_dataset, tiny_ivae, tmp_path, tiny_augmented_args):
    """A policy trained on augmented rows labels the same counterfactual states; its round is recorded."""
    import train_dwbc

    first = tiny_augmented_args
    pol_dir = tmp_path / "oilca"
    train_dwbc.main(train_dwbc.Args(dataset=first.out, out_dir=str(pol_dir), total_steps=20, eval_every=0,
                                    eval_episodes=0, hidden=16, seed=first.seed))
    second = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "r2.npz"), ratio=first.ratio,
                          posterior=first.posterior, seed=first.seed, sampler=str(pol_dir / "policy.pt"))
    augment.main(second)
    a, b = envs.load_dataset(first.out), envs.load_dataset(second.out)
    np.testing.assert_array_equal(a["observations"][a["augmented"]], b["observations"][b["augmented"]])
    facts = b["metadata"]["augmentation"]["sampler_facts"]
    assert facts["kind"] == "oilca" and facts["round"] == 2 and facts["steps"] == 20
    assert "round" not in a["metadata"]["augmentation"]["sampler_facts"]


@pytest.mark.parametrize("kw, msg", [
    (dict(labels="ensemble", mode="copy"), "only with --mode counterfactual"),
    (dict(ensemble_keep=0.5), "only with --labels ensemble"),
    (dict(labels="ensemble", ensemble_keep=0.0), "--ensemble-keep"),
    (dict(labels="ensemble", ensemble_keep=1.5), "--ensemble-keep"),
    (dict(labels="ensemble", ensemble_size=1), "--ensemble-size"),
    (dict(labels="ensemble", label="sample"), "--label sample"),
    (dict(labels="ensemble", ensemble_members=("x.pt",)), "at least two"),
])
def test_bad_ensemble_flags_write_nothing(tiny_dataset, tiny_ivae, tmp_path, kw, msg):
    with pytest.raises((ValueError, contract.ContractError), match=msg):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "x.npz"),
                                  sampler_out=str(tmp_path / "s" / "policy.pt"), **kw))
    assert not list(tmp_path.iterdir())


def test_member_of_another_dataset_is_refused(ensemble, tiny_dataset, tiny_ivae, tmp_path, tiny_augmented_args):
    args, _ = ensemble
    other = tmp_path / "other.pt"
    art = contract.load_policy(augment.member_path(args.sampler_out, 0))
    contract.save_policy(str(other), {**art, "dataset_fingerprint": "0" * 16})
    with pytest.raises(contract.ContractError, match="another dataset"):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "x.npz"), labels="ensemble",
                                  ensemble_members=(str(other), augment.member_path(args.sampler_out, 1))))
    assert not (tmp_path / "x.npz").exists()


def test_runner_label_sources_end_to_end(tmp_path):
    """The ensemble and the self-improving rounds through the runner on a tiny toy grid: every dataset and policy,
    the fold chains, the held-out choice of the keep share and of the round (copied as oilca_ens / oilca_self), the
    label-error table; then a second invocation finds everything up to date."""
    import json

    import runner
    from test_runner import TINY

    args = dict(TINY, root=str(tmp_path), seeds=(0,), fig5_ratios=(), select_folds=2, ens_keeps=(1.0, 0.5),
                ens_size=2, self_rounds=2, episodes=2, references=False, methods=("oilca", "oilca_ens", "oilca_self"),
                collect_flags=TINY["collect_flags"] + " --positive-frac 0.5 --expert-episodes 3")
    out = runner.main(runner.Args(**args))
    cmd = {j["name"]: j["command"] for j in out["jobs"]}
    assert "--ensemble-keep 1.0" in cmd["augment_ens_q1.0_r0.5_s0"] and "--sampler-out" in cmd["augment_ens_q1.0_r0.5_s0"]
    assert "--ensemble-members" in cmd["augment_ens_q0.5_r0.5_s0"]
    assert "--act-eps" not in cmd["augment_ens_q1.0_r0.5_s0"]  # the toy's trainers keep their default
    assert "oilca_s0/policy.pt" in cmd["augment_round2_r0.5_s0"]  # round 2 labelled by plain OILCA's policy
    assert "ivae_cv2_f1/ivae.pt" in cmd["augment_cv2_f1_ens_q1.0_r0.5_s0"]  # the fold's own iVAE
    assert "lsel_oilca_f0_s0/policy.pt" in cmd["augment_cv2_f0_round2_r0.5_s0"]
    res = tmp_path / "results" / "toy"
    for fam, cands in (("oilca_ens", ("oilca_ens_q1.0", "oilca_ens_q0.5")), ("oilca_self", ("oilca", "oilca_round2"))):
        with open(res / f"label_selection_{fam}.json") as f:
            rec = json.load(f)
        assert rec["candidates"] == list(cands) and rec["choice"] in cands and rec["folds"] == 2
        for split in ("train", "heldout"):
            with open(res / f"{fam}_s0_{split}.json") as f, open(res / f"{rec['choice']}_s0_{split}.json") as g:
                sel, src = json.load(f), json.load(g)
            assert sel["method"] == fam and sel["returns"] == src["returns"]
            assert sel["sampler_selection"]["candidate"] == rec["choice"]
    with open(res / "oilca_round2_s0_train.json") as f:
        assert json.load(f)["augmentation"]["sampler"]["round"] == 2
    with open(res / "oilca_ens_q0.5_s0_train.json") as f:
        assert json.load(f)["augmentation"]["sampler"] == {"kind": "ensemble_sampler_bc_exp", "steps": 40, "seed": 0,
                                                           "size": 2, "keep": 0.5}
    with open(res / "fidelity_labels.json") as f:
        names = [r["name"] for r in json.load(f)["rows"]]
    assert names == ["oilca", "oilca_ens_q1.0", "oilca_ens_q0.5", "oilca_round2", "copy partner s'"]
    table = (res / "table.md").read_text()
    assert "OILCA, ensemble labels, keep 0.5" in table and "OILCA, self-improving labels (round chosen" in table
    again = runner.main(runner.Args(**args, dry_run=True))
    assert not [j["name"] for j in again["jobs"] if j["state"] == "run"]


def test_runner_labellers_wiring(tmp_path):
    """ISW-BC's and ILID's policies as labellers, and the sampler chosen among every trained policy (dry run)."""
    import runner
    from test_runner import TINY

    out = runner.main(runner.Args(**dict(TINY, root=str(tmp_path), seeds=(0, 1), fig5_ratios=(), dry_run=True,
                                         methods=("oilca_iswbc", "oilca_ilid", "oilca_best"))))
    cmd = {j["name"]: j["command"] for j in out["jobs"]}
    assert "--sampler runs/toy/iswbc_s1/policy.pt" in cmd["augment_oilca_iswbc_r0.5_s1"].replace(str(tmp_path) + "/", "")
    assert "ilid_s0/policy.pt" in cmd["augment_oilca_ilid_r0.5_s0"] and "iswbc_s0" in cmd  # the labellers are trained
    sel = cmd["select_sampler_best"]
    assert "--candidates bc_exp bc_all dwbc iswbc ilid oril lobsdice bcnd " in sel
    for c in ("bc_exp", "bc_all", "dwbc", "iswbc", "ilid", "oril", "lobsdice", "bcnd"):
        assert f"select_{c}_f2" in cmd and f"{c}_s1" in cmd  # a fold run and a full-data run of each candidate
    assert "sampler_best_s0/policy.pt" in cmd["augment_oilca_best_r0.5_s0"]
    for bad in (dict(best_candidates=("bc_exp",)), dict(best_candidates=("bc_exp", "oril_ca")),
                dict(ens_keeps=(0.0,)), dict(self_rounds=1), dict(budgets=(20, 40))):
        with pytest.raises(SystemExit, match="error: "):
            runner.main(runner.Args(**dict(TINY, root=str(tmp_path), dry_run=True, methods=("labels",), **bad)))


# ---- the support filter (--support-keep): BC-exp's labels kept only on counterfactual states near D_E ----------------

def test_support_keep_one_writes_the_plain_dataset(tiny_dataset, tiny_ivae, tmp_path):
    """q = 1 keeps every row: the very bytes of the plain mode, with no trace of the flag in the metadata."""
    plain, _ = run(tiny_dataset, tiny_ivae, tmp_path, "x")
    written = {p: open(p, "rb").read() for p in (plain.out, plain.sampler_out)}
    for p in written:
        os.remove(p)
    one, aug = run(tiny_dataset, tiny_ivae, tmp_path, "x", support_keep=1.0, support_reference=7)  # the same paths
    for p, data in written.items():
        with open(p, "rb") as f:
            assert f.read() == data, p
    assert "support_keep" not in aug["metadata"]["augmentation"] and "support" not in aug["metadata"]["augmentation"]


def test_support_keep_keeps_the_candidates_nearest_d_e(tiny_dataset, tiny_ivae, tmp_path):
    _, plain = run(tiny_dataset, tiny_ivae, tmp_path, "plain")
    args, kept = run(tiny_dataset, tiny_ivae, tmp_path, "sup", support_keep=0.5)
    n = int(plain["augmented"].sum())
    new = kept["augmented"]
    assert int(new.sum()) == n  # the row count of the ratio is kept
    facts = kept["metadata"]["augmentation"]
    sup = facts["support"]
    assert sup["candidates"] == math.ceil(n / 0.5) and sup["kept"] == n
    assert facts["support_keep"] == 0.5 and facts["sampler_facts"]["support_keep"] == 0.5
    assert sup["distance_kept"]["max"] == sup["distance_threshold"] <= sup["distance_all"]["max"]
    assert sup["distance_kept"]["median"] <= sup["distance_all"]["median"]
    # recompute by brute force: each kept state's distance to its nearest D_E state, dims scaled by D_all's std
    raw = envs.load_dataset(tiny_dataset)
    assert sup["reference_rows"] == int(raw["expert"].sum())  # fewer D_E rows than --support-reference: all of them
    scale = raw["observations"].astype(np.float64).std(0)
    x, ref = kept["observations"][new] / scale, raw["observations"][raw["expert"]] / scale
    d = np.sqrt(((x[:, None, :] - ref[None]) ** 2).sum(-1)).min(1)
    assert d.max() <= sup["distance_threshold"] + 1e-4
    np.testing.assert_allclose(np.median(d), sup["distance_kept"]["median"], rtol=1e-4, atol=1e-5)
    # the labels are the sampler's on the kept states, and the next states follow from them under the same u
    sampler = contract.build_policy(contract.load_policy(args.sampler_out))
    low, high = (np.asarray(kept["metadata"][k], np.float32) for k in ("action_low", "action_high"))
    np.testing.assert_allclose(kept["actions"][new], np.clip(sampler(kept["observations"][new]), low, high), atol=1e-5)
    # a smaller reference set: at most --support-reference D_E rows, the threshold can only grow
    _, few = run(tiny_dataset, tiny_ivae, tmp_path, "few", support_keep=0.5, support_reference=5)
    assert few["metadata"]["augmentation"]["support"]["reference_rows"] == 5
    np.testing.assert_array_equal(few["observations"][~few["augmented"]], kept["observations"][~new])


def test_support_distance_and_scale_by_brute_force():
    rng = np.random.default_rng(0)
    states, ref = rng.normal(size=(2500, 3)), rng.normal(size=(40, 3)) * [1.0, 5.0, 0.1]
    scale = augment.state_scale(np.concatenate([states, ref]).astype(np.float32), chunk=7)
    np.testing.assert_allclose(scale, np.concatenate([states, ref]).std(0), rtol=1e-4)
    d = augment.support_distance(states, ref, scale, chunk=333)
    want = np.sqrt((((states[:, None] - ref[None]) / scale) ** 2).sum(-1)).min(1)
    np.testing.assert_allclose(d, want, rtol=1e-4, atol=1e-5)
    assert augment.state_scale(np.ones((10, 2), np.float32)).tolist() == [1e-6, 1e-6]  # a constant dim: no division by 0


@pytest.mark.parametrize("kw, msg", [
    (dict(support_keep=0.5, labels="ensemble"), "--support-keep: only with"),
    (dict(support_keep=0.5, mode="copy"), "--support-keep: only with"),
    (dict(support_keep=0.0), "--support-keep"),
    (dict(support_keep=1.5), "--support-keep"),
    (dict(support_keep=0.5, support_reference=0), "--support-reference"),
])
def test_bad_support_flags_write_nothing(tiny_dataset, tiny_ivae, tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "x.npz"),
                                  sampler_out=str(tmp_path / "s" / "policy.pt"), **kw))
    assert not list(tmp_path.iterdir())


def test_runner_support_filter_wiring(tmp_path):
    """oilca_sup: per keep share, BC-exp's policy of the seed (of the fold) labels the kept rows; plain OILCA (q = 1)
    is a candidate, its fold runs shared with the self-improving rounds; the choice on held-out D_E (dry run)."""
    import report
    import runner
    from test_runner import TINY

    out = runner.main(runner.Args(**dict(TINY, root=str(tmp_path), seeds=(0, 1), fig5_ratios=(), dry_run=True,
                                         methods=("oilca_sup",), select_folds=2)))
    cmd = {j["name"]: j["command"].replace(str(tmp_path) + "/", "") for j in out["jobs"]}
    assert "--sampler runs/toy/bc_exp_s1/policy.pt --support-keep 0.25" in cmd["augment_sup_q0.25_r0.5_s1"]
    assert "--method oilca_sup_q0.5" in cmd["oilca_sup_q0.5_s0"] and "bc_exp_s0" in cmd and "oilca_s1" in cmd
    assert "--sampler runs/toy/select_bc_exp_f1/policy.pt --support-keep 0.5" in cmd["augment_cv2_f1_sup_q0.5_r0.5_s0"]
    assert "lsel_oilca_f1_s0" in cmd and "lsel_oilca_sup_q0.25_f0_s0" in cmd
    assert "--candidates oilca oilca_sup_q0.5 oilca_sup_q0.25 " in cmd["select_oilca_sup"]
    assert "--selected-method oilca_sup" in cmd["select_oilca_sup"]
    assert report.display("oilca_sup_q0.25") == "OILCA, rows near D_E only, keep 0.25"
    for bad in ((1.0,), (0.5, 0.5), ()):
        with pytest.raises(SystemExit, match="error: --sup-keeps"):
            runner.main(runner.Args(**dict(TINY, root=str(tmp_path), dry_run=True, methods=("oilca_sup",), sup_keeps=bad)))


def test_label_support_by_distance(tiny_augmented_args, tiny_dataset, tmp_path):
    """scripts/label_support.py: the rows split at distance quantiles; each bin's errors recomputed by brute force."""
    label_support = load_script("label_support")

    out, table = tmp_path / "ls.json", tmp_path / "ls.md"
    res = label_support.main(label_support.Args(augmented=tiny_augmented_args.out, out=str(out), table=str(table),
                                                 quantiles=(0.5,), keeps=(0.5, 1.0)))
    data = envs.load_dataset(tiny_augmented_args.out)
    aug, de = data["augmented"], data["expert"] & ~data["augmented"]
    assert res["n_rows"] == int(aug.sum()) and sum(b["own_labels"]["n"] for b in res["bins"]) == res["n_rows"]
    from envs import toy as toy_env
    env = toy_env.make_env(data["metadata"])
    s, a = data["observations"][aug], data["actions"][aug]
    scale = data["observations"][~aug].astype(np.float64).std(0)
    d2 = ((((s[:, None] - data["observations"][de][None]) / scale)) ** 2).sum(-1)
    dist, nn = np.sqrt(d2.min(1)), d2.argmin(1)
    own = np.abs(a - env.expert_action(s)).mean(-1)
    near = np.abs(data["actions"][de][nn] - env.expert_action(s)).mean(-1)
    lo = dist <= np.quantile(dist, 0.5)
    np.testing.assert_allclose(res["bins"][0]["own_labels"]["median"], np.median(own[lo]), rtol=1e-4)
    np.testing.assert_allclose(res["bins"][1]["nearest_transition_labels"]["p90"], np.percentile(near[~lo], 90), rtol=1e-4)
    np.testing.assert_allclose(res["all"]["nearest_transition_labels"]["median"], np.median(near), rtol=1e-4)
    assert res["keeps"][1]["own_labels"]["median"] == pytest.approx(float(np.median(own)), rel=1e-5)
    assert "| quantiles 0–0.5 |" in table.read_text() and "| D_E's states |" in table.read_text()
    to_target = np.linalg.norm(data["observations"][de] - env.target, axis=-1)
    assert res["d_e"]["to_target"]["n"] == int(de.sum())
    np.testing.assert_allclose(res["d_e"]["to_target"]["median"], np.median(to_target), rtol=1e-5)
    np.testing.assert_allclose(res["bins"][0]["to_target"]["p90"],
                               np.percentile(np.linalg.norm(s[lo] - env.target, axis=-1), 90), rtol=1e-5)
    with pytest.raises(ValueError, match="--quantiles"):
        label_support.main(label_support.Args(augmented=tiny_augmented_args.out, out=str(tmp_path / "x.json"),
                                              quantiles=(0.7, 0.3)))
    with pytest.raises(ValueError, match="no augmented rows"):
        label_support.main(label_support.Args(augmented=tiny_dataset, out=str(tmp_path / "x.json"), table=None))
    assert not (tmp_path / "x.json").exists()
