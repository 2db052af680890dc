"""BCND's fast path (fast/train_bcnd.py) against its reference (train_bcnd.py): replica k of a run with several seeds
takes the steps of the reference run with seed k, writes that run's files, and the reference's CLI refuses bad flags
in one line."""
import json

import numpy as np
import torch

import train_bcnd as ref
from conftest import one_line_error, run
from fast import train_bcnd as fast
from oilca import contract

TINY = dict(hidden=16, n_hidden=1, batch_size=64, n_policies=2, threads=1)
STEPS = 100


def test_replicas_follow_reference_runs(tiny_dataset, tmp_path):
    """The equivalence contract: per-step losses of the first 100 steps (two rounds, so round 2's weights R¹ count),
    the rows logged every round and log R of every row, to 1e-5."""
    common = dict(TINY, dataset=tiny_dataset, n_rounds=2, total_steps=STEPS, loss_trace=STEPS, eval_episodes=0)
    out = fast.main(fast.Args(seeds=(0, 1), out_dir=str(tmp_path / "f_s{seed}"), **common))
    singles = [ref.main(ref.Args(seed=k, out_dir=str(tmp_path / f"r{k}"), **common)) for k in (0, 1)]
    assert [r["seed"] for r in out["runs"]] == [0, 1]
    for b, s in zip(out["runs"], singles):
        assert len(b["loss_trace"]) == len(s["loss_trace"]) == STEPS
        np.testing.assert_allclose(b["loss_trace"], s["loss_trace"], rtol=1e-5, atol=1e-5)
        assert len(b["log"]) == len(s["log"]) == 2 and b["log"][0].keys() == s["log"][0].keys()
        for name in s["log"][0]:
            np.testing.assert_allclose([r[name] for r in b["log"]], [r[name] for r in s["log"]], rtol=1e-5, atol=1e-5,
                                       err_msg=name)
        np.testing.assert_allclose(b["log_r"], s["log_r"], rtol=1e-5, atol=1e-4)
    assert np.abs(np.subtract(*[r["loss_trace"] for r in out["runs"]])).max() > 1e-3  # the replicas differ


def test_fast_run_writes_each_seeds_files(tiny_dataset, tmp_path):
    """Each replica's run folder and final evaluation; with in-training evaluations (they draw from torch's
    generator) replica 1 still logs what the reference run with seed 1 logs."""
    common = dict(TINY, dataset=tiny_dataset, n_rounds=2, epochs=1, eval_episodes=1, final_eval_episodes=2)
    out = fast.main(fast.Args(seeds=(0, 1), out_dir=str(tmp_path / "bcnd_s{seed}"),
                              final_eval=str(tmp_path / "results" / "bcnd_s{seed}_{split}.json"), **common))
    single = ref.main(ref.Args(seed=1, out_dir=str(tmp_path / "alone"), **common))
    for name in single["log"][0]:
        np.testing.assert_allclose([r[name] for r in out["runs"][1]["log"]], [r[name] for r in single["log"]],
                                   rtol=1e-5, atol=1e-5, err_msg=name)
    for k in (0, 1):
        folder = tmp_path / f"bcnd_s{k}"
        art = contract.load_policy(str(folder / "policy.pt"))
        assert art["method"] == "bcnd" and art["seed"] == k and art["train_args"]["seed"] == k
        assert "seeds" not in art["train_args"]
        assert json.load(open(folder / "args.json"))["out_dir"] == str(folder)
        assert len(open(folder / "progress.csv").read().splitlines()) == 1 + 2  # header + a row per round
        for split in ("train", "heldout"):
            result = json.load(open(tmp_path / "results" / f"bcnd_s{k}_{split}.json"))
            assert result["seed"] == k and result["split"] == split and len(result["returns"]) == 2


def test_device_sampling_path(tiny_dataset, tmp_path, monkeypatch):
    """The GPU's minibatches (drawn here on the CPU): every member's epoch is `size` distinct rows of its own split,
    padded to whole minibatches; a run on them trains each replica on its own draws."""
    splits = [np.array([0, 3, 5, 7, 9]), np.array([1, 2, 4, 6]), np.array([8, 10, 11, 12]), np.array([13, 14, 15, 16])]
    split_rows = torch.zeros(4, 5, dtype=torch.long)
    for i, s in enumerate(splits):
        split_rows[i, :len(s)] = torch.as_tensor(s)
    lengths = torch.tensor([len(s) for s in splits])
    gens = [torch.Generator().manual_seed(k) for k in (0, 1)]  # two replicas of K = 2 members
    rows = fast.device_epoch_rows(split_rows, lengths, 4, gens, n_steps=2, batch_size=3)
    assert rows.shape == (2, 4, 3)
    epoch = rows.transpose(0, 1).reshape(4, 6)
    for i, s in enumerate(splits):
        assert len(set(epoch[i, :4].tolist())) == 4 and set(epoch[i, :4].tolist()) <= set(s.tolist())
        assert epoch[i, 4:].tolist() == [0, 0]
    monkeypatch.setattr(fast, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    out = fast.main(fast.Args(seeds=(0, 1), out_dir=str(tmp_path / "d_s{seed}"), dataset=tiny_dataset, n_rounds=1,
                              epochs=2, eval_episodes=0, loss_trace=STEPS, **TINY))
    traces = [r["loss_trace"] for r in out["runs"]]
    assert len(traces[0]) == len(traces[1]) > 0 and np.isfinite(traces).all() and traces[0] != traces[1]


def test_reference_cli_refuses_a_bad_value(tiny_dataset, tmp_path):
    proc = run("train_bcnd.py", "--dataset", tiny_dataset, "--out-dir", str(tmp_path / "x"), "--n-rounds", "0",
               ok=False)
    assert one_line_error(proc, "--n-rounds"), proc.stderr
    assert not (tmp_path / "x").exists()
