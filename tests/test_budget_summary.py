"""scripts/budget_summary.py: the budget study's verdict over data draws, from hand-written result folders."""
import json
import os

import pytest

from conftest import load_script, one_line_error, run

SEEDS = (0, 1, 2)


def write(folder, method, values, policy_step=None, env="toy", split="train"):
    os.makedirs(folder, exist_ok=True)
    for s, v in zip(SEEDS, values):
        r = {"method": method, "seed": s, "split": split, "env": env, "returns": [v, v], "mean_return": v}
        if policy_step:
            r["policy_step"] = policy_step
        with open(os.path.join(folder, f"{method}_s{s}_{split}.json"), "w") as f:
            json.dump(r, f)


def draw(folder, shift):
    """OILCA above DWBC above BC-exp at 100 steps by a wide margin; at 10 steps BC-exp first."""
    for b, table in ((10, {"bc_exp": 3.0, "dwbc": 2.0, "oilca": 1.0}), (100, {"bc_exp": 1.0, "dwbc": 5.0, "oilca": 9.0})):
        for fam, v in table.items():
            write(folder, f"{fam}_b{b}", [v + shift + 0.1 * s for s in SEEDS], policy_step=b)
    write(folder, "oilca_sel", [9.0 + shift + 0.1 * s for s in SEEDS], policy_step=100)
    write(folder, "dwbc_sel", [2.0 + shift + 0.1 * s for s in SEEDS], policy_step=10)


def late_seed(folder):
    """A later seed that has landed in one cell only: seed 3 of BC-exp at 100 steps, far above the rest (99)."""
    extra = {"method": "bc_exp_b100", "seed": 3, "split": "train", "env": "toy", "returns": [99.0, 99.0],
             "mean_return": 99.0, "policy_step": 100}
    with open(os.path.join(folder, "bc_exp_b100_s3_train.json"), "w") as f:
        json.dump(extra, f)


def test_summary_over_draws(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(3)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    out = str(tmp_path / "summary.json")
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- budget-summary: summary -->\nold\n<!-- /budget-summary -->\nend\n")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--doc", str(doc), "--resamples", "500")
    with open(out) as f:
        s = json.load(f)
    cell = next(c for c in s["cells"] if (c["family"], c["budget"]) == ("oilca", 100))
    assert cell["mean"] == pytest.approx(10.1) and cell["n_groups"] == 3 and cell["n"] == 9  # 9 + mean shift 1 + 0.1
    gap = next(g for g in s["gaps"] if (g["x"], g["y"], g["budget"]) == ("oilca", "dwbc", 100))
    assert gap["mean"] == pytest.approx(4.0) and gap["ci"] == pytest.approx([4.0, 4.0])
    top = next(o for o in s["orderings"] if o["budget"] == 100)
    assert top["over_draws"] == "OILCA > DWBC > BC-exp" and top["paper_order_oilca"]["over_draws"] is True
    sel = next(o for o in s["orderings"] if o["budget"] == "selected")
    assert sel["over_draws"] == "OILCA > DWBC"
    within = {(e["family"], e["draw"]): e["within"] for e in s["selection"]}
    assert within[("oilca", "d0")] and not within[("dwbc", "d0")]  # DWBC's chosen 10 steps is far below its 100
    text = doc.read_text()
    assert text.startswith("intro\n<!-- budget-summary: summary -->") and "old" not in text and text.endswith("end\n")
    assert "| 100 |" in text and "chosen on held-out D_E" in text


def test_a_draw_without_the_chosen_budget_says_not_run(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    for name in os.listdir(folders[0]):  # draw 0 has no held-out choice yet
        if "_sel_" in name:
            os.remove(os.path.join(folders[0], name))
    out = str(tmp_path / "summary.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--resamples", "200")
    with open(out) as f:
        s = json.load(f)
    sel = next(o for o in s["orderings"] if o["budget"] == "selected")
    assert sel["per_draw"][0] == "" and sel["per_draw"][1] == "OILCA > DWBC"
    top = next(o for o in s["orderings"] if o["budget"] == 100)
    assert top["paper_order_oilca"]["per_draw"] == [True, True]
    assert "per draw: d0: not run; d1: OILCA > DWBC" in s["markdown"]


def test_draws_of_different_envs_are_refused(tmp_path):
    draw(str(tmp_path / "a"), 0)
    write(str(tmp_path / "b"), "dwbc_b10", [1.0, 2.0, 3.0], policy_step=10, env="dmc:cartpole-swingup")
    proc = run("scripts/budget_summary.py", "--results", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
               str(tmp_path / "s.json"), ok=False)
    assert one_line_error(proc, "several envs") and not os.path.exists(tmp_path / "s.json")


def test_again_remakes_the_summary_from_its_record(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    out = str(tmp_path / "summary.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--resamples", "300")
    first = open(out).read()
    os.remove(out)
    assert one_line_error(run("scripts/budget_summary.py", "--again", str(tmp_path / "missing.json"), ok=False),
                          "not a summary this script wrote")
    with open(str(tmp_path / "copy.json"), "w") as f:
        f.write(first)
    run("scripts/budget_summary.py", "--again", str(tmp_path / "copy.json"))
    again = json.loads((tmp_path / "copy.json").read_text())
    assert again["markdown"] == json.loads(first)["markdown"] and again["inputs"]["resamples"] == 300


def test_the_study_script_runs_the_three_draws(tmp_path):
    """scripts/budget_study.sh --dry-run: the runner's jobs of each draw (extra flags reach every call)."""
    import subprocess
    from conftest import ROOT
    proc = subprocess.run(["bash", "scripts/budget_study.sh", "--dry-run", "--root", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for slug in ("toy_study", "toy_study_d1", "toy_study_d2"):
        assert f"runs/{slug}/oilca_matched_b100000_s4 " in proc.stdout and f"results/{slug}/budget_selection" in proc.stdout
    assert "--flush-denormal" in proc.stdout and not (tmp_path / "results").exists()
    select = [line for line in proc.stdout.splitlines() if " select_budget.py " in line]
    assert select and all("--seeds 0 1 2 --splits" in line for line in select)  # seeds 3-4 need no selection run


def test_the_study_script_runs_a_dmc_row_at_table_5s_size(tmp_path):
    """BENCH=dmc:cartpole-swingup: the row's size and D_E count, two folds of one D_E episode each for the budget
    choice, budgets to 50k, the same two passes; another task is refused with one line."""
    import subprocess
    from conftest import ROOT
    env = {**os.environ, "BENCH": "dmc:cartpole-swingup"}
    proc = subprocess.run(["bash", "scripts/budget_study.sh", "--dry-run", "--root", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    collect = next(line for line in proc.stdout.splitlines() if " collect_data.py " in line)
    assert "--dmc.episodes 40 --expert-episodes 2" in collect and "/data/dmc_cartpole-swingup_t5study.npz" in collect
    select = [line for line in proc.stdout.splitlines() if " select_budget.py " in line]
    assert select and all("--folds 2 " in line and "--budgets 5000 20000 50000 " in line
                          and "--seeds 0 1 2 --splits" in line for line in select)
    assert "runs/dmc_cartpole-swingup_t5study/oilca_matched_b50000_s4 " in proc.stdout
    # OILCA's fixed sampler is BC-exp at 5,000 steps, as on the toy (the DMC preset's default would be 10,000)
    sampler = next(line for line in proc.stdout.splitlines() if line.split()[1:2] == ["bc_exp_s0"])
    assert "--total-steps 5000 " in sampler and "bc_exp_s0/policy.pt " in next(
        line for line in proc.stdout.splitlines() if line.split()[1:2] == ["augment_r1.0_s0"])
    bad = subprocess.run(["bash", "scripts/budget_study.sh", "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "BENCH": "dmc:cheetah-run"}, timeout=60)
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "BENCH=dmc:cheetah-run" in bad.stderr


def test_seeds_keeps_the_summary_on_the_seeds_given(tmp_path):
    """--seeds 0 1 2: a draw's later seed (here seed 3 of BC-exp only) is left out, and --again keeps the choice."""
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    late_seed(folders[0])
    cell = lambda s: next(c for c in s["cells"] if (c["family"], c["budget"]) == ("bc_exp", 100))  # noqa: E731
    out_all, out_kept = str(tmp_path / "all.json"), str(tmp_path / "kept.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out_all, "--resamples", "300")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out_kept, "--resamples", "300",
        "--seeds", "0", "1", "2")
    every, kept = json.loads(open(out_all).read()), json.loads(open(out_kept).read())
    assert cell(every)["mean"] > 10 and cell(kept)["mean"] == pytest.approx(1.6)  # (1.1 + 2.1) / 2: seed 3 left out
    assert kept["inputs"]["seeds"] == [0, 1, 2] and "seeds" not in every["inputs"]
    assert kept["markdown"].startswith("Training seeds 0, 1, 2 of every draw only")
    first = open(out_kept).read()
    run("scripts/budget_summary.py", "--again", out_kept)
    assert json.loads(open(out_kept).read())["markdown"] == json.loads(first)["markdown"]
    assert one_line_error(run("scripts/budget_summary.py", "--results", *folders, "--out", str(tmp_path / "x.json"),
                              "--seeds", ok=False), "--seeds")
    assert not os.path.exists(tmp_path / "x.json")


def test_the_per_draw_table_gives_every_draw_and_says_where_seeds_are_fewer(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    os.remove(os.path.join(folders[1], "dwbc_b10_s2_train.json"))  # draw 1's DWBC at 10 steps: seeds 0-1 only
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- budget-summary: s -->\n<!-- /budget-summary -->\n")
    run("scripts/budget_summary.py", "--results", *folders, "--out", str(tmp_path / "s.json"), "--doc", str(doc),
        "--resamples", "200")
    text = doc.read_text()
    assert "| draw | budget (steps) | BC-exp | DWBC | OILCA |" in text
    row = next(line for line in text.splitlines() if line.startswith("| d1 (3 seeds) | 100 |"))
    assert row.split(" | ")[4].startswith("10.10 [10.00, 10.20]")  # OILCA: 9 + shift 1 + 0.1·seed, seeds 0-2
    row10 = next(line for line in text.splitlines() if line.startswith("| d1 (3 seeds) | 10 |"))
    assert row10.split(" | ")[3] == "3.05 [3.00, 3.10] (2 seeds)"  # DWBC: 2 + 1 + 0.1·seed, seeds 0-1
    assert "| d0 (3 seeds) | 10 |" in text and "(2 seeds)" not in text.split("| d1 (3 seeds)")[0]


def test_complete_seeds_keeps_each_draw_on_the_seeds_every_cell_has(tmp_path):
    """A draw whose seeds 3-4 are landing (here seed 3 of BC-exp at 100 steps only): --complete-seeds leaves it out
    of that draw, says so, keeps the other draw's seeds, and --again keeps the choice."""
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    late_seed(folders[1])
    out = str(tmp_path / "s.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--resamples", "300", "--complete-seeds")
    s = json.loads(open(out).read())
    cell = next(c for c in s["cells"] if (c["family"], c["budget"]) == ("bc_exp", 100))
    assert cell["per_draw"][1]["n"] == 3 and cell["per_draw"][1]["mean"] == pytest.approx(2.1)  # 1 + 1 + 0.1·seed
    assert s["seeds_per_draw"] == [{"draw": "d0", "seeds": [0, 1, 2], "left_out": []},
                                   {"draw": "d1", "seeds": [0, 1, 2], "left_out": [3]}]
    assert s["markdown"].startswith("Per draw, the training seeds every cell of the draw has (`--complete-seeds`): "
                                    "d0 0, 1, 2; d1 0, 1, 2 (seed 3 in some cells only, not read).")
    first = open(out).read()
    run("scripts/budget_summary.py", "--again", out)
    assert open(out).read() == first
    plain = str(tmp_path / "plain.json")  # without the flag the cell reads seed 3 too (the old behaviour)
    run("scripts/budget_summary.py", "--results", *folders, "--out", plain, "--resamples", "300")
    p = json.loads(open(plain).read())
    assert next(c for c in p["cells"] if (c["family"], c["budget"]) == ("bc_exp", 100))["per_draw"][1]["n"] == 4


def test_complete_seeds_leaves_a_landing_extra_family_out_without_moving_the_draw(tmp_path):
    """ORIL run once at the largest budget, landing job by job: in a draw where it has seeds 0-1 of the study's 0-2 it
    is left out of that draw (named, with the seeds it has) and the study's families keep seeds 0-2; where it has
    every seed it is read beside them, and it is ranked over draws only once every draw has it."""
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    write(folders[0], "oril_b100", [20.0, 20.1, 20.2], policy_step=100)
    write(folders[1], "oril_b100", [30.0, 30.1], policy_step=100)  # seeds 0-1 only
    out = str(tmp_path / "s.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--resamples", "300", "--complete-seeds")
    s = json.loads(open(out).read())
    assert s["seeds_per_draw"] == [{"draw": "d0", "seeds": [0, 1, 2], "left_out": []},
                                   {"draw": "d1", "seeds": [0, 1, 2], "left_out": [],
                                    "families_left_out": {"oril": [0, 1]}}]
    oril = next(c for c in s["cells"] if (c["family"], c["budget"]) == ("oril", 100))
    assert oril["per_draw"][1] is None and oril["per_draw"][0]["n"] == 3 and oril["n_groups"] == 1
    dwbc = next(c for c in s["cells"] if (c["family"], c["budget"]) == ("dwbc", 100))
    assert [d["n"] for d in dwbc["per_draw"]] == [3, 3]
    top = next(o for o in s["orderings"] if o["budget"] == 100)
    assert top["per_draw"] == ["ORIL > OILCA > DWBC > BC-exp", "OILCA > DWBC > BC-exp"]
    assert top["over_draws"] == "OILCA > DWBC > BC-exp" and top["not_on_every_draw"] == ["oril"]  # one draw of two
    assert "OILCA > DWBC > BC-exp (over draws; ORIL not on every draw, ranked only in the draws that have it)" \
        in s["markdown"]
    assert "d1 0, 1, 2 (ORIL: seeds 0, 1 in every cell of it so far, not read until it has the draw's seeds)" \
        in s["markdown"].splitlines()[0]
    write(folders[1], "oril_b100", [30.0, 30.1, 30.2], policy_step=100)  # its last seed lands
    run("scripts/budget_summary.py", "--again", out)
    s = json.loads(open(out).read())
    assert "families_left_out" not in s["seeds_per_draw"][1]
    oril = next(c for c in s["cells"] if (c["family"], c["budget"]) == ("oril", 100))
    assert oril["per_draw"][1]["n"] == 3 and oril["n_groups"] == 2
    top = next(o for o in s["orderings"] if o["budget"] == 100)
    assert top["over_draws"] == "ORIL > OILCA > DWBC > BC-exp" and "not_on_every_draw" not in top


def test_the_chosen_budget_cell_applies_the_selection_record_to_every_seed(tmp_path):
    """A seed that landed after select_budget.py ran (seed 3 of every cell here) is read at the budget the record
    chose; its `_sel` copies must agree with that budget's results, and a copy that does not is refused."""
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    for fam, choice in (("oilca", 100), ("dwbc", 10)):
        with open(os.path.join(folders[1], f"budget_selection_{fam}.json"), "w") as f:
            json.dump({"of_method": fam, "choice": choice, "budgets": [10, 100], "rule": "held-out"}, f)
    for name in os.listdir(folders[1]):  # seed 3 of every fixed budget, 5 above seed 2's value
        if name.endswith("_s2_train.json") and "_sel_" not in name:
            r = json.loads(open(os.path.join(folders[1], name)).read())
            r.update(seed=3, returns=[v + 5 for v in r["returns"]], mean_return=r["mean_return"] + 5)
            with open(os.path.join(folders[1], name.replace("_s2_", "_s3_")), "w") as f:
                json.dump(r, f)
    out = str(tmp_path / "s.json")
    run("scripts/budget_summary.py", "--results", *folders, "--out", out, "--resamples", "300", "--complete-seeds")
    s = json.loads(open(out).read())
    sel = {c["family"]: c["per_draw"][1] for c in s["cells"] if c["budget"] == "selected"}
    assert sel["oilca"]["n"] == 4 and sel["oilca"]["mean"] == pytest.approx((10.0 + 10.1 + 10.2 + 15.2) / 4)
    assert sel["dwbc"]["n"] == 4 and s["seeds_per_draw"][1] == {"draw": "d1", "seeds": [0, 1, 2, 3], "left_out": []}
    with open(os.path.join(folders[1], "oilca_sel_s0_train.json")) as f:
        r = json.load(f)
    r.update(returns=[0.0, 0.0], mean_return=0.0)  # a copy that is not the chosen budget's result
    with open(os.path.join(folders[1], "oilca_sel_s0_train.json"), "w") as f:
        json.dump(r, f)
    assert one_line_error(run("scripts/budget_summary.py", "--results", *folders, "--out", str(tmp_path / "x.json"),
                              ok=False), "oilca_sel seed 0")
    assert not os.path.exists(tmp_path / "x.json")


def test_seeds_line_counts_one_seed_as_seed():
    bs = load_script("budget_summary")
    line = bs.seeds_line([{"draw": "d0", "seeds": [0, 1], "left_out": [2], "families_left_out": {"lobsdice": [0]}}])
    assert line == ("Per draw, the training seeds every cell of the draw has (`--complete-seeds`): d0 0, 1 (seed 2 in "
                    "some cells only, not read) (LobsDICE: seed 0 in every cell of it so far, not read until it has "
                    "the draw's seeds).")
