"""scripts/sac_summary.py: the SAC behaviour runs as one table (returns at the snapshots, best return, time)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import sac_summary  # noqa: E402


def fake_run(folder, task, evals, sps=500.0, total=30_000, snapshots=(10_000, 30_000, 60_000)):
    os.makedirs(folder)
    rows = ["step,episode_return,eval_return,q_loss,pi_loss,alpha,sps"]
    for step in range(1000, total + 1, 1000):
        ev = evals.get(step, "")
        rows.append(f"{step},1.0,{ev},,,,{sps}")
    (folder / "progress.csv").write_text("\n".join(rows) + "\n")
    (folder / "args.json").write_text(json.dumps({"env": task, "total_steps": total, "snapshot_steps": list(snapshots)}))


def test_table_reads_snapshot_returns_best_step_and_time(tmp_path):
    fake_run(tmp_path / "a", "dmc:walker-walk", {10_000: 20.5, 20_000: 300.25, 30_000: 250.0})
    fake_run(tmp_path / "b", "dmc:cheetah-run", {10_000: 1.0}, sps=100.0, total=10_000)
    s = sac_summary.summarise(str(tmp_path / "a"))
    assert s["best"] == 300.25 and s["best_step"] == 20_000 and s["steps"] == 30_000
    assert s["seconds"] == pytest.approx(30 * 1000 / 500.0) and s["snapshots"] == [10_000, 30_000]
    text = sac_summary.main(sac_summary.Args(runs=(str(tmp_path / "a"), str(tmp_path / "b")),
                                             out=str(tmp_path / "t.md")))
    assert (tmp_path / "t.md").read_text() == text
    lines = text.splitlines()
    assert lines[0].startswith("| task | env steps | return at 10k | return at 30k | best (at step)")
    assert lines[2] == "| dmc:walker-walk | 30,000 | 20.5 | 250.0 | 300.2 (20k) | 1 min | 500 | 0.6 h |"
    assert lines[3] == "| dmc:cheetah-run | 10,000 | 1.0 | — | 1.0 (10k) | 2 min | 100 | 2.8 h |"


def test_the_median_rate_keeps_a_run_s_quiet_speed_when_a_minority_of_rows_were_slowed(tmp_path):
    fake_run(tmp_path / "a", "dmc:humanoid-run", {10_000: 1.0}, sps=200.0, total=10_000)
    csv_path = tmp_path / "a" / "progress.csv"
    rows = csv_path.read_text().splitlines()
    for i in (1, 2, 3):  # three of ten rows slowed to 20 steps/s by other work
        rows[i] = rows[i].rsplit(",", 1)[0] + ",20.0"
    csv_path.write_text("\n".join(rows) + "\n")
    s = sac_summary.summarise(str(tmp_path / "a"))
    assert s["median_sps"] == 200.0
    assert s["seconds"] == pytest.approx(3 * 1000 / 20.0 + 7 * 1000 / 200.0)
    assert sac_summary.table([s]).splitlines()[2].endswith("| 200 | 1.4 h |")


def test_rate_after_takes_the_median_of_the_quiet_part_only(tmp_path):
    fake_run(tmp_path / "a", "dmc:humanoid-run", {10_000: 1.0}, sps=200.0, total=10_000)
    csv_path = tmp_path / "a" / "progress.csv"
    rows = csv_path.read_text().splitlines()
    for i in range(1, 7):  # the first six of ten rows shared the machine: 20 steps/s
        rows[i] = rows[i].rsplit(",", 1)[0] + ",20.0"
    csv_path.write_text("\n".join(rows) + "\n")
    whole = sac_summary.summarise(str(tmp_path / "a"))
    late = sac_summary.summarise(str(tmp_path / "a"), rate_after=6000)
    assert whole["median_sps"] == 20.0 and late["median_sps"] == 200.0
    assert late["seconds"] == whole["seconds"] == pytest.approx(6 * 1000 / 20.0 + 4 * 1000 / 200.0)


def test_a_folder_that_is_not_a_run_is_refused_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sac_summary.py"), "--runs",
                          str(tmp_path / "empty"), "--out", str(tmp_path / "t.md")], capture_output=True, text=True)
    assert out.returncode != 0 and "empty has no progress.csv" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.md").exists()


def test_a_mean_rate_since_the_start_becomes_each_row_s_own_rate(tmp_path):
    # 1,000 steps at 500/s (2 s), then 1,000 at 100/s (10 s), then 1,000 at 250/s (4 s): written as running means
    fake_run(tmp_path / "a", "dmc:humanoid-run", {3_000: 1.0}, total=3_000, snapshots=(3_000,))
    csv_path = tmp_path / "a" / "progress.csv"
    rows = csv_path.read_text().splitlines()
    for i, cum in ((1, 1000 / 2), (2, 2000 / 12), (3, 3000 / 16)):
        rows[i] = rows[i].rsplit(",", 1)[0] + f",{cum}"
    csv_path.write_text("\n".join(rows) + "\n")
    assert [r["sps"] for r in sac_summary.per_row_rates(sac_summary.read_rows(str(tmp_path / "a")), window=1000)] \
        == pytest.approx([500.0, 100.0, 250.0])
    s = sac_summary.summarise(str(tmp_path / "a"), sps_since_start=True)  # one 10,000-step window: the last row closes it
    assert s["seconds"] == pytest.approx(16.0) and s["median_sps"] == pytest.approx(3000 / 16)
    assert sac_summary.summarise(str(tmp_path / "a"))["seconds"] != pytest.approx(16.0)  # read as per-row rates: wrong
