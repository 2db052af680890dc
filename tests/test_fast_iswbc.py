"""ISW-BC's fast trainer (fast/train_iswbc.py) against its reference (train_iswbc.py): replica k of a fast run follows
the reference run with seed k (both losses and the logged diagnostics, 100 steps, 1e-5), on a raw dataset (ISW-BC, v1
weights) and an augmented one (ISW-BC+CA, v2 weights, τ > 0, D_U's statistics); the fast run writes each seed's files
(run folder, --final-eval results); the GPU's draws, run on the CPU, stay in range; the CLIs refuse a bad value with
one line."""
import json

import numpy as np
import pytest
import torch

import train_iswbc
from conftest import one_line_error, run
from fast import train_iswbc as fast_iswbc
from oilca import contract

TINY = dict(hidden=16, batch_size=32, eval_every=0, eval_episodes=0, threads=1)
STEPS = 100
COLUMNS = ["step", "disc_loss", "policy_loss", "d_expert", "d_union", "weight_mean", "weight_max", "ess_frac",
           "eval_return"]


@pytest.fixture(scope="module")
def augmented(tiny_dataset, tmp_path_factory):
    """tiny_dataset augmented without an iVAE or a sampler to train (augment.py --mode copy --labels oracle): an
    ISW-BC+CA dataset in a fraction of a second."""
    import augment
    out = str(tmp_path_factory.mktemp("aug") / "aug.npz")
    augment.main(augment.Args(dataset=tiny_dataset, out=out, mode="copy", labels="oracle", ratio=0.4, seed=1))
    return out


@pytest.mark.parametrize("case", ["iswbc", "iswbc_ca_v2"])
def test_replicas_follow_reference_runs_and_write_their_files(case, tiny_dataset, augmented, tmp_path):
    dataset, kw = {"iswbc": (tiny_dataset, {}),
                   "iswbc_ca_v2": (augmented, dict(version="v2", tau=0.5, norm_rows="unlabelled"))}[case]
    common = dict(dataset=dataset, total_steps=STEPS, loss_trace=STEPS, **TINY, **kw)
    final_eval = case == "iswbc"
    out = fast_iswbc.main(fast_iswbc.Args(seeds=(0, 1), out_dir=str(tmp_path / "fast_s{seed}"), final_eval_episodes=2,
                                          final_eval=str(tmp_path / "res" / "fast_s{seed}_{split}.json") if final_eval
                                          else None, **common))
    ref = [train_iswbc.main(train_iswbc.Args(seed=k, out_dir=str(tmp_path / f"ref_s{k}"), **common)) for k in (0, 1)]
    assert out["method"] == ref[0]["method"] == ref[1]["method"] == ("iswbc" if case == "iswbc" else "iswbc_ca")
    worst = 0.0
    for k, (fast_run, ref_run) in enumerate(zip(out["runs"], ref)):
        assert fast_run["seed"] == ref_run["seed"] == k
        for name in ("disc_loss", "policy_loss"):
            f, r = fast_run["loss_trace"][name], ref_run["loss_trace"][name]
            assert len(f) == len(r) == STEPS
            np.testing.assert_allclose(f, r, rtol=1e-5, atol=1e-5, err_msg=f"{case}: {name} of seed {k}")
            worst = max(worst, float(np.abs(np.subtract(f, r)).max()))
        # the final logged row (losses, σ(c) on both sides, weight spread) as the reference logged it
        f_row, r_row = fast_run["log"][-1], ref_run["log"][-1]
        assert list(f_row) == list(r_row) == COLUMNS
        np.testing.assert_allclose([f_row[c] for c in COLUMNS[:-1]], [r_row[c] for c in COLUMNS[:-1]],
                                   rtol=1e-5, atol=1e-5)
        # the fast run wrote the files of the run with --seed k
        folder = tmp_path / f"fast_s{k}"
        saved = json.load(open(folder / "args.json"))
        art = contract.load_policy(str(folder / "policy.pt"))
        ref_art = contract.load_policy(str(tmp_path / f"ref_s{k}" / "policy.pt"))
        assert saved["seed"] == k and "seeds" not in saved and art["train_args"] == saved
        for key in ("method", "seed", "dataset", "dataset_fingerprint", "policy_step", "augmentation"):
            assert art.get(key) == ref_art.get(key), key
        for name, w in ref_art["state_dict"].items():
            np.testing.assert_allclose(art["state_dict"][name].numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
        assert open(folder / "progress.csv").read().splitlines()[0] == ",".join(COLUMNS)
        for split in ("train", "heldout") if final_eval else ():
            res = json.load(open(tmp_path / "res" / f"fast_s{k}_{split}.json"))
            assert res["seed"] == k and res["policy"] == str(folder / "policy.pt") and len(res["returns"]) == 2
    assert np.abs(np.subtract(*[r["loss_trace"]["policy_loss"] for r in out["runs"]])).max() > 1e-3  # seeds differ
    print(f"{case}: max |fast - reference| over every loss: {worst:.2e}")


def test_device_sampling_path_runs(augmented, tmp_path, monkeypatch):
    """The GPU's draws (device generators, IndexChunks of rows, shuffles and λ), run on the CPU with CPU generators:
    rows of D_E and of the union, a permutation, λ in [0, 1), and finite training (--cuda-graph is ignored off a
    GPU)."""
    monkeypatch.setattr(fast_iswbc, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast_iswbc, "minibatch_generator", lambda seed, device: torch.Generator().manual_seed(seed))
    drawn = []

    class Recorded(fast_iswbc.IndexChunks):
        def next(self):
            drawn.append(super().next())
            return drawn[-1]

    monkeypatch.setattr(fast_iswbc, "IndexChunks", Recorded)
    args = fast_iswbc.Args(dataset=augmented, seeds=(0, 1), total_steps=20, loss_trace=20, cuda_graph=True,
                           out_dir=str(tmp_path / "fast_s{seed}"), **TINY)
    out = fast_iswbc.main(args)
    B, data = args.batch_size, contract.load_dataset(augmented)
    idx, lam = torch.stack(drawn[0::2]).numpy(), torch.stack(drawn[1::2]).numpy()
    assert idx.shape == (20, 2, 3 * B) and lam.shape == (20, 2, B, 1) and ((0 <= lam) & (lam < 1)).all()
    assert np.isin(idx[..., :B], np.flatnonzero(data["expert"])).all()
    assert ((0 <= idx[..., B:2 * B]) & (idx[..., B:2 * B] < len(data["rewards"]))).all()
    assert (np.sort(idx[..., 2 * B:], -1) == np.arange(B)).all()
    for r in out["runs"]:
        for name in ("disc_loss", "policy_loss"):
            assert len(r["loss_trace"][name]) == 20 and np.isfinite(r["loss_trace"][name]).all()


def test_clis_refuse_a_bad_value(tiny_dataset, tmp_path):
    proc = run("train_iswbc.py", "--dataset", tiny_dataset, "--tau", "-1", "--out-dir", str(tmp_path / "d"), ok=False)
    assert one_line_error(proc, "--tau"), proc.stderr
    proc = run("fast/train_iswbc.py", "--dataset", tiny_dataset, "--seeds", "0", "1", "--out-dir", str(tmp_path / "d"),
               ok=False)
    assert one_line_error(proc, "--out-dir must contain {seed}"), proc.stderr
    assert not (tmp_path / "d").exists()
