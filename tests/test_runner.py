"""runner.py on a tiny toy grid: the local and the Ray backend agree, the skip rule, --dry-run, failures."""
import glob
import json
import os
import time

import pytest

import runner
from conftest import ROOT

TINY = dict(seeds=(0, 1), steps=40, episodes=4, ivae_steps=40, fig5_ratios=(0.25,), fig5_seeds=(0,),
            collect_flags="--toy.n-classes 2 --toy.episodes-per-class 6 --toy.env.episode-len 20",
            ivae_flags="--restarts 1 --no-compare --hidden 16", train_flags="--hidden 16 --eval-episodes 4")
AUGMENT = {"augment_r0.5_s0", "augment_r0.25_s0", "augment_r0.5_s1"}
OILCA = {"oilca_s0", "oilca_s1", "oilca_r0.25_s0"}
TRAINERS = {"bc_exp_s0", "bc_all_s0", "bc_exp_s1", "bc_all_s1", "dwbc_s0", "dwbc_s1"} | OILCA
JOBS = {"collect", "ivae", "reference_expert", "reference_random", "report"} | AUGMENT | TRAINERS


def grid(root, **kw):
    return runner.Args(**{**TINY, "root": str(root), **kw})


def to_run(root, **kw):
    """The jobs a dry run of this grid would run."""
    return {j["name"] for j in runner.main(grid(root, dry_run=True, **kw))["jobs"] if j["state"] == "run"}


@pytest.fixture
def two_cores(monkeypatch):
    """A 2-core machine, as the main job's: with the default --jobs 2, every job gets --threads 1."""
    monkeypatch.setattr(runner, "cpu_cores", lambda: 2)


def commands(**kw):
    """{job: command without the interpreter} of a dry run with the benchmark's defaults, in the repo."""
    jobs = runner.main(runner.Args(root=ROOT, dry_run=True, **kw))["jobs"]
    return {j["name"]: j["command"].split(" ", 1)[1] for j in jobs}


def returns(root):
    """{result file: its returns} of every evaluation JSON under results/toy."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "results", "toy", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if "returns" in r:
            out[os.path.basename(path)] = r["returns"]
    return out


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    root = tmp_path_factory.mktemp("a")
    return root, runner.main(grid(root)), returns(root)


@pytest.mark.slow
def test_local_grid_writes_every_result_and_a_second_run_skips_all(local):
    root, out, before = local
    assert out["ok"] and set(out["ran"]) == JOBS
    methods = [f"{m}_s{s}" for m in ("bc_exp", "bc_all", "dwbc", "oilca") for s in (0, 1)]
    methods += ["oilca_r0.25_s0", "reference_expert", "reference_random"]
    assert set(before) == {f"{m}_{split}.json" for m in methods for split in ("train", "heldout")}
    results = root / "results" / "toy"
    assert all((results / f).exists() for f in ("table.md", "fig4.png", "fig5.png"))
    assert "| oilca_r0.25 |" in (results / "table.md").read_text()
    stages = {"collect", "ivae", "bc", "augment", "dwbc_oilca", "fig5_ratios", "references", "report", "total"}
    timing = json.load(open(results / "timing.json"))
    assert set(timing) == stages and all(v > 0 for v in timing.values())
    assert len((root / "runs" / "toy" / "jobs.log").read_text().splitlines()) == len(JOBS)
    assert all((root / "runs" / "toy" / "logs" / f"{j}.log").exists() for j in JOBS)
    again = runner.main(grid(root))
    assert again["ok"] and again["ran"] == [] and {j["state"] for j in again["jobs"]} == {"skip"}
    assert returns(root) == before
    assert json.load(open(results / "timing.json")) == timing  # an invocation that ran nothing keeps the timing


def test_dry_run_lists_the_jobs_and_runs_nothing(tmp_path, capsys):
    out = runner.main(grid(tmp_path, dry_run=True))
    assert {j["name"] for j in out["jobs"]} == JOBS and {j["state"] for j in out["jobs"]} == {"run"}
    assert out["ran"] == [] and os.listdir(tmp_path) == []
    printed = capsys.readouterr().out
    assert "run  collect " in printed and "collect_data.py --env toy" in printed
    assert "17 of 17 jobs would run" in printed


def test_toy_defaults_are_the_main_jobs_commands(two_cores):
    cmds = commands()
    ev = "--out-dir runs/toy/{0} --final-eval-episodes 100 --final-eval 'results/toy/{0}_{{split}}.json' --threads 1"
    assert cmds["collect"] == "collect_data.py --env toy --out data/toy.npz --seed 0 --force"
    assert cmds["ivae"] == ("train_ivae.py --dataset data/toy.npz --out-dir runs/toy/ivae --seed 0 --total-steps 10000 "
                            "--threads 1 --force")
    assert cmds["bc_exp_s4"] == ("train_bc.py --dataset data/toy.npz --data expert --seed 4 --total-steps 5000 "
                                 + ev.format("bc_exp_s4"))
    assert cmds["augment_r1.0_s1"] == ("augment.py --dataset data/toy.npz --ivae runs/toy/ivae/ivae.pt --sampler "
                                       "runs/toy/bc_exp_s1/policy.pt --ratio 1.0 --seed 1 "
                                       "--out data/toy_aug_r1.0_s1.npz --threads 1")
    assert cmds["oilca_s3"] == ("train_dwbc.py --dataset data/toy_aug_r0.5_s3.npz --seed 3 --total-steps 5000 "
                                + ev.format("oilca_s3"))
    assert cmds["oilca_r0.1_s0"] == ("train_dwbc.py --dataset data/toy_aug_r0.1_s0.npz --seed 0 --total-steps 5000 "
                                     "--method oilca_r0.1 " + ev.format("oilca_r0.1_s0"))
    assert cmds["reference_random"] == ("evaluate.py --reference random --env-dataset data/toy.npz --split train "
                                        "heldout --episodes 100 --out 'results/toy/reference_random_{split}.json'")
    assert len(cmds) == 1 + 1 + 10 + 9 + 10 + 4 + 2 + 1  # collect ivae bc augment dwbc/oilca fig5 references report
    assert not any(name.startswith(("oril", "bcnd", "lobsdice")) for name in cmds)
    # baselines are opt-in for the toy, on the same step budget; the +CA ones on OILCA's augmented data
    cmds = commands(methods=("baselines",), seeds=(0,), fig5_ratios=())
    assert set(cmds) == {"collect", "ivae", "bc_exp_s0", "augment_r0.5_s0", "oril_s0", "bcnd_s0", "lobsdice_s0",
                         "oril_ca_s0", "bcnd_ca_s0", "reference_expert", "reference_random", "report"}
    assert cmds["bcnd_ca_s0"].startswith("train_bcnd.py --dataset data/toy_aug_r0.5_s0.npz --seed 0 --total-steps 5000")
    assert all(cmds[j].endswith(" --threads 1") for j in ("oril_s0", "bcnd_s0", "lobsdice_s0", "oril_ca_s0"))


def test_newer_baselines_are_an_opt_in_group(two_cores):
    cmds = commands(methods=("bc_exp", "newer"), seeds=(0, 1), fig5_ratios=())
    newer = {f"{m}_s{s}" for m in ("ilid", "iswbc", "ilid_ca", "iswbc_ca") for s in (0, 1)}
    assert newer <= set(cmds) and {"augment_r0.5_s0", "augment_r0.5_s1"} <= set(cmds)
    ev = "--out-dir runs/toy/{0} --final-eval-episodes 100 --final-eval 'results/toy/{0}_{{split}}.json' --threads 1"
    assert cmds["ilid_s1"] == "train_ilid.py --dataset data/toy.npz --seed 1 --total-steps 5000 " + ev.format("ilid_s1")
    assert cmds["iswbc_ca_s0"] == ("train_iswbc.py --dataset data/toy_aug_r0.5_s0.npz --seed 0 --total-steps 5000 "
                                   + ev.format("iswbc_ca_s0"))
    jobs = runner.build(*runner.resolve(runner.Args(root=ROOT, methods=("newer",), seeds=(0,))))
    assert {j.stage for j in jobs if j.name.startswith(("ilid", "iswbc"))} == {"newer"}  # their own timing entry
    # no default, preset or protocol runs them
    for kw in ({}, dict(benchmark="dmc:cartpole-swingup"), dict(benchmark="cw:pushing"),
               dict(benchmark="dmc:cartpole-swingup", protocol="table5"), dict(methods=("baselines",))):
        assert not any(name.startswith(("ilid", "iswbc")) for name in commands(**kw)), kw


def test_controls_samplers_selection_sweep_and_data_draws_are_jobs_of_the_grid(two_cores):
    cmds = commands(methods=("oilca", "controls", "samplers"), seeds=(0, 1), fig5_ratios=(2.0,), fig5_seeds=(1,),
                    sweep_methods=("oilca", "dwbc_expert_data"), data_seed=2)
    d, r = "data/toy_d2", "runs/toy_d2"
    assert cmds["collect"].startswith(f"collect_data.py --env toy --out {d}.npz --seed 2 ")
    # each control: its own augmented dataset and flags, trained by train_dwbc.py under its own name
    aug = lambda m, s, ratio=0.5: cmds[f"augment_{m}_r{ratio}_s{s}"]  # noqa: E731
    assert aug("oilca_oracle", 1).endswith("--threads 1 --labels oracle") and "--sampler" not in aug("oilca_oracle", 1)
    assert f"--sampler {r}/bc_exp_s0/policy.pt" in aug("oilca_copy", 0) and "--ivae" not in aug("oilca_copy", 0)
    assert aug("oilca_copy", 0).endswith("--mode copy")
    assert aug("dwbc_expert_data", 0).endswith("--mode expert_data") and "--ivae" not in aug("dwbc_expert_data", 0)
    assert aug("oilca_authors", 1).endswith(f"--mode reconstruct --sampler-out {r}/sampler_oilca_authors_r0.5_s1/policy.pt")
    assert cmds["oilca_authors_s1"].startswith(f"train_dwbc.py --dataset {d}_aug_oilca_authors_r0.5_s1.npz --adaptive-eta ")
    assert f"--sampler {r}/bc_all_s1/policy.pt" in aug("oilca_bc_all", 1)
    assert f"--sampler {r}/dwbc_s0/policy.pt" in aug("oilca_dwbc", 0)
    assert f"--sampler {r}/sampler_selected_s1/policy.pt" in aug("oilca_selected", 1)
    for m in ("oilca_oracle", "oilca_copy", "oilca_authors", "dwbc_expert_data", "oilca_bc_all", "oilca_dwbc",
              "oilca_selected"):
        assert f" --method {m} --out-dir {r}/{m}_s0 " in cmds[f"{m}_s0"]
    # the selection: K folds of D_E, each candidate trained on each fold without rollouts, then one choice
    assert cmds["cv_split_f2"] == (f"cv_split.py --dataset {d}.npz --folds 3 --fold 2 --seed 0 --out {d}_cv3_f2.npz "
                                   f"--heldout-out {d}_cv3_f2_heldout.npz --force")
    assert cmds["select_dwbc_f1"].startswith(f"train_dwbc.py --dataset {d}_cv3_f1.npz --seed 0 ")
    assert "--eval-every 0 --eval-episodes 0" in cmds["select_bc_all_f0"] and "final-eval" not in cmds["select_bc_all_f0"]
    assert "--candidates bc_exp bc_all dwbc" in cmds["select_sampler"] and "--seeds 0 1" in cmds["select_sampler"]
    # the Table 8 sweep: both swept methods at the extra ratio on the sweep seeds only
    assert {n for n in cmds if "_r2.0_" in n} == {"augment_r2.0_s1", "oilca_r2.0_s1", "augment_dwbc_expert_data_r2.0_s1",
                                                  "dwbc_expert_data_r2.0_s1"}
    assert "--method dwbc_expert_data_r2.0 " in cmds["dwbc_expert_data_r2.0_s1"]
    jobs = runner.build(*runner.resolve(runner.Args(root=ROOT, methods=("samplers",), seeds=(0,))))
    order = [j.name for j in jobs]
    for j in jobs:  # topological: every dependency comes first (plan() relies on it)
        assert all(order.index(dep) < order.index(j.name) for dep in j.deps), j.name
    with pytest.raises(SystemExit, match="not augmented methods"):
        runner.resolve(runner.Args(sweep_methods=("dwbc",)))


def test_threads_share_the_cores_among_the_jobs(monkeypatch, capsys):
    monkeypatch.setattr(runner, "cpu_cores", lambda: 8)
    for jobs, threads in ((2, 4), (3, 2), (16, 1)):
        cmds = commands(jobs=jobs, methods=("bc_exp", "dwbc", "oilca", "baselines"), seeds=(0,), fig5_ratios=())
        takes = ("ivae", "bc_exp_s0", "augment_r0.5_s0", "dwbc_s0", "oilca_s0", "oril_s0", "bcnd_s0", "lobsdice_s0",
                 "oril_ca_s0", "bcnd_ca_s0")
        assert all(f" --threads {threads}" in cmds[j] for j in takes), cmds
        assert not any("--threads" in cmds[j] for j in ("collect", "reference_expert", "report"))
        printed = capsys.readouterr().out
        assert f"runner: --threads {threads} for every job that takes it (8 cores // --jobs {jobs})" in printed
    assert "--resume --threads 4" in commands(benchmark="dmc:cartpole-swingup")["sac"]
    assert all(" --threads 3" in c for j, c in commands(threads=3).items() if j.startswith(("bc_", "ivae", "oilca")))
    assert "--threads 3 for every job that takes it (as given)" in capsys.readouterr().out


def test_timing_keeps_the_last_measured_value_of_every_stage(tmp_path):
    path = str(tmp_path / "results" / "timing.json")
    first = runner.write_timing(path, {"collect": 1.0, "ivae": 80.0, "bc": 200.0, "total": 300.0},
                                ["collect", "ivae", "bc", "report"])
    assert first == {"collect": 1.0, "ivae": 80.0, "bc": 200.0, "total": 300.0}  # report never ran: no value
    # a second invocation runs only the BC jobs and the report: the other stages keep their values
    second = runner.write_timing(path, {"bc": 50.0, "report": 2.0, "total": 55.0}, ["collect", "ivae", "bc", "report"])
    assert second == {"collect": 1.0, "ivae": 80.0, "bc": 50.0, "report": 2.0, "total": 55.0}
    assert json.load(open(path)) == second and list(json.load(open(path))) == list(second)
    # a stage of an earlier grid that this one lacks (the baselines) keeps its value too
    runner.write_timing(path, {"baselines": 700.0, "total": 701.0}, ["baselines"])
    assert runner.write_timing(path, {"ivae": 70.0, "total": 71.0}, ["collect", "ivae"]) == \
        {"collect": 1.0, "ivae": 70.0, "baselines": 700.0, "bc": 50.0, "report": 2.0, "total": 71.0}


def test_dmc_and_cw_presets(two_cores):
    dmc = commands(benchmark="dmc:cartpole-swingup")
    assert "--total-steps 200000 --update-every 2 --resume --threads 1" in dmc["sac"]
    assert "runs/dmc_cartpole-swingup/sac/snapshots/step_200000.pt --dmc.episodes 200" in dmc["collect"]
    assert "--total-steps 10000" in dmc["oril_ca_s2"] and "--eval-every 0" in dmc["bcnd_s0"] and "oril_s3" not in dmc
    cw = commands(benchmark="cw:pushing")
    assert "--cw.episodes 600" in cw["collect"] and "--restarts 2 --no-compare" in cw["ivae"]
    assert "--eval-every 0 --eval-episodes 1 --act-eps 0.01 --threads 1" in cw["dwbc_s1"]
    assert "--act-eps" not in cw["bcnd_s1"]
    labels = commands(benchmark="cw:pushing", methods=("oilca_ens",), seeds=(0,), ens_keeps=(1.0, 0.5))
    assert labels["augment_ens_q1.0_r0.5_s0"].endswith("--sampler-out runs/cw_pushing/ensemble_s0/policy.pt --act-eps 0.01")
    assert "--act-eps" not in labels["augment_ens_q0.5_r0.5_s0"]  # it loads the members the first one trained
    authors = commands(benchmark="cw:pushing", methods=("oilca_authors",), seeds=(0,))  # its own sampler
    assert authors["augment_oilca_authors_r0.5_s0"].endswith(
        "--sampler-out runs/cw_pushing/sampler_oilca_authors_r0.5_s0/policy.pt --act-eps 0.01")
    assert "--act-eps" not in commands(methods=("oilca_authors",), seeds=(0,))["augment_oilca_authors_r0.5_s0"]  # toy
    assert "--split A B --episodes 10" in cw["reference_expert"]


@pytest.mark.slow
def test_a_missing_output_reruns_that_job_and_its_dependents(local):
    root, _, before = local
    sampler = root / "runs" / "toy" / "bc_exp_s1" / "policy.pt"
    os.rename(sampler, str(sampler) + ".away")
    assert to_run(root) == {"bc_exp_s1", "augment_r0.5_s1", "oilca_s1", "report"}
    os.rename(str(sampler) + ".away", sampler)
    os.remove(root / "data" / "toy_aug_r0.5_s0.npz")
    out = runner.main(grid(root))
    # the same arguments give the same numbers, so the report (whose inputs are the result files) is up to date
    assert out["ok"] and set(out["ran"]) == {"augment_r0.5_s0", "oilca_s0"}
    assert returns(root) == before


@pytest.mark.slow
def test_changed_arguments_or_inputs_make_jobs_stale(local):
    root = local[0]
    assert to_run(root) == set()
    assert to_run(root, steps=41) == TRAINERS | AUGMENT | {"report"}  # augment: its sampler is retrained
    assert to_run(root, ivae_steps=41) == {"ivae", "report"} | AUGMENT | OILCA
    assert to_run(root, force=True) == JOBS
    ivae = root / "runs" / "toy" / "ivae" / "ivae.pt"
    original = ivae.read_bytes()
    os.utime(ivae)  # a new mtime alone: the digest still matches
    assert to_run(root) == set()
    ivae.write_bytes(original + b"\0")  # an output changed behind the runner's back: its job re-runs too
    assert to_run(root) == {"ivae", "report"} | AUGMENT | OILCA
    ivae.write_bytes(original)
    assert to_run(root) == set()


@pytest.mark.slow
def test_a_rerun_that_reproduces_its_outputs_does_not_rerun_what_is_below_it(local, capsys):
    root, _, before = local
    os.remove(root / "runs" / "toy" / ".jobs" / "collect.json")  # as after an edit to collect_data.py
    assert to_run(root) == JOBS
    assert "only if an upstream output changes" in capsys.readouterr().out
    out = runner.main(grid(root))
    assert out["ok"] and out["ran"] == ["collect"]  # the same data again: everything below it is up to date
    assert "[skip] ivae (its inputs came out unchanged)" in capsys.readouterr().out
    assert to_run(root) == set() and returns(root) == before
    os.remove(root / "runs" / "toy" / ".jobs" / "collect.json")
    other = TINY["collect_flags"].replace("--toy.episodes-per-class 6", "--toy.episodes-per-class 5")
    # other data: the jobs below run (seed 0's part of the grid). The fixture's folder now holds other data: the tests
    # after this one use only the fixture's recorded returns (local[2]), never its folder.
    out = runner.main(grid(root, collect_flags=other, seeds=(0,), fig5_ratios=(), references=False))
    assert out["ok"] and {"collect", "ivae", "bc_exp_s0", "augment_r0.5_s0", "oilca_s0"} <= set(out["ran"])


def test_a_failed_job_stops_the_grid(tmp_path, capsys):
    out = runner.main(grid(tmp_path, seeds=(0,), fig5_ratios=(), references=False, ivae_flags="--no-such-flag"))
    assert not out["ok"] and out["failed"] == ["ivae"]
    assert not {"augment_r0.5_s0", "oilca_s0", "report"} & set(out["ran"])
    assert f"job ivae failed; see {tmp_path}/runs/toy/logs/ivae.log" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "toy" / ".jobs" / "ivae.json").exists()


@pytest.mark.slow
def test_ray_backend_gives_the_same_results(local, tmp_path):
    pytest.importorskip("ray")
    # a part of the fixture's grid two levels deep (seed 0 of BC-exp and OILCA: the data, the iVAE and the sampler
    # below the augmentation, OILCA below it); starts a local Ray instance
    small = dict(seeds=(0,), fig5_ratios=(), references=False, methods=("bc_exp", "oilca"))
    out = runner.main(grid(tmp_path, backend="ray", jobs=2, **small))
    assert out["ok"] and set(out["ran"]) == {"collect", "ivae", "bc_exp_s0", "augment_r0.5_s0", "oilca_s0", "report"}
    assert returns(tmp_path) == {k: v for k, v in local[2].items() if k.startswith(("bc_exp_s0_", "oilca_s0_"))}
    assert runner.main(grid(tmp_path, **small))["ran"] == []  # its records serve the local backend too


def test_code_changes_make_jobs_stale(tmp_path, monkeypatch):
    # the code of a job: its script and the repo modules it imports, directly, lazily, through packages or through
    # envs/__init__.py's backends (datasets are loaded through envs.load_dataset, which checks the env)
    backends = ["envs/__init__.py", "envs/cw.py", "envs/cw_scripted.py", "envs/dmc.py", "envs/dmc_scripted.py",
                "envs/dmc_scripted_peg.py", "envs/gym.py", "envs/toy.py"]
    lib = ["oilca/__init__.py", "oilca/checks.py", "oilca/cli.py", "oilca/contract.py"]
    training = ["training/__init__.py", "training/policy.py", "training/trainer.py"]
    assert runner.code_files("train_dwbc.py") == backends + lib + ["oilca/progress.py", "oilca/rows.py",
                                                                    "train_dwbc.py"] + training
    assert runner.code_files("train_ivae.py") == backends + lib + ["oilca/ivae.py", "oilca/progress.py",
                                                                    "oilca/rows.py", "train_ivae.py"]
    # the fast path's job: its own file, the machinery, and the reference it takes the method from
    assert set(runner.code_files("fast/train_dwbc.py")) == set(runner.code_files("train_dwbc.py")) | {
        "fast/__init__.py", "fast/replicas.py", "fast/train_dwbc.py"}
    # a job of one benchmark: the other backends are not its code (envs/__init__.py dispatches on the dataset's env)
    assert runner.code_files("train_dwbc.py", "dmc") == ["envs/__init__.py", "envs/dmc.py", "envs/dmc_scripted.py",
                                                         "envs/dmc_scripted_peg.py"] + lib + [
        "oilca/progress.py", "oilca/rows.py", "train_dwbc.py"] + training
    assert [f for f in runner.code_files("evaluate.py", "cw") if f.startswith("envs/")] == backends[:3]
    assert all(j.backend == "dmc" for j in runner.build(*runner.resolve(runner.Args(benchmark="dmc:cartpole-swingup"))))
    # a change to an imported module changes the digest; a module that is not imported does not
    monkeypatch.setattr(runner, "REPO", str(tmp_path))
    (tmp_path / "stage.py").write_text("import numpy as np\nimport shared\n\ndef f():\n    from lazy import g\n")
    (tmp_path / "shared.py").write_text("X = 1\n")
    (tmp_path / "lazy.py").write_text("def g(): pass\n")
    (tmp_path / "other.py").write_text("Y = 1\n")
    job = runner.Job("j", "s", ["stage.py"])
    assert runner.code_files("stage.py") == ["lazy.py", "shared.py", "stage.py"]
    before = runner.code_digest(job)
    (tmp_path / "other.py").write_text("Y = 2\n")
    assert runner.code_digest(job) == before
    (tmp_path / "lazy.py").write_text("def g(): return 1\n")
    assert runner.code_digest(job) != before


def test_budget_flags_are_checked_and_baselines_train_at_the_largest_budget(two_cores):
    with pytest.raises(SystemExit, match="--budgets: oilca_oracle"):
        runner.resolve(runner.Args(methods=("dwbc", "oilca_oracle"), budgets=(10, 20)))
    with pytest.raises(SystemExit, match="--budgets"):
        runner.resolve(runner.Args(budgets=(10, 10)))
    with pytest.raises(SystemExit, match="oilca_matched: only with --budgets"):
        runner.resolve(runner.Args(methods=("oilca_matched",)))
    with pytest.raises(SystemExit, match="--select-budget-folds: only with --budgets"):
        runner.resolve(runner.Args(select_budget_folds=1))
    with pytest.raises(SystemExit, match="at most --select-folds"):
        runner.resolve(runner.Args(budgets=(10, 20), select_budget_folds=4))
    cmds = commands(methods=("dwbc", "oril", "lobsdice"), budgets=(100, 200), seeds=(0,))
    assert "--total-steps 200 --method oril_b200 " in cmds["oril_b200_s0"]
    assert "--total-steps 200 --method lobsdice_b200 " in cmds["lobsdice_b200_s0"] and "oril_s0" not in cmds


def test_a_tag_keeps_a_variant_apart_and_shares_the_sac_run(two_cores):
    dmc = commands(benchmark="dmc:cartpole-swingup", tag="t5", data_episodes=40,
                   collect_flags="--expert-episodes 2", methods=("bc_exp",), seeds=(0,))
    assert "--out-dir runs/dmc_cartpole-swingup/sac " in dmc["sac"]  # one behaviour run for every tag
    assert "--out data/dmc_cartpole-swingup_t5.npz" in dmc["collect"] and "--dmc.episodes 40 --expert-episodes 2" in dmc["collect"]
    assert "results/dmc_cartpole-swingup_t5/bc_exp_s0_{split}.json" in dmc["bc_exp_s0"]
    with pytest.raises(SystemExit, match="--tag"):
        runner.resolve(runner.Args(tag="a/b"))


def test_a_scripted_dmc_expert_needs_no_sac_run(two_cores):
    """--collect-flags with --dmc.scripted-noise: the scripted expert is the behaviour source, so no SAC job and no
    snapshot reaches the collection."""
    flags = "--dmc.scripted-noise 0 0.5 --dmc.random-policy"
    dmc = commands(benchmark="dmc:manipulator-insert_ball", protocol="table5", collect_flags=flags, seeds=(0,))
    assert "sac" not in dmc and "--dmc.snapshots" not in dmc["collect"]
    assert "--dmc.episodes 1500 --expert-episodes 30 " + flags in dmc["collect"]
    assert "sac" in commands(benchmark="dmc:manipulator-insert_ball", protocol="table5", seeds=(0,))


def test_paper_protocol_uses_table5_sizes_and_the_authors_training_settings(two_cores):
    dmc = commands(benchmark="dmc:cheetah-run", protocol="paper", methods=("bc_exp", "dwbc", "oilca"))
    assert "--out data/dmc_cheetah-run_paper.npz" in dmc["collect"]
    assert "--dmc.episodes 300 --expert-episodes 3 --force" in dmc["collect"]
    assert "--total-steps 200000" in dmc["dwbc_s4"] and dmc["dwbc_s4"].endswith("--batch-size 512 --d-update-every 100")
    assert dmc["bc_exp_s0"].endswith("--batch-size 512") and "--final-eval-episodes 100" in dmc["oilca_s2"]
    assert "--ratio 1.0" in dmc["augment_r1.0_s3"] and "dwbc_s5" not in dmc
    cw = commands(benchmark="cw:picking", protocol="paper", methods=("dwbc",), collect_flags="--cw.episodes 600")
    assert "--expert-episodes 15 --cw.episodes 600" in cw["collect"] and "--split A B --episodes 100" in cw["reference_expert"]
    with pytest.raises(SystemExit, match="toy:paper"):
        runner.resolve(runner.Args(protocol="paper"))
    with pytest.raises(SystemExit, match="Table 5"):
        runner.resolve(runner.Args(benchmark="dmc:hopper-hop", protocol="paper"))
    # on a GPU the trainers run on the fast path: every seed of a method in one job, each step a CUDA graph (not with
    # the adaptive η of the authors' path), each OILCA seed reading its own augmented dataset through {seed}
    gpu = commands(benchmark="dmc:cartpole-swingup", protocol="paper", methods=("bc_exp", "oilca_authors"), gpus=1.0)
    assert gpu["bc_exp_fast"].startswith("fast/train_bc.py ") and "--seeds 0 1 2 3 4 " in gpu["bc_exp_fast"]
    assert gpu["bc_exp_fast"].endswith("--cuda-graph --cuda") and "--cuda-graph" not in gpu["oilca_authors_fast"]
    assert "_aug_oilca_authors_r1.0_s{seed}.npz" in gpu["oilca_authors_fast"] and "bc_exp_s0" not in gpu


def test_fast_path_gathers_the_seeds_of_a_method_into_one_job(two_cores):
    """--fast on a CPU: one job per method for all its seeds (fast/train_<method>.py --seeds ...), writing the files
    the reference runs would (one run folder and result per seed), so everything downstream reads the same paths."""
    ref = {j.name: j for j in runner.build(*runner.resolve(runner.Args(root=ROOT, seeds=(0, 1), methods=(
        "bc_exp", "dwbc", "oilca", "oril"))))}
    fast = {j.name: j for j in runner.build(*runner.resolve(runner.Args(root=ROOT, seeds=(0, 1), fast=True, methods=(
        "bc_exp", "dwbc", "oilca", "oril"))))}
    for m in ("bc_exp", "dwbc", "oilca", "oril"):
        assert fast[f"{m}_fast"].argv[0] == f"fast/{ref[m + '_s0'].argv[0]}"
        assert set(fast[f"{m}_fast"].outputs) == set(ref[f"{m}_s0"].outputs) | set(ref[f"{m}_s1"].outputs)
        assert f"{m}_s0" not in fast
    assert fast["augment_r0.5_s1"].deps == ["bc_exp_fast", "collect", "ivae"]  # the sampler: from the fast job
    assert "--dataset data/toy_aug_r0.5_s{seed}.npz" in " ".join(fast["oilca_fast"].argv)


def test_table5_protocol_builds_a_row_of_the_papers_tables_at_the_cpu_budget(two_cores):
    cart = commands(benchmark="dmc:cartpole-swingup", protocol="table5")
    # the same data as the budget study's --tag t5 cartpole-swingup (SAC at 100k, 40 episodes, exactly 2 in D_E)
    assert cart["collect"].endswith("--dmc.episodes 40 --expert-episodes 2 --force")
    assert "--total-steps 100000" in cart["sac"] and "--out data/dmc_cartpole-swingup_t5.npz" in cart["collect"]
    assert {"oril_ca_s4", "bcnd_ca_s0", "lobsdice_s4", "oilca_s4"} <= set(cart) and "oilca_copy_s0" not in cart
    assert "--total-steps 5000" in cart["dwbc_s4"] and "--final-eval-episodes 30" in cart["dwbc_s4"]
    assert "--ratio 1.0" in cart["augment_r1.0_s4"] and "dwbc_s5" not in cart
    walk = commands(benchmark="dmc:walker-walk", protocol="table5")  # not a Table 4 task: no +CA columns
    assert "--total-steps 200000" in walk["sac"] and "step_200000.pt" in walk["collect"]
    assert "--dmc.episodes 200 --expert-episodes 6" in walk["collect"] and "oril_ca_s0" not in walk and "oril_s0" in walk
    cw = commands(benchmark="cw:pushing", protocol="table5", methods=("dwbc",))
    assert "--out data/cw_pushing_t5.npz" in cw["collect"] and "--expert-episodes 13" in cw["collect"]
    assert "--split A B --episodes 30" in cw["reference_expert"]
    with pytest.raises(SystemExit, match="no toy rows"):
        runner.resolve(runner.Args(protocol="table5"))
    with pytest.raises(SystemExit, match="Table 5"):
        runner.resolve(runner.Args(benchmark="dmc:hopper-hop", protocol="table5"))


def test_toy_paper_preset_is_its_own_benchmark(two_cores):
    cmds = commands(benchmark="toy:paper")
    flags = " ".join(runner.PRESETS["toy:paper"]["collect"])
    assert cmds["collect"] == f"collect_data.py --env toy --out data/toy_paper.npz --seed 0 {flags} --force"
    assert "--toy.env.episode-len 500" in flags and "--expert-prob 0.375" in flags
    assert cmds["ivae"].startswith("train_ivae.py --dataset data/toy_paper.npz --out-dir runs/toy_paper/ivae ")
    assert cmds["oilca_s4"] == ("train_dwbc.py --dataset data/toy_paper_aug_r0.5_s4.npz --seed 4 --total-steps 5000 "
                                "--out-dir runs/toy_paper/oilca_s4 --final-eval-episodes 100 --final-eval "
                                "'results/toy_paper/oilca_s4_{split}.json' --threads 1")
    assert cmds["report"] == "report.py --results results/toy_paper"
    assert len(cmds) == 1 + 1 + 10 + 5 + 10 + 2 + 1  # collect ivae bc augment dwbc/oilca references report; no Fig. 5
    # --collect-flags come after the preset's (the last one wins); another data seed gets its own slug
    assert commands(benchmark="toy:paper", collect_flags="--toy.env.episode-len 100")["collect"].endswith(
        f"{flags} --toy.env.episode-len 100 --force")
    assert commands(benchmark="toy:paper", data_seed=1)["collect"].startswith(
        "collect_data.py --env toy --out data/toy_paper_d1.npz --seed 1 ")
    # the fast toy is unchanged beside it
    assert commands()["collect"] == "collect_data.py --env toy --out data/toy.npz --seed 0 --force"


@pytest.mark.parametrize("benchmark", ["toy:nope", "dmc"])
def test_unknown_toy_preset_is_one_line_error(benchmark):
    with pytest.raises(SystemExit, match="--benchmark"):
        runner.resolve(runner.Args(benchmark=benchmark))


def test_solo_jobs_run_with_no_other_job_beside_them(monkeypatch):
    """--solo: a memory-heavy job waits for the running ones and holds back the rest; the others still run --jobs at a
    time, and the list order is kept."""
    def fake_execute(job):
        time.sleep(0.02)
        return {"name": job.name, "ok": True, "rc": 0, "start": 0.0, "end": 0.0}

    def grid(solo):
        now, spans = set(), []  # the scheduler's own view: started and not yet reported done

        def on_start(j):
            spans.append((j.name, set(now)))
            now.add(j.name)

        jobs = [runner.Job(n, "x", ["true"]) for n in names]
        jobs[4].deps = ["augment_s0"]
        runner.run_local(jobs, 2, on_start, lambda r: now.discard(r["name"]), solo=solo)
        return spans

    monkeypatch.setattr(runner, "execute", fake_execute)
    names = ["bc_s0", "bc_s1", "augment_s0", "augment_s1", "oilca_s0", "bc_s2", "bc_s3"]
    spans = grid(("augment", "oilca"))
    assert [n for n, _ in spans] == names
    beside = dict(spans)
    for n in ("augment_s0", "augment_s1", "oilca_s0"):
        assert beside[n] == set(), (n, beside[n])
    assert beside["bc_s1"] == {"bc_s0"} and beside["bc_s3"] == {"bc_s2"}  # two at a time otherwise
    assert any(others for n, others in grid(()) if n.startswith("augment"))  # without --solo they share


def start_until(argv, path, timeout=120, lines=1):
    """A runner started with `argv` (in the repo), once `path` exists (one of its jobs made it) and holds at least
    `lines` lines (one per job that started); a runner that ends or times out first is an assertion error with its
    output."""
    import subprocess
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    made = lambda: path.exists() and len(path.read_text().splitlines()) >= lines  # noqa: E731
    while not made() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    if not made():
        if proc.poll() is None:
            proc.kill()
        raise AssertionError(proc.communicate(timeout=30))
    return proc


def test_one_runner_per_root_and_sigterm_stops_its_jobs(tmp_path):
    """A second runner on the same --root is refused with one line; SIGTERM to a runner stops its running jobs with
    it (one line, non-zero exit), so a rerun does not compete with them."""
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "job.pid"
    script = tmp_path / "sleeper.py"
    script.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    argv = [sys.executable, "runner.py", "--root", str(tmp_path / "root"), "--methods", f"slow={script}",
            "--seeds", "0", "--no-references", "--fig5-ratios", f"--collect-flags={TINY['collect_flags']}", "--jobs", "1"]
    first = start_until(argv, pid_file)
    try:
        time.sleep(0.5)
        job = int(pid_file.read_text())
        logs = lambda: {p: open(p, "rb").read() for p in glob.glob(str(tmp_path / "root" / "runs" / "*" / "*.log"))  # noqa: E731
                        + glob.glob(str(tmp_path / "root" / "runs" / "*" / "logs" / "*.log"))}
        before = logs()
        second = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        lines = second.stderr.strip().splitlines()
        assert second.returncode != 0 and len(lines) == 1 and "another runner is at work there" in lines[0]
        assert before and logs() == before  # the first runner's job logs and jobs.log untouched
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
        assert first.returncode != 0 and err.strip().splitlines()[-1].startswith("error: the runner got SIGTERM")
        assert "1 running job(s)" in err
        with pytest.raises(ProcessLookupError):  # the job was stopped with the runner
            for _ in range(50):
                os.kill(job, 0)
                time.sleep(0.1)
    finally:
        if first.poll() is None:
            first.kill()


def test_a_stopped_runner_resumes_to_the_results_of_an_uninterrupted_run(local, tmp_path):
    """SIGTERM to a runner mid-grid (jobs done and one running), then the same command again: it finishes, and every
    result's per-episode returns equal those of the uninterrupted grid (the `local` fixture's seed-0 results: this
    grid runs seed 0 alone, without the ratio sweep and the references, whose jobs are the same)."""
    import signal
    import subprocess
    import sys

    root = tmp_path / "root"
    argv = [sys.executable, "runner.py", "--root", str(root), "--seeds", "0", "--steps", str(TINY["steps"]),
            "--episodes", str(TINY["episodes"]), "--ivae-steps", str(TINY["ivae_steps"]), "--fig5-ratios",
            "--no-references", f"--collect-flags={TINY['collect_flags']}", f"--ivae-flags={TINY['ivae_flags']}",
            f"--train-flags={TINY['train_flags']}"]
    first = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = root / "runs" / "toy" / "jobs.log"
    try:
        deadline = time.time() + 300
        while time.time() < deadline and first.poll() is None and \
                (not log.exists() or len(log.read_text().splitlines()) < 4):
            time.sleep(0.2)
        assert first.poll() is None, first.communicate(timeout=30)
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
        assert first.returncode != 0 and err.strip().splitlines()[-1].startswith("error: the runner got SIGTERM")
    finally:
        if first.poll() is None:
            first.kill()
    uninterrupted = {k: v for k, v in local[2].items() if "_s0_" in k and "_r0.25_" not in k}
    assert len(returns(root)) < len(uninterrupted)  # stopped before the end
    again = runner.main(grid(root, seeds=(0,), fig5_ratios=(), references=False))
    assert again["ok"] and again["ran"]
    assert returns(root) == uninterrupted


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigusr1_winds_down_finishing_and_recording_the_running_jobs(tmp_path, jobs):
    """SIGUSR1 while `jobs` jobs run: the runner starts no other job, lets the running ones finish and records them
    (their results and ledger records), exits non-zero with one line saying how many did not start; the same command
    again skips the finished jobs and runs only the rest. With --jobs 2 the signal arrives while the runner's main
    thread waits on two jobs at once."""
    import signal
    import subprocess
    import sys

    go, started = tmp_path / "go", tmp_path / "started"
    script = tmp_path / "gated.py"  # train_bc.py, once the test says go (each start appends a line to `started`)
    script.write_text(f"import os, runpy, sys, time\nopen({str(started)!r}, 'a').write('x\\n')\n"
                      f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.1)\n"
                      f"sys.argv[0] = {os.path.join(ROOT, 'train_bc.py')!r}\n"
                      f"sys.path.insert(0, {ROOT!r})\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    root = tmp_path / "root"
    seeds = [str(s) for s in range(jobs + 1)]  # `jobs` of them start at once; the last one waits for a free slot
    argv = [sys.executable, "runner.py", "--root", str(root), "--methods", f"gated={script}", "--seeds", *seeds,
            "--steps", "20", "--no-references", "--fig5-ratios", f"--collect-flags={TINY['collect_flags']}",
            f"--train-flags={TINY['train_flags']}", "--ledger", "--jobs", str(jobs)]
    first = start_until(argv, started, lines=jobs)  # every slot busy before the signal
    try:
        assert started.read_text().count("x") == jobs
        first.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        go.touch()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    lines = err.strip().splitlines()
    assert first.returncode == 1 and lines[-1].startswith("error: the runner got SIGUSR1"), (out, err)
    assert "none of the other 2" in lines[-1]  # the last seed's job and the report
    assert started.read_text().count("x") == jobs  # the last seed never started
    res, last = root / "results" / "toy", seeds[-1]
    assert not (res / f"gated_s{last}_train.json").exists()
    for s in seeds[:-1]:
        assert (res / f"gated_s{s}_train.json").exists()
        assert any(f"gated_s{s}" in p.name for p in (res / "ledger").iterdir())
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert all(f"[skip] gated_s{s}" in again.stdout for s in seeds[:-1]) and f"[start] gated_s{last}" in again.stdout
    assert (res / f"gated_s{last}_train.json").exists()


@pytest.mark.parametrize("kw, words", [
    (dict(benchmark="gym:Pendulum-v1"), "no preset for gym datasets"),
    (dict(benchmark="dmc:cartpole-bogus"), "unknown DeepMind Control task"),
    (dict(benchmark="dmc:cartpole"), "bad DeepMind Control id"),
])
def test_benchmarks_without_a_preset_are_refused_before_anything_is_made(tmp_path, kw, words):
    if kw["benchmark"] == "dmc:cartpole-bogus":
        pytest.importorskip("dm_control")
    with pytest.raises(SystemExit, match=words):
        runner.main(runner.Args(root=str(tmp_path / "root"), **kw))
    assert not (tmp_path / "root").exists()


def test_ray_errors_are_one_line(tmp_path, monkeypatch):
    """No Ray installed: refused before anything is made; no cluster at --ray-address auto: one line, not Ray's
    traceback."""
    import subprocess
    import sys

    real = runner.importlib.util.find_spec
    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(SystemExit, match="Ray is not installed"):
        runner.main(grid(tmp_path / "none", backend="ray"))
    assert not (tmp_path / "none").exists()
    monkeypatch.undo()
    pytest.importorskip("ray")
    proc = subprocess.run([sys.executable, "runner.py", "--root", str(tmp_path / "r"), "--backend", "ray",
                           "--ray-address", "auto", "--seeds", "0", f"--collect-flags={TINY['collect_flags']}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "--ray-address auto: Ray did not start" in lines[0], proc.stderr


def test_a_root_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="not a folder"):
        runner.main(runner.Args(root=str(tmp_path / "file")))
