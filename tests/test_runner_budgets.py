"""runner.py --budgets end to end on a tiny toy grid (its own file, so that a parallel test run can give it a worker of
its own beside tests/test_runner.py's grids)."""
import json

import runner
from test_runner import TINY, grid


def test_budget_study_trains_once_and_scores_every_budget(tmp_path, capsys):
    """--budgets: one run per method and seed to the largest budget, the smaller budgets' policies saved on the way and
    evaluated like any result; OILCA's sampler stays at --steps, oilca_matched's is BC-exp's policy at each budget;
    --select-budget-folds chooses each method's budget on held-out D_E episodes. It runs end to end on a tiny grid."""
    out = runner.main(grid(tmp_path, budgets=(20, 40), methods=("bc_exp", "dwbc", "oilca", "oilca_matched"),
                           fig5_ratios=(), seeds=(0,), select_budget_folds=1, select_folds=2,
                           collect_flags=TINY["collect_flags"] + " --positive-frac 0.5 --expert-episodes 3"))
    cmd = {j["name"]: j["command"] for j in out["jobs"]}
    assert "--total-steps 40 --checkpoints 20 " in cmd["dwbc_b40_s0"] and "--total-steps 40 --checkpoints 20 " in cmd["oilca_b40_s0"]
    assert "--policy runs/" not in cmd["dwbc_b20_s0"] and "dwbc_b40_s0/policy_step20.pt" in cmd["dwbc_b20_s0"]
    assert "--total-steps 40 " in cmd["bc_exp_s0"] and "--checkpoints" not in cmd["bc_exp_s0"]  # OILCA's sampler
    assert "dwbc_s0" not in cmd  # DWBC is no sampler here: only its budget run
    res = tmp_path / "results" / "toy"
    for name in ("bc_exp_b20_s0", "bc_exp_b40_s0", "dwbc_b20_s0", "dwbc_b40_s0", "oilca_b20_s0", "oilca_b40_s0"):
        for split in ("train", "heldout"):
            with open(res / f"{name}_{split}.json") as f:
                r = json.load(f)
            assert r["train_args"]["total_steps"] == 40 and r.get("policy_step") == (20 if "_b20_" in name else 40)
    # the 20-step policy of the 40-step run is the 20-step run's: BC-exp's sampler ran 40 steps, so compare budgets
    with open(res / "bc_exp_b40_s0_train.json") as f, open(res / "bc_exp_s0_train.json") as g:
        assert json.load(f)["returns"] == json.load(g)["returns"]
    # the matched sampler: at budget b, BC-exp's policy after b steps labels the rows; OILCA trains b steps on them
    assert "bc_exp_b40_s0/policy_step20.pt" in cmd["augment_m20_r0.5_s0"]
    assert "bc_exp_b40_s0/policy.pt" in cmd["augment_m40_r0.5_s0"]
    for b in (20, 40):
        with open(res / f"oilca_matched_b{b}_s0_train.json") as f:
            r = json.load(f)
        assert r["method"] == f"oilca_matched_b{b}" and r["policy_step"] == b
        assert r["augmentation"]["sampler"] == {"kind": "bc_exp", "steps": b, "seed": 0}
    with open(res / "oilca_b40_s0_train.json") as f:  # the plain OILCA's sampler stays at --steps
        assert json.load(f)["augmentation"]["sampler"]["steps"] == 40
    # the budget chosen without rollouts: fold runs of seed 0 without the held-out D_E episodes
    assert "/data/toy_cv2_f0.npz --seed 0 " in cmd["bsel_dwbc_f0_b40_s0"]
    assert "/data/toy_cv2_f0_aug_m20_r0.5_s0.npz --seed 0 " in cmd["bsel_oilca_matched_b20_cv2_f0_s0"]
    assert "runs/toy/ivae_cv2_f0/ivae.pt" in cmd["augment_cv2_f0_r0.5_s0"]  # the fold's own iVAE
    for fam in ("bc_exp", "dwbc", "oilca", "oilca_matched"):
        with open(res / f"budget_selection_{fam}.json") as f:
            rec = json.load(f)
        assert rec["of_method"] == fam and rec["choice"] in (20, 40) and rec["fold_ids"] == [0]
        for split in ("train", "heldout"):
            with open(res / f"{fam}_sel_s0_{split}.json") as f, \
                    open(res / f"{fam}_b{rec['choice']}_s0_{split}.json") as g:
                sel, src = json.load(f), json.load(g)
            assert sel["method"] == f"{fam}_sel" and sel["returns"] == src["returns"]
    with open(res / "summary.json") as f:
        summary = json.load(f)
    assert {e["family"] for e in summary["budget_selected_cells"]} == {"bc_exp", "dwbc", "oilca", "oilca_matched"}
    assert "chosen on held-out D_E" in (res / "table.md").read_text()
