"""scripts/task_summary.py: per task, the dataset's size and D_E, the expert reference and the runner's job times."""

import json
import os
import shutil
import sys

import numpy as np

from conftest import ROOT, one_line_error, run

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from oilca import contract  # noqa: E402
import envs
import task_summary  # noqa: E402


def fake_task(root, tiny_dataset, slug="toy_t5"):
    """root/data/<slug>.npz (the tiny dataset), root/runs/<slug>/.jobs/*.json, root/results/<slug>/reference_expert."""
    os.makedirs(root / "data")
    shutil.copy(tiny_dataset, root / "data" / f"{slug}.npz")
    jobs = root / "runs" / slug / ".jobs"
    os.makedirs(jobs)
    for name, s in (("collect", 12.0), ("ivae", 30.0), ("augment_r1.0_s0", 5.0), ("augment_r1.0_s1", 7.0),
                    ("bc_exp_s0", 60.0), ("oilca_s0", 90.0), ("ilid_ca_s1", 30.0), ("report", 1.0),
                    ("reference_expert", 4.0)):
        (jobs / f"{name}.json").write_text(json.dumps({"seconds": s}))
    folder = root / "results" / slug
    os.makedirs(folder)
    (folder / "reference_expert_train.json").write_text(json.dumps({"mean_return": -5.5, "std_return": 1.0}))
    return folder


def test_collect_counts_the_dataset_and_sums_only_trainer_jobs(tmp_path, tiny_dataset):
    folder = fake_task(tmp_path, tiny_dataset)
    task_summary.main(task_summary.Args(collect=(str(folder),), root=str(tmp_path)))
    s = json.loads((folder / "task.json").read_text())
    data = envs.load_dataset(tiny_dataset)
    assert s["episodes"] == len(np.unique(data["episode_ids"])) == 12
    assert s["transitions"] == len(data["expert"])
    assert s["expert_rows"] == int(data["expert"].sum()) and s["expert_episodes"] >= 1
    assert (s["collect_seconds"], s["ivae_seconds"], s["augment_seconds"]) == (12.0, 30.0, 12.0)
    assert (s["train_runs"], s["train_seconds"]) == (3, 180.0)  # bc_exp, oilca, ilid_ca; not report/reference
    assert s["expert_reference"] == {"train": {"mean_return": -5.5}}
    text = task_summary.main(task_summary.Args(tasks=(str(folder / "task.json"),)))
    row = text.splitlines()[2].split(" | ")
    assert row[2] == "-5.5" and row[3] == "12" and row[6] == "0.2 min" and row[7] == "0.7 min"
    assert row[8] == "3, 3.0 min (1.0 min) |"


def test_doc_block_is_replaced_and_a_missing_dataset_is_refused(tmp_path, tiny_dataset):
    folder = fake_task(tmp_path, tiny_dataset)
    task_summary.main(task_summary.Args(collect=(str(folder),), root=str(tmp_path)))
    doc = tmp_path / "d.md"
    doc.write_text("# x\n<!-- report: tasks -->\nold\n<!-- /report -->\nafter\n")
    task_summary.main(task_summary.Args(tasks=(str(folder / "task.json"),), doc=str(doc)))
    text = doc.read_text()
    assert "old" not in text and "| toy" in text and text.endswith("<!-- /report -->\nafter\n")
    os.remove(tmp_path / "data" / "toy_t5.npz")
    os.remove(folder / "task.json")
    proc = run("scripts/task_summary.py", "--collect", str(folder), "--root", str(tmp_path), ok=False)
    assert one_line_error(proc, "toy_t5.npz is not on this machine") and not (folder / "task.json").exists()


def test_a_later_collect_keeps_the_times_of_jobs_timed_on_a_replaced_machine(tmp_path, tiny_dataset):
    folder = fake_task(tmp_path, tiny_dataset)
    task_summary.main(task_summary.Args(collect=(str(folder),), root=str(tmp_path)))
    # a new machine: a fresh runs/ that timed the collection again and two more runs, nothing else
    jobs = tmp_path / "runs" / "toy_t5" / ".jobs"
    shutil.rmtree(jobs)
    os.makedirs(jobs)
    for name, s in (("collect", 20.0), ("oril_s3", 40.0), ("bc_exp_s0", 66.0)):
        (jobs / f"{name}.json").write_text(json.dumps({"seconds": s}))
    task_summary.main(task_summary.Args(collect=(str(folder),), root=str(tmp_path)))
    s = json.loads((folder / "task.json").read_text())
    assert (s["collect_seconds"], s["ivae_seconds"], s["augment_seconds"]) == (20.0, 30.0, 12.0)
    assert (s["train_runs"], s["train_seconds"]) == (4, 66.0 + 90.0 + 30.0 + 40.0)  # bc_exp_s0 re-timed, not doubled
    (folder / "task.json").write_text(json.dumps({"job_seconds": {"oril_s3": "long"}}))
    proc = run("scripts/task_summary.py", "--collect", str(folder), "--root", str(tmp_path), ok=False)
    assert one_line_error(proc, "job_seconds must map job names to seconds")
    assert json.loads((folder / "task.json").read_text()) == {"job_seconds": {"oril_s3": "long"}}  # left as it was


def test_a_task_without_ivae_or_augmentation_records_shows_a_dash(tmp_path, tiny_dataset):
    folder = fake_task(tmp_path, tiny_dataset)
    for name in ("ivae", "augment_r1.0_s0", "augment_r1.0_s1"):
        os.remove(tmp_path / "runs" / "toy_t5" / ".jobs" / f"{name}.json")
    task_summary.main(task_summary.Args(collect=(str(folder),), root=str(tmp_path)))
    row = task_summary.main(task_summary.Args(tasks=(str(folder / "task.json"),))).splitlines()[2].split(" | ")
    assert row[6] == "0.2 min" and row[7] == "—"
