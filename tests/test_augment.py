"""Invariants of the counterfactual augmentation (augment.py)."""
import numpy as np
import pytest
import torch

import augment
from oilca import contract
import envs
from oilca.ivae import IVAE
from envs.toy import ToyConfig


@pytest.fixture(scope="module")
def augmented(tiny_dataset, tiny_ivae, tmp_path_factory):
    folder = tmp_path_factory.mktemp("aug")
    args = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(folder / "aug.npz"),
                        sampler_out=str(folder / "sampler" / "policy.pt"), ratio=0.4, posterior="mean",
                        sampler_steps=50, hidden=32, seed=1)
    augment.main(args)
    return args


def load_ivae(path):
    ckpt = contract.load_checkpoint(path, "ivae")
    model = IVAE(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    return model.eval()


def test_shapes_counts_and_marks(augmented, tiny_dataset):
    raw, aug = envs.load_dataset(tiny_dataset), envs.load_dataset(augmented.out)
    N = len(raw["rewards"])
    n_e, n_u = raw["expert"].sum(), (~raw["expert"]).sum()
    n_aug = int(round(0.4 * n_u)) - n_e
    assert len(aug["rewards"]) == N + n_aug and aug["augmented"].sum() == n_aug
    new = aug["augmented"]
    assert not new[:N].any() and new[N:].all()
    for key in ("observations", "actions", "next_observations", "aux", "expert", "episode_ids"):
        np.testing.assert_array_equal(aug[key][:N], raw[key][:N])  # collected rows untouched
    assert aug["expert"][new].all() and (aug["episode_ids"][new] == -1).all()
    src, partner = aug["aug_source"][new], aug["aug_partner"][new]
    assert raw["expert"][src].all() and not raw["expert"][partner].any()  # expert u, (s~, a~) from D_U
    np.testing.assert_array_equal(aug["aux"][new], raw["aux"][src])
    np.testing.assert_array_equal(aug["exogenous"][new], raw["exogenous"][src])
    assert (aug["aug_source"][:N] == -1).all()
    assert contract.fingerprint(aug) == contract.fingerprint(raw)
    meta = aug["metadata"]["augmentation"]
    assert meta["n_augmented"] == n_aug and meta["ratio"] == 0.4
    assert (n_e + n_aug) / n_u == pytest.approx(0.4, abs=1 / n_u)


def test_counterfactual_uses_the_expert_u_and_the_partner_state(augmented, tiny_dataset, tiny_ivae):
    raw, aug = envs.load_dataset(tiny_dataset), envs.load_dataset(augmented.out)
    new = aug["augmented"]
    src, partner = aug["aug_source"][new], aug["aug_partner"][new]
    model = load_ivae(tiny_ivae)
    t = lambda k, rows: torch.as_tensor(raw[k][rows])  # noqa: E731
    with torch.no_grad():
        u = model.encode(t("observations", src), t("actions", src), t("next_observations", src), t("aux", src))[0][0]
        expected = model.decode(t("observations", partner), t("actions", partner), u)[0].numpy()
        other_u = u.flip(0)  # the u of other expert rows gives other states
        other = model.decode(t("observations", partner), t("actions", partner), other_u)[0].numpy()
        nxt = model.decode(torch.as_tensor(aug["observations"][new]), torch.as_tensor(aug["actions"][new]), u)[0].numpy()
    np.testing.assert_allclose(aug["observations"][new], expected, atol=1e-5)
    assert np.abs(aug["observations"][new] - other).max() > 1e-4
    np.testing.assert_allclose(aug["next_observations"][new], nxt, atol=1e-5)


def test_labels_come_from_the_sampler(augmented):
    aug = envs.load_dataset(augmented.out)
    new = aug["augmented"]
    sampler = contract.load_policy(augmented.sampler_out)
    assert sampler["method"] == "sampler_bc_exp"
    np.testing.assert_allclose(aug["actions"][new], contract.build_policy(sampler)(aug["observations"][new]), atol=1e-5)


def test_external_sampler_and_reconstruct_mode(augmented, tiny_dataset, tiny_ivae, tmp_path):
    ext = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "ext.npz"), sampler=augmented.sampler_out,
                       ratio=0.3, seed=2)
    augment.main(ext)
    aug = envs.load_dataset(ext.out)
    new = aug["augmented"]
    np.testing.assert_allclose(aug["actions"][new],
                               contract.build_policy(contract.load_policy(augmented.sampler_out))(aug["observations"][new]), atol=1e-5)
    rec = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "rec.npz"), mode="reconstruct",
                       sampler_out=str(tmp_path / "s" / "policy.pt"), ratio=0.3, sampler_steps=20, hidden=16)
    augment.main(rec)
    aug = envs.load_dataset(rec.out)
    new = aug["augmented"]
    assert (aug["aug_partner"][new] == -1).all()
    # a re-sample of the expert's own next state: close to it on the scale of the data
    src = aug["aug_source"][new]
    spread = aug["observations"].std()
    assert np.abs(aug["observations"][new] - aug["next_observations"][src]).mean() < spread


def test_errors(augmented, tiny_dataset, tiny_ivae, tmp_path):
    import collect_data

    other = str(tmp_path / "other.npz")
    collect_data.main(collect_data.Args(out=other, toy=ToyConfig(n_classes=2, episodes_per_class=6), seed=99))
    with pytest.raises(contract.ContractError, match="fit on another dataset"):
        augment.main(augment.Args(dataset=other, ivae=tiny_ivae, out=str(tmp_path / "x.npz")))
    with pytest.raises(ValueError, match="already augmented"):
        augment.main(augment.Args(dataset=augmented.out, ivae=tiny_ivae, out=str(tmp_path / "x.npz")))
    arrays = dict(np.load(tiny_dataset))
    arrays["expert"] = np.zeros_like(arrays["expert"])
    no_expert = str(tmp_path / "no_expert.npz")
    contract.save_npz(no_expert, arrays)
    with pytest.raises(contract.ContractError, match="D_E is empty"):
        augment.main(augment.Args(dataset=no_expert, ivae=tiny_ivae, out=str(tmp_path / "x.npz")))
    assert not (tmp_path / "x.npz").exists()


# ------------------------------------------------------------------------------------------------- controls
def test_oracle_labels_are_the_env_experts_actions(augmented, tiny_dataset, tiny_ivae, tmp_path):
    import envs

    args = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(tmp_path / "oracle.npz"), labels="oracle",
                        ratio=0.4, posterior="mean", seed=1)
    augment.main(args)
    aug, ref = envs.load_dataset(args.out), envs.load_dataset(augmented.out)
    new = aug["augmented"]
    expert = envs.reference_policy(envs.env_spec(aug["metadata"]), "expert", 0)
    np.testing.assert_allclose(aug["actions"][new], expert(aug["observations"][new]), atol=1e-6)
    # the same counterfactual states as the method's run with the same seed: only the labels differ
    np.testing.assert_array_equal(aug["observations"][new], ref["observations"][ref["augmented"]])
    assert np.abs(aug["actions"][new] - ref["actions"][ref["augmented"]]).mean() > 1e-3
    assert not (tmp_path / "runs").exists()  # no sampler is trained or written


def test_copy_mode_uses_the_partners_own_next_state(augmented, tiny_dataset, tmp_path):
    args = augment.Args(dataset=tiny_dataset, ivae=str(tmp_path / "no_such_ivae.pt"), out=str(tmp_path / "copy.npz"),
                        mode="copy", sampler=augmented.sampler_out, ratio=0.4, seed=1)
    augment.main(args)  # no iVAE is read
    raw, aug, cf = (envs.load_dataset(p) for p in (tiny_dataset, args.out, augmented.out))
    new = aug["augmented"]
    partner = aug["aug_partner"][new]
    np.testing.assert_array_equal(partner, cf["aug_partner"][cf["augmented"]])  # the counterfactual run's partners
    assert not raw["expert"][partner].any()
    np.testing.assert_array_equal(aug["observations"][new], raw["next_observations"][partner])
    sampler = contract.build_policy(contract.load_policy(augmented.sampler_out))
    np.testing.assert_allclose(aug["actions"][new], sampler(aug["observations"][new]), atol=1e-6)
    ends = raw["timeouts"][partner] | raw["terminals"][partner]
    nxt = aug["next_observations"][new]
    np.testing.assert_array_equal(nxt[~ends], raw["next_observations"][partner[~ends] + 1])
    np.testing.assert_array_equal(nxt[ends], aug["observations"][new][ends])


def test_expert_data_mode_adds_real_expert_rows(tiny_dataset, tmp_path):
    from envs import toy as toy_env

    args = augment.Args(dataset=tiny_dataset, ivae=str(tmp_path / "no_such_ivae.pt"), out=str(tmp_path / "exp.npz"),
                        mode="expert_data", ratio=0.4, seed=3)
    augment.main(args)
    raw, aug = envs.load_dataset(tiny_dataset), envs.load_dataset(args.out)
    new = aug["augmented"]
    n_e, n_u = raw["expert"].sum(), (~raw["expert"]).sum()
    assert new.sum() == int(round(0.4 * n_u)) - n_e  # the same count as the counterfactual rows
    env = toy_env.make_env(envs_spec := aug["metadata"])
    s, a, s2, u = (aug[k][new].astype(np.float64) for k in ("observations", "actions", "next_observations", "exogenous"))
    np.testing.assert_allclose(a, env.expert_action(s), atol=1e-5)  # the controller's actions
    np.testing.assert_allclose(s2, env.transition(s, a, u), atol=1e-5)  # real transitions under the stored u
    np.testing.assert_allclose(aug["rewards"][new], env.reward(s2), atol=1e-5)
    assert set(aug["aux"][new]) <= set(raw["aux"][raw["expert"]])  # classes of c that D_E shows
    assert (aug["aug_source"][new] == -1).all() and (aug["aug_partner"][new] == -1).all()
    assert envs_spec["augmentation"]["mode"] == "expert_data"
    again = augment.Args(**{**args.__dict__, "out": str(tmp_path / "exp2.npz")})
    augment.main(again)
    np.testing.assert_array_equal(envs.load_dataset(again.out)["observations"], aug["observations"])  # seeded


def test_control_flags_that_do_not_fit_are_refused(augmented, tiny_dataset, tiny_ivae, tmp_path):
    out = str(tmp_path / "x.npz")
    with pytest.raises(ValueError, match="--sampler: not used"):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=out, labels="oracle",
                                  sampler=augmented.sampler_out))
    with pytest.raises(ValueError, match="--sampler: not used"):
        augment.main(augment.Args(dataset=tiny_dataset, out=out, mode="expert_data", sampler=augmented.sampler_out))
    with pytest.raises(ValueError, match="--labels oracle: only with"):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=out, labels="oracle", mode="reconstruct"))
    with pytest.raises(ValueError, match="--label sample"):
        augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=out, labels="oracle", label="sample"))
    assert not (tmp_path / "x.npz").exists()
