"""The policy artifact (contract.py) and evaluate.py: round trip, dims checks, results."""
import json

import numpy as np
import pytest
import torch

from oilca import contract
import evaluate
from training import policy
import train_bc
import train_dwbc


def make_artifact(obs_dim=2, act_dim=2, env=None):
    torch.manual_seed(0)
    actor = policy.Actor(obs_dim, act_dim, hidden=8)
    norm = policy.Normalizer(np.random.default_rng(0).normal(size=(50, obs_dim)), [-2.0] * act_dim, [1.0] * act_dim)
    env = env or {"env_id": "toy", "obs_dim": obs_dim, "act_dim": act_dim}
    return actor, norm, policy.artifact(actor, norm, method="m", seed=3, env=env, dataset_fingerprint="f")


def test_round_trip_reproduces_the_actor(tmp_path):
    actor, norm, art = make_artifact()
    path = str(tmp_path / "policy.pt")
    contract.save_policy(path, art)
    loaded = contract.load_policy(path)
    assert loaded["method"] == "m" and loaded["seed"] == 3 and loaded["config"]["obs_dim"] == 2
    obs = np.random.default_rng(1).normal(size=(7, 2)).astype(np.float32)
    with torch.no_grad():
        mu, _ = actor(torch.as_tensor(norm.obs(obs)))
    expected = -2.0 + (np.tanh(mu.numpy()) + 1) / 2 * 3.0
    np.testing.assert_allclose(contract.build_policy(loaded)(obs), expected, atol=1e-5)
    # loadable with weights_only, i.e. without this project's code
    raw = torch.load(path, weights_only=True)
    assert raw["kind"] == "policy"


def test_artifact_errors(tmp_path):
    _, _, art = make_artifact()
    with pytest.raises(ValueError, match="needs 'method'"):
        contract.save_policy(str(tmp_path / "p.pt"), {k: v for k, v in art.items() if k != "method"})
    with pytest.raises(ValueError, match="Linear, ReLU and Tanh"):
        contract.policy_artifact(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ELU()), [0, 0], [1, 1], [-1, -1], [1, 1])
    bad = dict(art, obs_mean=[0.0])
    contract.save_torch(str(tmp_path / "bad.pt"), bad)
    with pytest.raises(contract.ContractError, match="'obs_mean' has 1 entries, expected 2"):
        contract.load_policy(str(tmp_path / "bad.pt"))


def test_evaluate_refuses_mismatched_dims(tiny_dataset, tmp_path):
    _, _, art = make_artifact(obs_dim=3, act_dim=2, env={"env_id": "toy", "obs_dim": 3, "act_dim": 2})
    path = str(tmp_path / "policy.pt")
    contract.save_policy(path, art)
    with pytest.raises(contract.ContractError, match=r"policy expects obs_dim=3, act_dim=2 but env 'toy' has obs_dim=2"):
        evaluate.main(evaluate.Args(policy=path, env_dataset=tiny_dataset, out=str(tmp_path / "r.json")))
    assert not (tmp_path / "r.json").exists()


def test_evaluate_writes_results(tiny_dataset, tmp_path):
    out = str(tmp_path / "bc")
    train_bc.main(train_bc.Args(dataset=tiny_dataset, out_dir=out, total_steps=30, hidden=16, eval_every=0, eval_episodes=4))
    res = evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", split=("heldout",), episodes=6, out=str(tmp_path / "r.json")))[0]
    saved = json.load(open(tmp_path / "r.json"))
    for key in ("method", "seed", "env", "split", "returns", "args", "classes"):
        assert key in saved
    assert saved["method"] == "bc_exp" and saved["split"] == "heldout" and saved["classes"] == [2]
    assert len(saved["returns"]) == 6 and saved == json.loads(json.dumps(res))
    # the same evaluation seed gives the same returns; another seed other returns
    again = evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", split=("heldout",), episodes=6, out=str(tmp_path / "r2.json")))[0]
    other = evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", split=("heldout",), episodes=6, seed=1, out=str(tmp_path / "r3.json")))[0]
    assert again["returns"] == saved["returns"] != other["returns"]
    ref, ref_h = evaluate.main(evaluate.Args(reference="expert", env_dataset=tiny_dataset, split=("train", "heldout"), episodes=6,
                                             out=str(tmp_path / "e_{split}.json")))
    assert ref["method"] == "reference_expert" and ref["split"] == "train" and ref_h["split"] == "heldout"
    assert json.load(open(tmp_path / "e_heldout.json"))["classes"] == [2]
    with pytest.raises(ValueError, match="must contain {split}"):
        evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", split=("train", "heldout"), out=str(tmp_path / "x.json")))


def test_methods_refuse_an_empty_expert_set(tiny_dataset, tmp_path):
    arrays = dict(np.load(tiny_dataset))
    arrays["expert"] = np.zeros_like(arrays["expert"])
    path = str(tmp_path / "no_expert.npz")
    contract.save_npz(path, arrays)
    for run in (lambda: train_dwbc.main(train_dwbc.Args(dataset=path, out_dir=str(tmp_path / "d"))),
                lambda: train_bc.main(train_bc.Args(dataset=path, out_dir=str(tmp_path / "b")))):
        with pytest.raises(contract.ContractError, match="D_E is empty"):
            run()
