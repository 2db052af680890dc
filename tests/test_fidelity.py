"""fidelity.py: the errors of augmented rows against the toy's true counterfactuals."""
import json

import numpy as np
import pytest

from oilca import contract

import envs
import fidelity
from envs import toy as toy_env
from conftest import one_line_error, run


@pytest.fixture(scope="module")
def augmented(tiny_augmented_args):
    return tiny_augmented_args

def rewrite(path, out, change):
    """A copy of the dataset at `path` with change(arrays, rows, env) applied to its augmented rows."""
    data = envs.load_dataset(path)
    rows = np.flatnonzero(data["augmented"])
    change(data, rows, toy_env.make_env(data["metadata"]))
    contract.save_npz(out, {**{k: v for k, v in data.items() if k != "metadata"},
                            "metadata": contract.dataset_arrays_from_meta(data["metadata"])})
    return out


def test_true_counterfactuals_score_zero_and_a_known_shift_scores_its_size(augmented, tmp_path):
    def exact(data, rows, env):
        p, u = data["aug_partner"][rows], data["exogenous"][rows]
        s1 = env.transition(data["observations"][p], data["actions"][p], u)
        a1 = env.expert_action(s1)
        data["observations"][rows], data["actions"][rows] = s1, a1
        data["next_observations"][rows] = env.transition(s1, a1, u)

    def shifted(data, rows, env):
        exact(data, rows, env)
        data["observations"][rows] += np.array([0.03, -0.04])  # ‖shift‖ = 0.05 (labels stay the old ones)

    ok = rewrite(augmented.out, str(tmp_path / "exact.npz"), exact)
    off = rewrite(augmented.out, str(tmp_path / "shifted.npz"), shifted)
    res = fidelity.main(fidelity.Args(augmented=(ok, off, augmented.out), names=("exact", "shifted", "ivae"),
                                      sampler=augmented.sampler_out, out=str(tmp_path / "f.json"),
                                      table=str(tmp_path / "f.md"), figure=str(tmp_path / "f.png")))
    rows = {r["name"]: r for r in res["rows"]}
    for key in ("state_error", "next_state_error", "label_error"):
        assert rows["exact"][key]["p90"] == pytest.approx(0, abs=1e-6)  # float32 storage
    assert rows["shifted"]["state_error"]["median"] == pytest.approx(0.05, abs=1e-6)
    assert rows["ivae"]["state_error"]["median"] > 1e-4  # a fitted decoder is not exact
    assert json.load(open(tmp_path / "f.json"))["rows"][0]["name"] == "exact" and (tmp_path / "f.png").exists()
    table = open(tmp_path / "f.md").read().splitlines()
    assert len(table) == 2 + 4 and table[2].startswith("| exact | 0.000 / 0.000 |") and "| shifted | 0.050 / 0.050 |" in table[3]


def test_copy_row_is_the_partners_own_next_state(augmented, tmp_path):
    res = fidelity.main(fidelity.Args(augmented=(augmented.out,), sampler=augmented.sampler_out,
                                      out=str(tmp_path / "f.json"), table=None, figure=None))
    data = envs.load_dataset(augmented.out)
    rows = np.flatnonzero(data["augmented"])
    p, env = data["aug_partner"][rows], toy_env.make_env(data["metadata"])
    err = np.linalg.norm(data["next_observations"][p] - env.transition(data["observations"][p], data["actions"][p],
                                                                       data["exogenous"][rows]), axis=-1)
    copy = next(r for r in res["rows"] if r["name"] == "copy partner s'")
    assert copy["state_error"]["median"] == pytest.approx(float(np.median(err)))
    assert copy["n_rows"] == len(rows) and "next_state_error" not in copy


def test_refusals_are_one_line(tiny_dataset, augmented, tmp_path):
    proc = run("fidelity.py", "--augmented", tiny_dataset, "--out", str(tmp_path / "f.json"), ok=False)
    assert one_line_error(proc, "no augmented rows"), proc.stderr
    proc = run("fidelity.py", "--augmented", augmented.out, "--names", "a", "b", "--out", str(tmp_path / "f.json"), ok=False)
    assert one_line_error(proc, "--names"), proc.stderr
    before = open(augmented.out, "rb").read()
    proc = run("fidelity.py", "--augmented", augmented.out, "--out", augmented.out, ok=False)
    assert one_line_error(proc, "refusing to overwrite an input"), proc.stderr
    assert open(augmented.out, "rb").read() == before
    assert not (tmp_path / "f.json").exists()


def test_a_name_of_its_own_row_and_a_sampler_of_another_env_are_refused(augmented, tmp_path):
    import torch.nn as nn
    proc = run("fidelity.py", "--augmented", augmented.out, "--names", fidelity.COPY_ROW, "--out",
               str(tmp_path / "f.json"), ok=False)
    assert one_line_error(proc, "this table's own copy row"), proc.stderr
    other = contract.policy_artifact(nn.Sequential(nn.Linear(5, 3)), np.zeros(5), np.ones(5), [-1.0] * 3, [1.0] * 3,
                                     env={"env_id": "dmc:cartpole-swingup"}, method="bc_exp", seed=0,
                                     dataset_fingerprint="x")
    contract.save_policy(str(tmp_path / "other.pt"), other)
    proc = run("fidelity.py", "--augmented", augmented.out, "--sampler", str(tmp_path / "other.pt"), "--out",
               str(tmp_path / "f.json"), ok=False)
    assert one_line_error(proc, "a policy of dmc:cartpole-swingup"), proc.stderr
    assert not (tmp_path / "f.json").exists()
