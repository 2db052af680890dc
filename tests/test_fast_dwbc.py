"""DWBC/OILCA's fast trainer (fast/train_dwbc.py) against its reference (train_dwbc.py): replica k of a fast run
follows the reference run with seed k (every loss, 100 steps, 1e-5), also with one dataset per seed, --adaptive-eta,
--aug-frac, --no-pu and a discriminator that steps every other step; the fast run writes each seed's files (run
folder, --checkpoints policies, --final-eval results); the reference's CLI refuses a bad value with one line."""
import dataclasses
import json
import shutil

import numpy as np
import pytest
import torch

import envs
import train_dwbc
from conftest import one_line_error, run
from fast import train_dwbc as fast_dwbc
from oilca import contract

TINY = dict(hidden=16, batch_size=32, eval_every=0, eval_episodes=0, threads=1)
STEPS = 100


@pytest.fixture(scope="module")
def augmented(tiny_dataset, tmp_path_factory):
    """tiny_dataset augmented without an iVAE or a sampler to train (augment.py --mode copy --labels oracle): an OILCA
    dataset in a fraction of a second."""
    import augment
    out = str(tmp_path_factory.mktemp("aug") / "aug.npz")
    augment.main(augment.Args(dataset=tiny_dataset, out=out, mode="copy", labels="oracle", ratio=0.4, seed=1))
    return out


def fast_and_reference(tmp_path, datasets, final_eval=False, **kw):
    """Loss traces of the first STEPS steps: replica k of fast/train_dwbc.py --seeds 0 1 (reading datasets[k]: one
    dataset, or one per seed) and train_dwbc.py --seed k on datasets[k]."""
    common = dict(total_steps=STEPS, loss_trace=STEPS, **TINY, **kw)
    if datasets[0] == datasets[1]:
        dataset = datasets[0]
    else:
        for k, path in enumerate(datasets):
            shutil.copy(path, tmp_path / f"data_s{k}.npz")
        dataset = str(tmp_path / "data_s{seed}.npz")
    out = fast_dwbc.main(fast_dwbc.Args(dataset=dataset, seeds=(0, 1), out_dir=str(tmp_path / "fast_s{seed}"),
                                        final_eval=str(tmp_path / "results" / "fast_s{seed}_{split}.json")
                                        if final_eval else None, final_eval_episodes=2, **common))
    ref = [train_dwbc.main(train_dwbc.Args(dataset=datasets[k], seed=k, out_dir=str(tmp_path / f"ref_s{k}"), **common))
           for k in (0, 1)]
    return out, ref


@pytest.mark.parametrize("case", ["dwbc", "per_seed_datasets", "oilca_adaptive"])
def test_replicas_follow_reference_runs_and_write_their_files(case, tiny_dataset, augmented, tmp_path):
    datasets, kw = {
        "dwbc": ((tiny_dataset,) * 2, dict(final_eval=True)),
        "per_seed_datasets": ((tiny_dataset, augmented), dict(adaptive_eta=True, d_update_every=2, pu=False)),
        "oilca_adaptive": ((augmented,) * 2, dict(adaptive_eta=True, aug_frac=0.5, checkpoints=(50,))),
    }[case]
    out, ref = fast_and_reference(tmp_path, datasets, **kw)
    worst = 0.0
    for k, (fast_run, ref_run) in enumerate(zip(out["runs"], ref)):
        assert fast_run["seed"] == k
        for name in ("policy_loss", "d_loss"):
            f, r = fast_run["loss_trace"][name], ref_run["loss_trace"][name]
            assert len(f) == len(r) == (STEPS if name == "policy_loss" else STEPS // kw.get("d_update_every", 1))
            np.testing.assert_allclose(f, r, rtol=1e-5, atol=1e-5, err_msg=f"{case}: {name} of seed {k}")
            worst = max(worst, float((np.abs(np.subtract(f, r)) / (1 + np.abs(r))).max()))
        # the final logged row (losses, d on both sides, η) as the reference logged it
        f_row, r_row = fast_run["log"][-1], ref_run["log"][-1]
        assert list(f_row) == list(r_row) == ["step", "policy_loss", "d_loss", "d_expert", "d_unlabelled", "eta",
                                              "eval_return"]
        np.testing.assert_allclose([f_row[c] for c in list(f_row)[:-1]], [r_row[c] for c in list(r_row)[:-1]],
                                   rtol=1e-5, atol=1e-5)
        # the fast run wrote the files of the run with --seed k
        folder = tmp_path / f"fast_s{k}"
        saved = json.load(open(folder / "args.json"))
        art = contract.load_policy(str(folder / "policy.pt"))
        ref_art = contract.load_policy(str(tmp_path / f"ref_s{k}" / "policy.pt"))
        assert saved["seed"] == k and "seeds" not in saved and art["train_args"] == saved
        own = str(tmp_path / f"data_s{k}.npz") if case == "per_seed_datasets" else datasets[k]
        assert art["dataset"] == own
        for key in ("seed", "dataset_fingerprint", "augmented_de_over_du", "policy_step", "augmentation"):
            assert art[key] == ref_art[key], key
        assert open(folder / "progress.csv").read().splitlines()[0] == ",".join(r_row)
        for split in ("train", "heldout") if kw.get("final_eval") else ():
            res = json.load(open(tmp_path / "results" / f"fast_s{k}_{split}.json"))
            assert res["seed"] == k and res["policy"] == str(folder / "policy.pt") and len(res["returns"]) == 2
        if kw.get("checkpoints"):  # the budget's policy, beside the final one
            f_ck, r_ck = (contract.load_policy(str(d / "policy_step50.pt")) for d in (folder, tmp_path / f"ref_s{k}"))
            assert f_ck["checkpoint_step"] == r_ck["checkpoint_step"] == 50
            for name, w in r_ck["state_dict"].items():
                np.testing.assert_allclose(f_ck["state_dict"][name].numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    assert out["method"] == ("dwbc" if case == "dwbc" else "oilca")
    assert [r["method"] for r in ref] == (["dwbc", "oilca"] if case == "per_seed_datasets" else [out["method"]] * 2)
    assert np.abs(np.subtract(*[r["loss_trace"]["policy_loss"] for r in out["runs"]])).max() > 1e-3  # seeds differ
    print(f"{case}: max |fast - reference| / (1 + |reference|) over every loss: {worst:.2e}")


def test_reference_cli_refuses_a_bad_value(tiny_dataset, tmp_path):
    proc = run("train_dwbc.py", "--dataset", tiny_dataset, "--eta", "1", "--out-dir", str(tmp_path / "d"), ok=False)
    assert one_line_error(proc, "--eta"), proc.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("flags", [dict(aug_frac=0.5, cuda_graph=True), dict(adaptive_eta=True, d_update_every=2)],
                         ids=["aug_frac", "per_seed_datasets"])
def test_device_sampling_path_runs(flags, tiny_dataset, augmented, tmp_path, monkeypatch):
    """The GPU's minibatch draw (device generators, IndexChunks, one dataset per seed gathered per replica), run on
    the CPU with CPU generators: every index lands in its replica's pools and training stays finite (--cuda-graph is
    ignored off a GPU)."""
    monkeypatch.setattr(fast_dwbc, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast_dwbc, "minibatch_generator", lambda seed, device: torch.Generator().manual_seed(seed))
    for k, path in enumerate((augmented, augmented) if "aug_frac" in flags else (tiny_dataset, augmented)):
        shutil.copy(path, tmp_path / f"data_s{k}.npz")
    drawn = []

    class Recorded(fast_dwbc.IndexChunks):
        def next(self):
            drawn.append(super().next())
            return drawn[-1]

    monkeypatch.setattr(fast_dwbc, "IndexChunks", Recorded)
    args = fast_dwbc.Args(dataset=str(tmp_path / "data_s{seed}.npz"), seeds=(0, 1), total_steps=20, loss_trace=20,
                          out_dir=str(tmp_path / "fast_s{seed}"), **TINY, **flags)
    out = fast_dwbc.main(args)
    B = args.batch_size
    assert len(drawn) == 20 and drawn[0].shape == (2, 2 * B)
    for k, r in enumerate(out["runs"]):
        assert np.isfinite(r["loss_trace"]["policy_loss"]).all() and len(r["loss_trace"]["policy_loss"]) == 20
        a = dataclasses.replace(args, dataset=str(tmp_path / f"data_s{k}.npz"))
        rows = train_dwbc.dwbc_rows(envs.load_dataset(a.dataset), a)
        idx = torch.stack(drawn)[:, k].numpy()
        assert np.isin(idx[:, :B], rows["expert"]).all() and np.isin(idx[:, B:], rows["unlabelled"]).all()
        if "aug_frac" in flags:  # about half of the expert side augmented rows
            assert 0.3 < np.isin(idx[:, :B], rows["augmented"]).mean() < 0.7


def test_cuda_graph_is_refused_with_adaptive_eta(tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match="--cuda-graph"):
        fast_dwbc.main(fast_dwbc.Args(dataset=tiny_dataset, cuda_graph=True, adaptive_eta=True,
                                      out_dir=str(tmp_path / "d")))
    assert not (tmp_path / "d").exists()
