"""runner.py --ledger: a study resumes in a fresh clone from the records committed beside its results."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import runner
from test_runner import TINY, returns

# seed 0 of BC-exp and OILCA on the tiny toy grid: collect, iVAE, BC-exp (the sampler), augment, OILCA, report
SMALL = dict(TINY, seeds=(0,), fig5_ratios=(), references=False, methods=("bc_exp", "oilca"), ledger=True)


def states(root, **kw):
    return {j["name"]: j["state"] for j in runner.main(runner.Args(**{**SMALL, "root": str(root), **kw},
                                                                    dry_run=True))["jobs"]}


def snapshot(folder):
    return {os.path.relpath(os.path.join(d, f), folder): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(folder) for f in fs}


def fresh_clone(root):
    """What a fresh clone of a repo that committed results/ has: no data/, no runs/."""
    shutil.rmtree(root / "data")
    shutil.rmtree(root / "runs")


@pytest.mark.slow
def test_a_fresh_clone_keeps_the_ledgers_results_and_makes_again_only_what_new_jobs_need(tmp_path):
    root = tmp_path / "r"
    first = runner.main(runner.Args(**SMALL, root=str(root)))
    assert first["ok"]
    ledger = root / "results" / "toy" / "ledger"
    rec = json.loads((ledger / "oilca_s0.json").read_text())
    assert set(rec) >= {"argv", "code", "inputs", "outputs", "machine"} and rec["machine"]["cpu"]
    assert all(len(v) == 64 for v in {**rec["inputs"], **rec["outputs"]}.values())  # sha256 only, no mtimes
    results = root / "results" / "toy"
    before = snapshot(results)
    fresh_clone(root)

    # without the ledger every job runs; with it every job is kept (report too: its outputs are under results/)
    assert set(states(root, ledger=False).values()) == {"run"}
    assert set(states(root).values()) == {"keep"}
    again = runner.main(runner.Args(**SMALL, root=str(root)))
    assert again["ok"] and again["ran"] == [] and snapshot(results) == before

    # a clone has no figure that git ignores (results/**/*.png): a record whose only missing output is such a figure
    # is kept all the same; a missing figure git tracks is a missing result, and its job runs
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("results/**/*.png\n")
    figures = {f: f.read_bytes() for f in results.rglob("*.png")}
    assert figures
    for f in figures:
        f.unlink()
    assert set(states(root).values()) == {"keep"}
    (root / ".gitignore").write_text("")
    assert states(root)["report"] == "run"
    for f, b in figures.items():
        f.write_bytes(b)
    shutil.rmtree(root / ".git")
    (root / ".gitignore").unlink()

    # a new seed: its jobs run; the kept data and iVAE its augmentation needs are made again (the plan) ...
    plan = states(root, seeds=(0, 1))
    assert plan["collect"] == plan["ivae"] == "regen"
    assert {plan[j] for j in ("bc_exp_s0", "augment_r0.5_s0", "oilca_s0")} == {"keep"}
    assert {plan[j] for j in ("bc_exp_s1", "augment_r0.5_s1", "oilca_s1", "report")} == {"run"}
    # ... and run: a new method makes the kept dataset again, byte for byte as recorded, then trains on it
    more = runner.main(runner.Args(**{**SMALL, "methods": ("bc_exp", "bc_all", "oilca")}, root=str(root)))
    assert more["ok"] and set(more["ran"]) == {"collect", "bc_all_s0", "report"}
    unreported = lambda snap: {k: v for k, v in snap.items()  # noqa: E731
                               if not k.startswith(("table", "summary", "fig", "timing", "ledger/report"))}
    assert unreported(before).items() < unreported(snapshot(results)).items()  # the kept results as they were
    assert {"bc_all_s0_train.json", "bc_all_s0_heldout.json"} <= set(returns(root))

    # a changed result is not the recorded one: that job runs again, on its augmented data and sampler made again
    path = results / "oilca_s0_train.json"
    path.write_text(path.read_text().replace('"seed": 0', '"seed": 0 '))
    plan = states(root)
    assert plan["oilca_s0"] == plan["report"] == "run"
    assert plan["augment_r0.5_s0"] == plan["bc_exp_s0"] == plan["ivae"] == "regen"  # a chain of kept jobs made again
    assert plan["collect"] == "skip"  # up to date here since the last run


def test_a_regenerated_output_that_differs_from_the_ledger_fails_the_job(tmp_path):
    """A kept job made again must reproduce its recorded bytes, else the kept results below it rest on other data."""
    script = tmp_path / "write.py"
    script.write_text("import sys\nopen(sys.argv[1], 'w').write('other bytes')\n")
    out = str(tmp_path / "out.txt")
    job = runner.Job("x", "x", [str(script), out], outputs=[out], log=str(tmp_path / "x.log"),
                     record=str(tmp_path / "x.json"), ledger=str(tmp_path / "ledger" / "x.json"), regen={out: "0" * 64})
    res = runner.execute(job)
    assert not res["ok"] and "differs from its ledger record" in res["rc"]
    # the grid stops, but this machine's run is recorded, here and in the ledger: the same command again runs the jobs
    # below it, not this one
    assert runner.up_to_date(job)
    assert json.load(open(job.ledger))["outputs"] == {out: runner.file_state(out)["sha256"]}
    os.remove(job.record)
    os.remove(job.ledger)
    job.regen = None  # the same job run for itself: ok, recorded in the ledger with the machine it ran on
    res = runner.execute(job)
    assert res["ok"] and json.load(open(job.ledger))["machine"]["versions"]["python"] == \
        "{}.{}.{}".format(*sys.version_info[:3])


def test_the_job_environment_pins_torchs_cpu_kernels_and_a_record_made_under_another_is_stale(tmp_path, monkeypatch):
    from oilca import contract

    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert runner.job_env() == ({"ATEN_CPU_CAPABILITY": "avx2"} if "avx2" in contract.machine()["isa"] else {})
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert runner.job_env() == {"ATEN_CPU_CAPABILITY": "default"}  # the user's value wins
    # a benchmark preset's variables (CausalWorld's one-thread BLAS) are part of the recorded environment too
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert runner.job_env({"OMP_NUM_THREADS": "1"}) == {"OMP_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "default"}
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert runner.job_env({"OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"] == "2"  # here too the user's value wins
    script = tmp_path / "env.py"
    script.write_text("import os, sys\nopen(sys.argv[1], 'w').write(os.environ.get('ATEN_CPU_CAPABILITY', '-'))\n")
    out = str(tmp_path / "out.txt")
    job = runner.Job("x", "x", [str(script), out], outputs=[out], log=str(tmp_path / "x.log"),
                     record=str(tmp_path / "x.json"), env={"ATEN_CPU_CAPABILITY": "avx2"})
    assert runner.execute(job)["ok"] and open(out).read() == "avx2"  # the job ran with it
    assert runner.up_to_date(job)
    job.env = {"ATEN_CPU_CAPABILITY": "default"}
    assert not runner.up_to_date(job)


def test_a_job_made_again_stops_once_its_outputs_have_their_recorded_bytes(tmp_path, monkeypatch):
    """A trainer made again for its policy stops there: its kept evaluation results are here already."""
    import hashlib
    import time
    monkeypatch.setattr(runner, "REGEN_POLL", 0.1)
    script = tmp_path / "write.py"  # writes its output, then would go on for a minute (a final evaluation)
    script.write_text("import sys, time\nopen(sys.argv[1] + '.tmp', 'w').write('policy')\n"
                      "import os\nos.replace(sys.argv[1] + '.tmp', sys.argv[1])\ntime.sleep(60)\n")
    out, kept = str(tmp_path / "policy.pt"), str(tmp_path / "result.json")
    open(kept, "w").write("kept result")
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    job = runner.Job("x", "x", [str(script), out], outputs=[out, kept], log=str(tmp_path / "x.log"),
                     record=str(tmp_path / "x.json"), ledger=str(tmp_path / "ledger" / "x.json"), kept=[kept],
                     regen={out: sha("policy"), kept: sha("kept result")})
    start = time.time()
    res = runner.execute(job)
    assert res["ok"] and time.time() - start < 30
    assert "every output of this job made again has its recorded bytes" in open(job.log).read()
    assert runner.up_to_date(job) and not os.path.exists(job.ledger)  # reproduced: the ledger record stays as it was
    # the same job whose output is not the recorded one is not stopped early: it runs to its end and fails
    script.write_text(script.read_text().replace("time.sleep(60)", "time.sleep(1)"))
    os.remove(job.record)
    job.regen = {out: "0" * 64, kept: sha("kept result")}
    res = runner.execute(job)
    assert not res["ok"] and "differs from its ledger record" in res["rc"]
    # a job without outputs under results/ (a collection, which cleans up after writing) is never stopped early
    os.remove(job.record)
    job.kept, job.regen = [], {out: sha("policy"), kept: sha("kept result")}
    res = runner.execute(job)
    assert res["ok"] and "recorded bytes" not in open(job.log).read()
