"""Run one benchmark end to end: every stage script as a job of a DAG, on local processes or on Ray.

Stage graph (a job per box, seed and ratio; each job runs one stage script in a subprocess, from the repo root):

  collect_data.py             (dmc: after train_behavior.py, whose SAC snapshots are the behaviour policies)
   ├─► train_ivae.py ─────────────────────┐
   ├─► train_bc.py BC-exp (the sampler) ──┴─► augment.py (seed, ratio) ─► train_dwbc.py OILCA and Fig. 5 ratios,
   │                                                                      train_oril.py / train_bcnd.py +CA
   │                                                                      (train_ilid.py / train_iswbc.py +CA)
   ├─► train_bc.py BC-all, train_dwbc.py DWBC, train_oril.py, train_bcnd.py, train_lobsdice.py
   │   (train_ilid.py, train_iswbc.py: the `newer` group, only when asked for)
   ├─► evaluate.py --reference expert | random
   └─► scripts/return_hist.py (dmc, cw)
  Every trainer evaluates its policy in-process (--final-eval); report.py then reads all results: table, figures.

Layout under --root (default: the current directory): data/<slug>.npz, data/<slug>_aug_r<ratio>_s<seed>.npz,
runs/<slug>/<job>/ (checkpoints), runs/<slug>/logs/<job>.log (stdout + stderr of each job), runs/<slug>/jobs.log
(every command run, with a timestamp), runs/<slug>/.jobs/<job>.json (records),
results/<slug>/<method>_s<seed>_<split>.json, results/<slug>/{table.md,fig4.png,fig5.png,timing.json};
slug = toy, toy_paper (--benchmark toy:paper), dmc_<task> or cw_<task>.

Skip rule: after a job succeeds its record stores its argv, the environment the runner set for it (job_env), a digest of its code (the stage script and every repo
module it imports) and the sha256 of each input and output file (with size and mtime, so an unchanged file is not
hashed again). A job is up to date iff the record's argv, environment, code, input and output digests match; otherwise
it runs, and so does everything downstream of it whose inputs then change: a job below a re-run one is checked again
when its turn comes and skipped if its inputs came out byte-identical. --force runs everything. The stages that keep their own
same-argument outputs (collect_data.py, train_ivae.py) get --force: the record decides.

Threads: every job that takes --threads (the trainers, augment.py, train_ivae.py, SAC) gets --threads T,
T = max(1, cores // --jobs) with cores = the cores this process may use (cli.cpu_cores) (or --threads), so --jobs
processes at a time do not oversubscribe the cores; the runner prints its choice.

Timing: results/<slug>/timing.json keeps per stage the wall time (first start to last end) of its jobs in the last
invocation that ran any of them, and "total" is the wall time of the last invocation that ran jobs; it is written
after an invocation that ran jobs without a failure.

Backends: `local` runs up to --jobs processes at a time, each as soon as its dependencies are done. `ray` makes
every job a Ray task with its CPU/GPU request; a task receives its upstream tasks' ObjectRefs, so Ray orders the
grid (--ray-address: an existing cluster whose nodes share this repo and --root at the same paths; without it a
local instance with --jobs CPUs). After a failure no new job starts; running ones finish; the exit status is 1.

Examples:
  python runner.py                                         # the toy main job (Fig. 3-5, the results table)
  python runner.py --methods bc_exp bc_all dwbc oilca baselines --dry-run
  python runner.py --methods bc_exp bc_all dwbc oilca newer --dry-run   # ILID, ISW-BC and their +CA
  python runner.py --benchmark dmc:cartpole-swingup --jobs 4
  python runner.py --benchmark cw:pushing --backend ray --ray-address auto
"""

import dataclasses
import datetime
import hashlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Dict, List, Literal, Optional, Sequence, Tuple

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from analysis import paper_results

REPO = os.path.dirname(os.path.abspath(__file__))
BASELINES = ("oril", "bcnd", "lobsdice", "oril_ca", "bcnd_ca")
NEWER = ("ilid", "iswbc", "ilid_ca", "iswbc_ca")  # newer baselines (ILID, ISW-BC and their +CA), opt-in everywhere
# OILCA variants: which policy labels the augmented rows (the sampler axis) and the controls that isolate each part
SAMPLERS = ("oilca_bc_all", "oilca_dwbc", "oilca_oracle", "oilca_selected")
CONTROLS = ("oilca_oracle", "dwbc_expert_data", "oilca_authors", "oilca_copy")
# label sources beyond the paper (docs/labels.md): the ensemble with its disagreement filter, self-improving rounds,
# ISW-BC's and ILID's policies as labellers, the sampler chosen among every trained imitation policy, and BC-exp's
# labels kept only on counterfactual states near D_E (the support filter)
LABELS = ("oilca_ens", "oilca_self", "oilca_iswbc", "oilca_ilid", "oilca_best", "oilca_sup")
GROUPS = {"baselines": BASELINES, "newer": NEWER, "samplers": SAMPLERS, "controls": CONTROLS, "labels": LABELS}
# method -> how its dataset is made from D_all: augment.py flags, the sampler policy (a method whose seed-k policy
# labels seed k's rows; "selected": select_sampler.py's choice), whether the iVAE is used, extra train_dwbc.py flags
VARIANTS = {
    "oilca": dict(sampler="bc_exp"),
    "oilca_bc_all": dict(sampler="bc_all"),
    "oilca_dwbc": dict(sampler="dwbc"),
    "oilca_selected": dict(sampler="selected"),
    "oilca_oracle": dict(flags=("--labels", "oracle")),
    "oilca_copy": dict(sampler="bc_exp", flags=("--mode", "copy"), ivae=False),
    "oilca_authors": dict(flags=("--mode", "reconstruct"), own_sampler=True, train=("--adaptive-eta",)),
    "dwbc_expert_data": dict(flags=("--mode", "expert_data"), ivae=False),
}
METHODS = ("bc_exp", "bc_all", "dwbc", "oilca") + BASELINES + tuple(m for m in VARIANTS if m != "oilca")
# the budget study's OILCA with its sampler trained as long as the policy: at budget b, BC-exp's policy after b steps
# labels the rows (the authors' procedure); plain `oilca` keeps its sampler at --steps at every budget
MATCHED = "oilca_matched"
BUDGET_FAMILIES = ("bc_exp", "bc_all", "dwbc", "oilca", MATCHED)  # the methods a budget run saves at every budget
VARIANTS.update({"oilca_iswbc": dict(sampler="iswbc"), "oilca_ilid": dict(sampler="ilid"),
                 "oilca_best": dict(sampler="best")})  # after METHODS: opt-in only (--methods labels)
KNOWN = METHODS + NEWER + (MATCHED,) + LABELS  # every method --methods accepts; METHODS (the dmc/cw default) leaves NEWER out
SELECT_CANDIDATES = ("bc_exp", "bc_all", "dwbc")  # the samplers select_sampler.py chooses among
SAC_SNAPSHOTS = (10_000, 30_000, 60_000, 100_000, 200_000)  # train_behavior.py's default --snapshot-steps
# The paper's Table 5: episodes collected and episodes in D_E per task (the toy's Appendix C.1 recipe is toy:paper)
TABLE5 = {
    "dmc": {"cartpole-swingup": (40, 2), "cheetah-run": (300, 3), "finger-turn_hard": (500, 9), "fish-swim": (200, 1),
            "humanoid-run": (3000, 53), "manipulator-insert_ball": (1500, 30), "manipulator-insert_peg": (1500, 23),
            "walker-stand": (200, 4), "walker-walk": (200, 6)},
    "cw": {"reaching": (600, 12), "pushing": (600, 13), "picking": (600, 15), "pick_and_place": (600, 12),
           "stacking2": (600, 11), "towers": (600, 13), "stacked_blocks": (600, 13), "creative_stacked_blocks": (600, 14),
           "general": (600, 12)},
}
# --protocol paper: the authors' training settings (200 epochs x 1,000 steps, batch 512, the DWBC discriminator every
# 100 policy steps), ratio 1.0 as behind Table 1, 5 seeds, 100 evaluation episodes per split; Table 5's data sizes
PAPER = dict(seeds=(0, 1, 2, 3, 4), steps=200_000, episodes=100, ratio=1.0,
             script_flags={"train_dwbc.py": ("--batch-size", 512, "--d-update-every", 100),
                           "train_bc.py": ("--batch-size", 512)})
# --protocol table5: the rows of the paper's Tables 1, 2, 4 and 6 at the CPU budget (docs/tables.md): Table 5's data
# sizes with exactly its D_E count, ratio 1.0, the seven columns (and +CA on Table 4's tasks), 5 seeds, 30 evaluation
# episodes per split, 5,000 policy steps; SAC 100k env steps where the task's behaviour run already reached its
# expert by then (docs/dmc.md), 200k elsewhere. Files under <slug>_t5.
TABLES = dict(seeds=(0, 1, 2, 3, 4), steps=5000, episodes=30, ratio=1.0)
TABLES_SAC_STEPS = {"cartpole-swingup": 100_000, "walker-stand": 100_000}
PRESETS = {  # per benchmark: the defaults of every Args field left as None, and fixed flags
    "toy": dict(methods=METHODS[:4], seeds=(0, 1, 2, 3, 4), steps=5000, episodes=100, ivae_steps=10000,
                fig5_ratios=(0.1, 1.0), fig5_seeds=(0, 1), splits=("train", "heldout"), eval_flags=(), ivae_flags=()),
    "dmc": dict(methods=METHODS, seeds=(0, 1, 2), steps=10000, episodes=30, ivae_steps=10000, fig5_ratios=(),
                fig5_seeds=(), data_episodes=200, sac_steps=200_000, splits=("train",), ivae_flags=(),
                eval_flags=("--eval-every", "0")),
    "cw": dict(methods=METHODS, seeds=(0, 1, 2), steps=5000, episodes=10, ivae_steps=5000, fig5_ratios=(),
               fig5_seeds=(), data_episodes=600, act_eps=0.01, splits=("A", "B"),
               eval_flags=("--eval-every", "0", "--eval-episodes", "1"), ivae_flags=("--restarts", "2", "--no-compare"),
               env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}),
}
# toy:<name>: the toy backend with another data recipe, its own slug toy_<name> (docs/toy.md, "The paper toy").
# toy:paper follows the paper's appendix: 500-step episodes, u's displacement comparable to the control step,
# 3 × 333 episodes, about 75 of them in D_E (top 20% positives, each w.p. 0.375)
PRESETS["toy:paper"] = dict(PRESETS["toy"], fig5_ratios=(), fig5_seeds=(), collect=(
    "--toy.episodes-per-class", "333", "--toy.env.episode-len", "500", "--toy.env.noise-scale", "0.04",
    "--toy.env.alpha", "0.25", "--toy.env.sigma2-low", "1.0", "--toy.env.sigma2-high", "4.0", "--expert-prob", "0.375"))


@dataclass
class Args:
    benchmark: str = "toy"
    """toy, toy:paper (the paper's toy recipe, slug toy_paper), dmc:<domain>-<task> or cw:<task>"""
    methods: Optional[Tuple[str, ...]] = None
    """methods to run; groups: `baselines` = oril bcnd lobsdice oril_ca bcnd_ca, `newer` = ilid iswbc ilid_ca iswbc_ca
    (never a default), `samplers` = oilca_bc_all oilca_dwbc oilca_oracle oilca_selected, `controls` = oilca_oracle dwbc_expert_data oilca_authors oilca_copy; toy: bc_exp
    bc_all dwbc oilca, others: bc_exp bc_all dwbc oilca and the baselines"""
    seeds: Optional[Tuple[int, ...]] = None
    """training seeds (toy: 0-4, dmc/cw: 0-2)"""
    steps: Optional[int] = None
    """gradient steps of every trainer, --total-steps (toy 5000, dmc 10000, cw 5000)"""
    episodes: Optional[int] = None
    """final evaluation episodes per split (toy 100, dmc 30, cw 10)"""
    ivae_steps: Optional[int] = None
    """iVAE steps (toy/dmc 10000, cw 5000)"""
    protocol: Literal["cpu", "paper", "table5"] = "cpu"
    """cpu: the CPU-sized defaults below; paper: the paper's protocol (Table 5's episodes and D_E per task, ratio 1.0,
    200k policy steps with batch 512 and the DWBC discriminator every 100 steps, 5 seeds, 100 evaluation episodes;
    the toy's is --benchmark toy:paper), written to <slug>_paper; table5: a row of the paper's tables at the CPU
    budget (Table 5's episodes and D_E, ratio 1.0, the seven columns plus ORIL+CA/BCND+CA on Table 4's tasks, 5 seeds,
    5,000 steps, 30 evaluation episodes per split), written to <slug>_t5; any flag given still wins (docs/runner.md)"""
    ratio: Optional[float] = None
    """|augmented D_E| / |D_U| of OILCA and the +CA baselines (cpu 0.5, paper 1.0)"""
    budgets: Tuple[int, ...] = ()
    """budget study: train every BC/DWBC/OILCA method once to the largest of these policy steps, saving its policy at
    the others (--checkpoints), and evaluate each: results <method>_b<steps>_s<seed>_<split>.json. OILCA's sampler
    stays at --steps (the same augmented data at every budget); method oilca_matched trains OILCA anew at each budget
    b on rows labelled by BC-exp's policy after b steps. The other baselines train once, to the largest budget"""
    select_budget_folds: int = 0
    """budget study: choose each method's budget without rollouts, by the held-out error of its expert actions
    (select_budget.py) on folds 0..N-1 of the --select-folds split of D_E (training seed 0); adds <method>_sel results"""
    fig5_ratios: Optional[Tuple[float, ...]] = None
    """further OILCA ratios (method oilca_r<ratio>) for Fig. 5 (toy: 0.1 1.0; others: none)"""
    fig5_seeds: Optional[Tuple[int, ...]] = None
    """seeds of the Fig. 5 runs (toy: 0 1)"""
    sweep_methods: Tuple[str, ...] = ("oilca",)
    """the methods run at every --fig5-ratios (as <method>_r<ratio>), e.g. oilca dwbc_expert_data for Table 8's
    augmented-vs-true-expert-data curve"""
    data_seed: int = 0
    """collect_data.py --seed: another draw of the dataset (and of D_E) goes to <slug>_d<seed> (data/, runs/, results/)"""
    tag: str = ""
    """a name for a variant of the benchmark's data or protocol: its files go to <slug>_<tag> (data/, runs/,
    results/), e.g. --tag t5 with --data-episodes 40 --collect-flags="--expert-episodes 2" (the paper's Table 5
    size of cartpole-swingup); a DeepMind Control SAC run is shared by every tag and data seed"""
    select_folds: int = 3
    """oilca_selected: folds of D_E episodes in the offline sampler selection (cv_split.py, select_sampler.py)"""
    ens_keeps: Tuple[float, ...] = (1.0, 0.5, 0.25)
    """oilca_ens: the keep shares q tried (augment.py --ensemble-keep; each a method oilca_ens_q<q>); oilca_ens is
    the one chosen on held-out D_E episodes (--select-folds folds, select_sampler.py)"""
    ens_size: int = 5
    """oilca_ens: ensemble members (augment.py --ensemble-size)"""
    self_rounds: int = 3
    """oilca_self: rounds tried (round 1 is plain OILCA; round r, method oilca_round<r>, is labelled by round r-1's
    policy); oilca_self is the round chosen on held-out D_E episodes"""
    sup_keeps: Tuple[float, ...] = (0.5, 0.25)
    """oilca_sup: the keep shares q < 1 tried (augment.py --support-keep; each a method oilca_sup_q<q>); oilca_sup is
    the one chosen on held-out D_E episodes among plain OILCA (q = 1) and these"""
    best_candidates: Tuple[str, ...] = ("bc_exp", "bc_all", "dwbc", "iswbc", "ilid", "oril", "lobsdice", "bcnd")
    """oilca_best: the trained imitation policies the held-out rule chooses the sampler among"""
    references: bool = True
    """also evaluate the reference expert and random policies"""
    data_episodes: Optional[int] = None
    """dmc/cw: episodes collected (dmc 200, cw 600)"""
    sac_steps: Optional[int] = None
    """dmc: SAC env steps of the behaviour run (200000, one update every 2 steps)"""
    act_eps: Optional[float] = None
    """--act-eps of every trainer but BCND, and of the samplers augment.py trains (the ensemble's members, the
    authors' variant's own sampler) (cw: 0.01; others: the trainers' default)"""
    collect_flags: str = ""
    """more collect_data.py flags as one string, e.g. --collect-flags="--toy.n-classes 2 --toy.env.episode-len 20" """
    ivae_flags: str = ""
    """more train_ivae.py flags, one string (as --collect-flags)"""
    train_flags: str = ""
    """more flags for every trainer, one string (as --collect-flags)"""
    tensorboard: bool = False
    """--tensorboard of every trainer, the iVAE and SAC: TensorBoard event files in each run folder's tb/"""
    track: bool = False
    """--track of every trainer: a Weights & Biases run each (pip install -r requirements-track.txt;
    WANDB_MODE=offline logs without an account)"""
    root: str = "."
    """where data/, runs/ and results/ go"""
    jobs: int = 2
    """processes at a time (local backend; also the CPUs of a local Ray instance)"""
    solo: Tuple[str, ...] = ()
    """jobs whose name starts with one of these run with no other job beside them (local backend), in their turn:
    the memory-heavy ones of a large dataset, e.g. --solo augment oilca for a CausalWorld block task on 24 GiB"""
    threads: Optional[int] = None
    """--threads of every job that takes it (trainers, augmentation, iVAE, SAC); default max(1, cores // --jobs)"""
    backend: Literal["local", "ray"] = "local"
    """local processes, or Ray tasks (pip install -r requirements-ray.txt)"""
    ray_address: Optional[str] = None
    """ray.init(address=...): e.g. auto or ray://head:10001; None starts a local instance"""
    gpus: float = 0.0
    """GPUs per training job (ray backend; > 0 also passes --cuda to the trainers, the iVAE and SAC, and trains on
    the fast path)"""
    fast: bool = False
    """train on the fast path (fast/train_<method>.py): the seeds of a method side by side in one job, sampling on
    the device, CUDA graphs with --gpus; the default runs the reference trainer once per seed"""
    dry_run: bool = False
    """print the jobs (name, run/skip, command) and run nothing"""
    force: bool = False
    """run every job, even the up-to-date ones"""
    ledger: bool = False
    """keep each finished job's record also in results/<slug>/ledger/<job>.json (argv, code digest, the sha256 of its
    inputs and outputs, the machine), to commit with the results: in a fresh clone a job whose ledger record has this
    argv and code, whose files under results/ are the recorded ones, and whose inputs are the recorded outputs of its
    upstream jobs is kept without running; a kept job's other outputs (data, checkpoints) are made again only where a
    job that runs needs them, and must come out byte for byte as recorded, else the grid stops (the kept results rest
    on those bytes). The study scripts use it, so a long study resumes from what was committed (--root in the repo)"""


@dataclass
class Job:
    name: str
    stage: str  # for the timing summary
    argv: List[str]  # script and arguments, run as [python, *argv] from the repo root
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    deps: List[str] = field(default_factory=list)  # filled from the inputs: the jobs that make them
    cpus: float = 1.0
    gpus: float = 0.0
    log: str = ""
    record: str = ""
    backend: str = ""  # the benchmark's env backend (toy, dmc, cw): the other backends' modules are not its code
    recheck: bool = False  # it runs only because an upstream job runs: skipped if its inputs come out unchanged
    ledger: str = ""  # its record for the repo (--ledger): results/<slug>/ledger/<job>.json
    env: Dict[str, str] = field(default_factory=dict)  # set on top of the runner's environment (job_env)
    kept: List[str] = field(default_factory=list)  # its outputs under results/ (a kept job's are there already)
    regen: Optional[Dict[str, str]] = None  # a kept job made again for a job that needs its outputs: {output: sha256}


def cpu_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the whole machine's)."""
    return cli.cpu_cores()


def resolve(args: Args) -> Tuple[Args, dict]:
    """Fill the Args left as None from the benchmark's preset (and --threads from the cores and --jobs); returns
    (a copy of args, preset)."""
    args = dataclasses.replace(args)
    try:
        backend, task = ("toy", args.benchmark[4:]) if args.benchmark.startswith("toy:") and args.benchmark in PRESETS \
            else envs.parse_env_id(args.benchmark)
    except ValueError as e:
        toys = " ".join(k for k in PRESETS if k.startswith("toy:"))
        raise SystemExit(f"error: --benchmark: {e} (or a toy preset: {toys})")
    if backend not in PRESETS:
        raise SystemExit(f"error: --benchmark {args.benchmark}: the runner has no preset for {backend} datasets "
                         f"(toy, dmc:<task>, cw:<task>); run the stages by hand (docs/minari.md)")
    if backend == "dmc":  # an unknown task is refused before anything is created
        import warnings
        from envs import dmc
        try:
            with warnings.catch_warnings():  # dm_control's import warns when no GL library is found: not used here
                warnings.simplefilter("ignore")
                from dm_control import suite
        except ImportError:  # checked again by collect_data.py where dm_control is installed
            suite = None
        try:
            known = suite is None or tuple(dmc.split_name(task)) in suite.ALL_TASKS
        except ValueError as e:
            raise SystemExit(f"error: --benchmark: {e}")
        if not known:
            raise SystemExit(f"error: --benchmark {args.benchmark}: unknown DeepMind Control task (Table 1's: "
                             f"{' '.join(dmc.TABLE1_TASKS)})")
    if os.path.exists(args.root) and not os.path.isdir(args.root):
        raise SystemExit(f"error: --root {args.root}: not a folder")
    if args.track and importlib.util.find_spec("wandb") is None:
        raise SystemExit("error: --track: Weights & Biases is not installed (pip install -r requirements-track.txt)")
    if args.backend == "ray" and importlib.util.find_spec("ray") is None:
        raise SystemExit("error: --backend ray: Ray is not installed (pip install -r requirements-ray.txt)")
    base = backend + ("_" + task if task else "")
    if args.protocol == "paper" and not args.tag:  # its own files (toy:paper's CPU runs already use toy_paper)
        args.tag = "protocol" if base.endswith("_paper") else "paper"
    if args.protocol == "table5" and not args.tag:
        args.tag = "t5"
    if args.tag and not all(ch.isalnum() or ch in "-." for ch in args.tag):
        raise SystemExit(f"error: --tag: '{args.tag}' must be letters, digits, '-' or '.'")
    slug = base + (f"_{args.tag}" if args.tag else "") + (f"_d{args.data_seed}" if args.data_seed else "")
    preset = dict(PRESETS.get(args.benchmark, PRESETS[backend]), kind=backend, task=task, slug=slug, base_slug=base, ratio=0.5, script_flags={})
    if args.protocol == "table5":
        if backend not in TABLE5:
            raise SystemExit(f"error: --protocol table5: the paper's tables have no {backend} rows (dmc:<task> or cw:<task>)")
        columns = set(paper_results.METHODS) | (set(paper_results.CA_METHODS) if task in paper_results.TABLE_4 else set())
        preset.update(TABLES, methods=tuple(m for m in METHODS if m in columns))  # Table 1/2's columns, + Table 4's
        if backend == "dmc":
            preset["sac_steps"] = TABLES_SAC_STEPS.get(task, 200_000)
    if args.protocol == "paper":
        if backend == "toy" and task != "paper":
            raise SystemExit("error: --protocol paper: the paper's toy is --benchmark toy:paper")
        preset.update(PAPER)
    if args.protocol in ("paper", "table5"):
        if backend in TABLE5:
            if task not in TABLE5[backend]:
                raise SystemExit(f"error: --protocol {args.protocol}: Table 5 has no size for {args.benchmark}")
            episodes, n_expert = TABLE5[backend][task]
            preset["data_episodes"] = episodes
            if "--expert-episodes" not in args.collect_flags:
                args.collect_flags = f"--expert-episodes {n_expert} {args.collect_flags}".strip()
    for key, value in preset.items():
        if getattr(args, key, 0) is None:
            setattr(args, key, value)
    try:
        checks.fields(args, seeds=checks.SEED, steps=checks.COUNT, episodes=checks.COUNT, ivae_steps=checks.COUNT,
                      ratio=checks.Real(0, 100), fig5_ratios=checks.Real(0, 100), fig5_seeds=checks.SEED,
                      data_episodes=checks.COUNT, sac_steps=checks.COUNT, act_eps=checks.OPEN_UNIT, jobs=checks.COUNT,
                      threads=checks.COUNT, gpus=checks.NON_NEGATIVE, data_seed=checks.SEED,
                      select_folds=checks.Int(2, 1000), select_budget_folds=checks.COUNT0)
        for name in ("collect_flags", "ivae_flags", "train_flags"):
            try:
                shlex.split(getattr(args, name))
            except ValueError as e:
                raise ValueError(f"--{name.replace('_', '-')}: {e}") from None
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    if args.threads is None:  # --jobs processes at a time share the cores
        args.threads = max(1, cpu_cores() // max(1, args.jobs))
    custom = {}  # NAME=SCRIPT[:augmented]: any trainer script with the trainer CLI, run beside the built-in methods
    for m in args.methods:
        if "=" in m:
            name, script, on_aug = parse_custom(m)
            custom[name] = (script, on_aug)
    preset["custom"] = custom
    args.methods = tuple(dict.fromkeys(m for name in args.methods if "=" not in name
                                       for m in GROUPS.get(name, (name,)))) + tuple(custom)
    unknown = set(args.methods) - set(KNOWN) - set(custom)
    if unknown:
        raise SystemExit(f"error: unknown methods {sorted(unknown)}: choose from {' '.join(KNOWN)} "
                         f"{' '.join(GROUPS)}")
    if args.budgets:
        if len(set(args.budgets)) != len(args.budgets) or min(args.budgets) < 1:
            raise SystemExit(f"error: --budgets: need distinct positive step counts, got {list(args.budgets)}")
        others = [m for m in args.methods if m not in BUDGET_FAMILIES + BASELINES + NEWER]
        if others:
            raise SystemExit(f"error: --budgets: {' '.join(others)} have no budget study (it runs "
                             f"{' '.join(BUDGET_FAMILIES)}, and the baselines at the largest budget)")
    elif MATCHED in args.methods:
        raise SystemExit(f"error: --methods {MATCHED}: only with --budgets (without it OILCA's sampler already trains "
                         f"for --steps, as the policy does)")
    labels = [m for m in args.methods if m in LABELS]
    if labels and args.budgets:
        raise SystemExit(f"error: --methods {' '.join(labels)}: not with --budgets (run the label sources at --steps)")
    bad = sorted(set(args.best_candidates) - {"bc_exp", "bc_all", "dwbc"} - set(BASELINES + NEWER) - {"iswbc", "ilid"}) \
        + [c for c in args.best_candidates if c.endswith("_ca")]
    if bad or len(set(args.best_candidates)) != len(args.best_candidates) or len(args.best_candidates) < 2:
        raise SystemExit(f"error: --best-candidates: two or more distinct trained policies among bc_exp bc_all dwbc "
                         f"oril bcnd lobsdice ilid iswbc, got {list(args.best_candidates)}")
    if (not args.ens_keeps or len(set(args.ens_keeps)) != len(args.ens_keeps)
            or not all(0.01 <= q <= 1 for q in args.ens_keeps)):
        raise SystemExit(f"error: --ens-keeps: distinct shares in [0.01, 1], got {list(args.ens_keeps)}")
    if (not args.sup_keeps or len(set(args.sup_keeps)) != len(args.sup_keeps)
            or not all(0.01 <= q < 1 for q in args.sup_keeps)):
        raise SystemExit(f"error: --sup-keeps: distinct shares in [0.01, 1), got {list(args.sup_keeps)}")
    if not 2 <= args.ens_size <= 100 or not 2 <= args.self_rounds <= 20:
        raise SystemExit("error: --ens-size in [2, 100] and --self-rounds in [2, 20]")
    if args.select_budget_folds:
        if not args.budgets:
            raise SystemExit("error: --select-budget-folds: only with --budgets (it chooses among them)")
        if args.select_budget_folds > args.select_folds:
            raise SystemExit(f"error: --select-budget-folds {args.select_budget_folds}: at most --select-folds "
                             f"({args.select_folds})")
    if args.solo and args.backend != "local":
        raise SystemExit("error: --solo: the local backend only (a Ray task asks for its CPUs and GPUs instead)")
    if set(args.sweep_methods) - set(VARIANTS):
        raise SystemExit(f"error: --sweep-methods: {sorted(set(args.sweep_methods) - set(VARIANTS))} are not "
                         f"augmented methods ({' '.join(VARIANTS)})")
    return args, preset


def parse_custom(spec: str) -> Tuple[str, str, bool]:
    """`NAME=SCRIPT[:augmented]` of --methods: (name, script path, whether it trains on OILCA's augmented dataset).
    SCRIPT is any trainer with the trainer CLI (--dataset, --seed, --total-steps, --method, --out-dir, --final-eval,
    --final-eval-episodes, --eval-every, --eval-episodes, --threads), e.g. a copy of train_dwbc.py; relative paths are
    taken from the current directory. One `error: …` line for a bad name, a name of a built-in method or group, or a
    script that is not a .py file."""
    name, _, rest = spec.partition("=")
    script, _, kind = rest.partition(":")
    if not name or not all(ch.isalnum() or ch in "_-." for ch in name):
        raise SystemExit(f"error: --methods {spec}: the name must be letters, digits, '_', '-' or '.'")
    if name in KNOWN or name in GROUPS or name.startswith("reference_"):
        raise SystemExit(f"error: --methods {spec}: '{name}' is a built-in method or group; give the copy its own name")
    if kind not in ("", "augmented"):
        raise SystemExit(f"error: --methods {spec}: after the script only ':augmented' may follow")
    path = os.path.abspath(script)
    if not (script.endswith(".py") and os.path.isfile(path)):
        raise SystemExit(f"error: --methods {spec}: {script} is not a Python file")
    inside = path.startswith(os.path.join(REPO, ""))
    return name, (os.path.relpath(path, REPO) if inside else path), kind == "augmented"


def build(args: Args, p: dict) -> List[Job]:
    """The job list in topological order (also the local backend's priority order)."""
    root = os.path.abspath(args.root)
    inside = os.path.join(root, "").startswith(os.path.join(REPO, ""))  # then short paths: jobs run in the repo

    def path(*parts):
        full = os.path.join(root, *parts)
        return os.path.relpath(full, REPO) if inside else full

    slug, runs, res = p["slug"], os.path.join("runs", p["slug"]), os.path.join("results", p["slug"])
    data = path("data", slug + ".npz")
    cuda = ["--cuda"] if args.gpus > 0 else []
    threads = ["--threads", args.threads]  # torch threads of every job that takes them
    act_eps = ["--act-eps", args.act_eps] if args.act_eps is not None else []  # every trainer but BCND, and a
    # sampler augment.py trains
    tb = ["--tensorboard"] if args.tensorboard else []  # logging flags: given only when asked for
    track = ["--track"] if args.track else []
    jobs: List[Job] = []

    def add(name, stage, argv, inputs=(), outputs=(), gpus=0.0, home=None):
        home = home or runs  # where the job's log and record live
        same = [j for j in jobs if j.name == name]
        if same:  # a job two parts of the study share (e.g. a fold's BC-exp sampler): added once
            if same[0].argv != list(map(str, argv)):
                raise AssertionError(f"runner: two different jobs named {name}")
            return
        jobs.append(Job(name, stage, list(map(str, argv)), list(inputs), list(outputs), gpus=gpus,
                        log=path(home, "logs", name + ".log"), record=path(home, ".jobs", name + ".json"),
                        backend=p["kind"], kept=[o for o in outputs if o.startswith(path("results", ""))],
                        ledger=path("results", os.path.relpath(home, "runs"), "ledger", name + ".json")
                        if args.ledger else ""))

    collect = ["collect_data.py", "--env", p["kind"] if p["kind"] == "toy" else args.benchmark, "--out", data,
               "--seed", args.data_seed]
    snapshots = []
    if p["kind"] == "dmc" and "--dmc.scripted-noise" not in shlex.split(args.collect_flags):  # scripted: no SAC
        sac_home = os.path.join("runs", p["base_slug"])  # one behaviour run per task, whatever the tag or data seed
        sac = path(sac_home, "sac")
        steps = sorted({s for s in SAC_SNAPSHOTS if s <= args.sac_steps} | {args.sac_steps})
        snapshots = [os.path.join(sac, "snapshots", f"step_{s}.pt") for s in steps]
        add("sac", "sac", ["train_behavior.py", "--env", args.benchmark, "--out-dir", sac, "--total-steps",
                           args.sac_steps, "--update-every", 2, "--resume", *threads, *cuda, *tb], outputs=snapshots,
            gpus=args.gpus, home=sac_home)
        collect += ["--dmc.snapshots", *snapshots]
    if p["kind"] == "dmc":
        collect += ["--dmc.episodes", args.data_episodes]
    elif p["kind"] == "cw":
        collect += ["--cw.episodes", args.data_episodes]
    elif p["kind"] == "toy":
        collect += list(p.get("collect", ()))  # a toy preset's recipe (toy:paper); --collect-flags come after it
    add("collect", "collect", collect + [*shlex.split(args.collect_flags), "--force"], snapshots, [data])
    if p["kind"] != "toy":
        add("returns_hist", "collect", ["scripts/return_hist.py", "--dataset", data, "--out",
                                        path(res, "returns_hist.png")], [data], [path(res, "returns_hist.png")])

    # augmented datasets: per OILCA variant (VARIANTS), the main ratio on every seed (the +CA baselines use OILCA's),
    # and the Fig. 5 / Table 8 ratios of the --sweep-methods on their seeds
    on_aug = any(a for _, a in p.get("custom", {}).values())  # a custom method on OILCA's augmented datasets
    round1 = "oilca_self" in args.methods or "oilca_sup" in args.methods  # families with plain OILCA as a candidate
    main_r = lambda m: m in args.methods or (m == "oilca" and (on_aug or round1  # noqa: E731
                                                                or any(b.endswith("_ca") for b in args.methods)))
    wanted = {}  # (method, seed) -> [ratios]
    for m in VARIANTS:
        for seed in args.seeds:
            rs = ([args.ratio] if main_r(m) else []) + [r for r in args.fig5_ratios if m in args.sweep_methods
                                                        and seed in args.fig5_seeds and r != args.ratio]
            if rs:
                wanted[(m, seed)] = rs
    aug = lambda m, r, s: path("data", f"{slug}_aug{'' if m == 'oilca' else '_' + m}_r{r}_s{s}.npz")  # noqa: E731
    def ivae_job(name, stage, dataset, folder) -> str:
        """The iVAE fit on `dataset` into runs/<slug>/<folder>; returns its checkpoint."""
        ckpt = path(runs, folder, "ivae.pt")
        add(name, stage, ["train_ivae.py", "--dataset", dataset, "--out-dir", os.path.dirname(ckpt), "--seed", 0,
                          "--total-steps", args.ivae_steps, *threads, *p["ivae_flags"], *shlex.split(args.ivae_flags),
                          *cuda, *tb, "--force"], [dataset], [ckpt, path(runs, folder, "metrics.json")], gpus=args.gpus)
        return ckpt

    ivae = path(runs, "ivae", "ivae.pt")
    if any(VARIANTS[m].get("ivae", True) for m, _ in wanted) or MATCHED in args.methods or "oilca_ens" in args.methods:
        ivae_job("ivae", "ivae", data, "ivae")

    fast = args.fast or args.gpus > 0  # the fast path (fast/train_*.py): seeds side by side, CUDA graphs on a GPU
    fast_groups: Dict[tuple, list] = {}  # (label, stage, script, flags, method, evals, budget) -> [(seed, dataset)]

    def train(name, stage, seed, script, dataset, *flags, method=None, evals=True, budget=False, steps=None):
        """One trainer job per seed; with the fast path, the seeds of a label are gathered (flush_fast). `steps`:
        --total-steps when not --steps."""
        if fast and os.path.isfile(os.path.join(REPO, "fast", script)):
            key = (name.rsplit("_s", 1)[0], stage, script, flags, method, evals, budget, steps)
            fast_groups.setdefault(key, []).append((seed, dataset))
            return
        trainer_job(name.rsplit("_s", 1)[0], stage, [seed], script, dataset, flags, method, evals, budget, name,
                    steps=steps)

    def trainer_job(label, stage, seeds, script, dataset, flags, method, evals, budget, name=None, steps=None):
        """The job of a trainer: the reference script for one seed, or fast/<script> for `seeds` side by side (its
        --out-dir and --final-eval then hold `{seed}`, and --dataset too where each seed has its own dataset)."""
        steps, checkpoints, tag = steps or args.steps, [], label
        if budget and args.budgets:  # the budget study: one run to the largest budget, the others saved on the way
            steps, checkpoints = max(args.budgets), sorted(b for b in args.budgets if b != max(args.budgets))
            tag, stage = f"{label}_b{steps}", "budgets"
        on_fast = script.startswith("fast/")
        if on_fast:  # one job for the seeds: {seed} in its paths
            name, run_name = f"{tag}_fast", f"{tag}_s{{seed}}"
        else:  # the job of one seed: its name as given (e.g. select_dwbc_f1), or its budget's
            run_name = name if tag == label and name else f"{tag}_s{seeds[0]}"
            name = run_name
        out, result = path(runs, run_name), path(res, f"{run_name}_{{split}}.json")
        argv = [script, "--dataset", dataset, *flags]
        argv += ["--seeds", *seeds] if on_fast else ["--seed", seeds[0]]
        argv += ["--total-steps", steps] + (["--checkpoints", *checkpoints] if checkpoints else [])
        argv += (["--method", method] if method else []) + ["--out-dir", out]
        argv += ["--final-eval-episodes", args.episodes, "--final-eval", result, *p["eval_flags"]] if evals else \
            ["--eval-every", 0, "--eval-episodes", 0]
        base = os.path.basename(script)
        argv += act_eps if base != "train_bcnd.py" else []  # the trainers' likelihood clip, as the samplers'
        argv += threads + list(p["script_flags"].get(base, ()))
        if on_fast and cuda and "--adaptive-eta" not in flags:
            argv += ["--cuda-graph"]  # the same steps, replayed as CUDA graphs (about 6x faster on an H100)
        inputs, outputs = [], []
        for seed in seeds:
            folder = out.replace("{seed}", str(seed))
            inputs.append(dataset.replace("{seed}", str(seed)))
            saved = [os.path.join(folder, f"policy_step{b}.pt") for b in checkpoints]
            outputs += [os.path.join(folder, "policy.pt")] + saved
            outputs += [fill(result, seed=seed, split=sp) for sp in p["splits"]] if evals else []
        add(name, stage, argv + [*shlex.split(args.train_flags), *cuda, *tb, *track], sorted(set(inputs)), outputs,
            gpus=args.gpus)
        for seed in seeds if evals else ():
            for b in checkpoints:  # each smaller budget's policy, scored as the final one is
                policy = os.path.join(out.replace("{seed}", str(seed)), f"policy_step{b}.pt")
                scored = path(res, f"{label}_b{b}_s{seed}_{{split}}.json")
                add(f"{label}_b{b}_s{seed}", "budgets", ["evaluate.py", "--policy", policy, "--split", *p["splits"],
                                                         "--episodes", args.episodes, "--out", scored], [policy],
                    [scored.replace("{split}", sp) for sp in p["splits"]])

    def flush_fast():
        """The gathered fast-path trainings: one job for all seeds of a label when they share the dataset (or, for
        DWBC/OILCA, when each seed's dataset differs only by its seed), else one fast job per seed."""
        for (label, stage, script, flags, method, evals, budget, steps), members in fast_groups.items():
            seeds = [s for s, _ in members]
            datasets = {d for _, d in members}
            pattern = members[0][1].replace(f"_s{seeds[0]}.npz", "_s{seed}.npz")
            if len(datasets) == 1:
                trainer_job(label, stage, seeds, "fast/" + script, members[0][1], flags, method, evals, budget,
                            steps=steps)
            elif script == "train_dwbc.py" and all(d == pattern.replace("{seed}", str(s)) for s, d in members):
                trainer_job(label, stage, seeds, "fast/" + script, pattern, flags, method, evals, budget, steps=steps)
            else:
                for s, d in members:
                    trainer_job(f"{label}", stage, [s], "fast/" + script, d, flags, method, evals, budget, steps=steps)
        fast_groups.clear()

    def bc_or_dwbc(name: str) -> tuple:
        """(script, flags) of bc_exp, bc_all or dwbc."""
        return ("train_dwbc.py", ()) if name == "dwbc" else \
            ("train_bc.py", ("--data", name[3:].replace("exp", "expert")))

    samplers = {VARIANTS[m].get("sampler") for m, _ in wanted}
    best = list(args.best_candidates) if "best" in samplers else []
    for seed in args.seeds:  # BC-exp / BC-all: methods, samplers, and the selection's candidates
        for kind in ("expert", "all"):
            name = "bc_" + kind.replace("expert", "exp")
            as_method = (name in args.methods or (name == "bc_exp" and MATCHED in args.methods)) and args.budgets
            if (name in args.methods and not args.budgets) or name in samplers or "selected" in samplers or name in best:
                train(f"{name}_s{seed}", "bc", seed, "train_bc.py", data, "--data", kind)
            if as_method:
                train(f"{name}_s{seed}", "bc", seed, "train_bc.py", data, "--data", kind, budget=True)
    for seed in args.seeds:
        if ("dwbc" in args.methods and not args.budgets) or "dwbc" in samplers or "selected" in samplers or "dwbc" in best:
            train(f"dwbc_s{seed}", "dwbc_oilca", seed, "train_dwbc.py", data)
        if "dwbc" in args.methods and args.budgets:
            train(f"dwbc_s{seed}", "dwbc_oilca", seed, "train_dwbc.py", data, budget=True)
    K = args.select_folds
    fold = lambda k: path("data", f"{slug}_cv{K}_f{k}.npz")  # noqa: E731
    held = lambda k: path("data", f"{slug}_cv{K}_f{k}_heldout.npz")  # noqa: E731

    def cv_split_job(k):
        add(f"cv_split_f{k}", "select", ["cv_split.py", "--dataset", data, "--folds", K, "--fold", k, "--seed", 0,
                                         "--out", fold(k), "--heldout-out", held(k), "--force"], [data], [fold(k), held(k)])

    def trainer_of(name: str) -> tuple:
        """(script, flags) of any candidate labeller: bc_exp, bc_all, dwbc or a baseline's own trainer."""
        return bc_or_dwbc(name) if name in ("bc_exp", "bc_all", "dwbc") else (f"train_{name}.py", ())

    def fold_oilca_data(k: int, fold_ivae: str, stage: str) -> str:
        """Fold k's augmented dataset of seed 0, its rows labelled by BC-exp trained on the fold (the sampler
        selection's candidate run, at --steps); returns its path."""
        sampler = path(runs, f"select_bc_exp_f{k}", "policy.pt")
        train(f"select_bc_exp_f{k}", "select", 0, "train_bc.py", fold(k), "--data", "expert", evals=False)
        out = fold(k).replace(".npz", f"_aug_r{args.ratio}_s0.npz")
        add(f"augment_cv{K}_f{k}_r{args.ratio}_s0", stage,
            ["augment.py", "--dataset", fold(k), "--ivae", fold_ivae, "--sampler", sampler, "--ratio", args.ratio,
             "--seed", 0, "--out", out, *threads], [fold(k), fold_ivae, sampler], [out])
        return out

    # the offline sampler selection: K folds of D_E episodes, each candidate per fold ("selected": among BC-exp,
    # BC-all and DWBC; "best", oilca_best: among --best-candidates, every trained imitation policy)
    for kind, cand, name, out in (("selected", SELECT_CANDIDATES, "sampler_selected", "sampler_selection.json"),
                                  ("best", tuple(best), "sampler_best", "sampler_selection_best.json")):
        if kind not in samplers:
            continue
        for k in range(K):
            cv_split_job(k)
            for c in cand:
                script, flags = trainer_of(c)
                train(f"select_{c}_f{k}", "select", 0, script, fold(k), *flags, evals=False)
        selected = [path(runs, f"{name}_s{s}", "policy.pt") for s in args.seeds]
        add("select_sampler" + ("" if kind == "selected" else "_best"), "select",
            ["select_sampler.py", "--dataset", data, "--folds", K, "--candidates", *cand,
             "--fold-dataset", path("data", f"{slug}_cv{K}_f{{fold}}.npz"),
             "--heldout", path("data", f"{slug}_cv{K}_f{{fold}}_heldout.npz"),
             "--fold-policy", path(runs, "select_{candidate}_f{fold}", "policy.pt"),
             "--full-policy", path(runs, "{candidate}_s{seed}", "policy.pt"), "--seeds", *args.seeds,
             "--out", path(res, out), "--out-policy", path(runs, name + "_s{seed}", "policy.pt")],
            [data] + [f for k in range(K) for f in (fold(k), held(k))]
            + [path(runs, f"select_{c}_f{k}", "policy.pt") for c in cand for k in range(K)]
            + [path(runs, f"{c}_s{s}", "policy.pt") for c in cand for s in args.seeds],
            selected + [path(res, out)])
    for (m, seed), rs in wanted.items():
        v = VARIANTS[m]
        for r in rs:
            name = "augment" + ("" if m == "oilca" else "_" + m) + f"_r{r}_s{seed}"
            argv, inputs = ["augment.py", "--dataset", data], [data]
            if v.get("ivae", True):
                argv += ["--ivae", ivae]
                inputs.append(ivae)
            if v.get("sampler"):
                src = {"selected": "sampler_selected", "best": "sampler_best"}.get(v["sampler"], v["sampler"])
                inputs.append(path(runs, f"{src}_s{seed}", "policy.pt"))
                argv += ["--sampler", inputs[-1]]
            argv += ["--ratio", r, "--seed", seed, "--out", aug(m, r, seed), *threads, *v.get("flags", ())]
            outputs = [aug(m, r, seed)]
            if v.get("own_sampler"):
                outputs.append(path(runs, f"sampler_{m}_r{r}_s{seed}", "policy.pt"))
                argv += ["--sampler-out", outputs[-1], *act_eps]
            add(name, "augment", argv, inputs, outputs)
    for (m, seed), rs in wanted.items():
        for r in rs:
            if m in args.methods or r != args.ratio or (m == "oilca" and round1):
                name = m + ("" if r == args.ratio else f"_r{r}")
                stage = "dwbc_oilca" if r == args.ratio else "fig5_ratios"
                train(f"{name}_s{seed}", stage, seed, "train_dwbc.py", aug(m, r, seed), *VARIANTS[m].get("train", ()),
                      method=None if name == "oilca" else name, budget=r == args.ratio)
    top = max(args.budgets) if args.budgets else None

    def budget_policy(run: str, b: int) -> str:
        """The policy after b steps of a budget run (one run to the largest budget, the others saved on the way)."""
        return os.path.join(run, "policy.pt" if b == top else f"policy_step{b}.pt")

    def matched(prefix, dataset, ivae_ckpt, bc_run, seed, **kw):
        """OILCA with its sampler matched to the budget: at each budget b, BC-exp's policy after b steps (of the
        BC-exp budget run `bc_run`) labels the rows of a fresh augmentation, and OILCA trains b steps on it."""
        for b in sorted(args.budgets):
            out = dataset.replace(".npz", f"_aug_m{b}_r{args.ratio}_s{seed}.npz")
            sampler = budget_policy(bc_run, b)
            add(f"augment{prefix}_m{b}_r{args.ratio}_s{seed}", "augment",
                ["augment.py", "--dataset", dataset, "--ivae", ivae_ckpt, "--sampler", sampler, "--ratio", args.ratio,
                 "--seed", seed, "--out", out, *threads], [dataset, ivae_ckpt, sampler], [out])
            label = f"{MATCHED}_b{b}"
            train(f"{'bsel_' + label + prefix if prefix else label}_s{seed}", "dwbc_oilca" if not prefix else
                  "select_budget", seed, "train_dwbc.py", out, method=label, steps=b, **kw)

    if MATCHED in args.methods:
        for seed in args.seeds:
            matched("", data, ivae, path(runs, f"bc_exp_b{top}_s{seed}"), seed)
    for seed in args.seeds:
        for m in (m for m in BASELINES + NEWER if m in args.methods or (not args.budgets and (m in samplers or m in best))):
            dataset = aug("oilca", args.ratio, seed) if m.endswith("_ca") else data
            stage = "newer" if m in NEWER else "baselines"  # its own timing.json entry: an opt-in run keeps "baselines"
            if args.budgets:  # the budget study: the baselines (no --checkpoints) train once, to the largest budget
                train(f"{m}_b{top}_s{seed}", stage, seed, f"train_{m.replace('_ca', '')}.py", dataset, steps=top,
                      method=f"{m}_b{top}")
            else:
                train(f"{m}_s{seed}", stage, seed, f"train_{m.replace('_ca', '')}.py", dataset)
    if args.select_budget_folds:  # the budget chosen without rollouts: fold runs of seed 0, scored on held-out D_E
        fams = [m for m in BUDGET_FAMILIES if m in args.methods]
        for k in range(args.select_budget_folds):
            cv_split_job(k)
            for name in ("bc_exp", "bc_all", "dwbc"):
                if name in fams or (name == "bc_exp" and MATCHED in fams):
                    script, flags = bc_or_dwbc(name)
                    train(f"bsel_{name}_f{k}_s0", "select_budget", 0, script, fold(k), *flags, method=name,
                          evals=False, budget=True)
            if "oilca" in fams or MATCHED in fams:  # the fold's own iVAE: OILCA may see no held-out episode
                fold_ivae = ivae_job(f"ivae_cv{K}_f{k}", "select_budget", fold(k), f"ivae_cv{K}_f{k}")
            if "oilca" in fams:  # its sampler: BC-exp on the fold at --steps (the sampler selection's candidate run)
                out = fold_oilca_data(k, fold_ivae, "select_budget")
                train(f"bsel_oilca_f{k}_s0", "select_budget", 0, "train_dwbc.py", out, method="oilca", evals=False,
                      budget=True)
            if MATCHED in fams:
                matched(f"_cv{K}_f{k}", fold(k), fold_ivae, path(runs, f"bsel_bc_exp_f{k}_b{top}_s0"), 0, evals=False)
        for f in fams:
            if f == MATCHED:  # one run per budget
                policies = [path(runs, f"bsel_{MATCHED}_b{{budget}}_cv{K}_f{{fold}}_s0", "policy.pt"), ""]
                policy = lambda k, b: fill(policies[0], budget=b, fold=k)  # noqa: E731
            else:  # one budget run, its policy at the largest budget saved as policy.pt
                run = path(runs, f"bsel_{f}_f{{fold}}_b{top}_s0")
                policies = [os.path.join(run, "policy_step{budget}.pt"), os.path.join(run, "policy.pt")]
                policy = lambda k, b, run=run: budget_policy(run.replace("{fold}", str(k)), b)  # noqa: E731
            result = path(res, f"{f}_b{{budget}}_s{{seed}}_{{split}}.json")
            inputs = [data] + [x for k in range(args.select_budget_folds) for x in (fold(k), held(k))]
            inputs += [policy(k, b) for k in range(args.select_budget_folds) for b in args.budgets]
            inputs += [fill(result, budget=b, seed=s, split=sp) for b in args.budgets for s in args.seeds for sp in p["splits"]]
            selected = path(res, f"{f}_sel_s{{seed}}_{{split}}.json")
            add(f"select_budget_{f}", "select_budget",
                ["select_budget.py", "--method", f, "--dataset", data, "--folds", K,
                 "--fold-ids", *range(args.select_budget_folds), "--budgets", *sorted(args.budgets),
                 "--heldout", held("{fold}"), "--fold-policy", policies[0],
                 *(["--last-policy", policies[1]] if policies[1] else []), "--results", result,
                 "--seeds", *args.seeds, "--splits", *p["splits"], "--out", path(res, f"budget_selection_{f}.json"),
                 "--out-result", selected, *threads],
                inputs, [path(res, f"budget_selection_{f}.json")] + [fill(selected, seed=s, split=sp)
                                                                    for s in args.seeds for sp in p["splits"]])
    # label sources beyond the paper (docs/labels.md): the ensemble at each keep share and the self-improving rounds,
    # on the full data per seed and on each fold (seed 0, the fold's own iVAE and BC-exp), each family's variant
    # chosen by select_sampler.py's held-out rule; its results are copied as oilca_ens / oilca_self
    fams = {"oilca_ens": [f"oilca_ens_q{q}" for q in sorted(args.ens_keeps, reverse=True)],
            "oilca_self": ["oilca"] + [f"oilca_round{r}" for r in range(2, args.self_rounds + 1)],
            "oilca_sup": ["oilca"] + [f"oilca_sup_q{q}" for q in sorted(args.sup_keeps, reverse=True)]}
    fams = {f: c for f, c in fams.items() if f in args.methods}
    ens_data = lambda dataset, q, seed: dataset.replace(".npz", f"_aug_ens_q{q}_r{args.ratio}_s{seed}.npz")  # noqa: E731
    sup_data = lambda dataset, q, seed: dataset.replace(".npz", f"_aug_sup_q{q}_r{args.ratio}_s{seed}.npz")  # noqa: E731
    round_data = lambda dataset, rnd, seed: dataset.replace(".npz", f"_aug_round{rnd}_r{args.ratio}_s{seed}.npz")  # noqa: E731

    def label_chains(prefix, dataset, ivae_ckpt, first_policy, sampler, seed, evals):
        """The ensemble datasets and policies at every keep share, the rounds after `first_policy` (OILCA's), and
        the support filter's at every keep share with `sampler` (BC-exp's policy) labelling, for the full data
        (prefix "") or fold k (prefix "_cv<K>_f<k>", run names lsel_<method>_f<k>_s0)."""
        run = lambda m: f"{m}_s{seed}" if not prefix else f"lsel_{m}_f{prefix.rsplit('_f', 1)[1]}_s0"  # noqa: E731
        r = args.ratio
        if "oilca_ens" in fams:  # the largest share's job trains the members; the others load them
            members = path(runs, f"ensemble{prefix}_s{seed}", "policy.pt")
            member_files = [members.replace("policy.pt", f"policy_m{k}.pt") for k in range(args.ens_size)]
            for i, q in enumerate(sorted(args.ens_keeps, reverse=True)):
                out = ens_data(dataset, q, seed)
                argv = ["augment.py", "--dataset", dataset, "--ivae", ivae_ckpt, "--labels", "ensemble",
                        "--ensemble-size", args.ens_size, "--ensemble-keep", q, "--sampler-steps", args.steps,
                        "--ratio", r, "--seed", seed,
                        "--out", out, *threads]
                if i == 0:  # the members train as BC-exp does, with its --act-eps
                    add(f"augment{prefix}_ens_q{q}_r{r}_s{seed}", "labels", argv + ["--sampler-out", members, *act_eps],
                        [dataset, ivae_ckpt], [out] + member_files)
                else:
                    add(f"augment{prefix}_ens_q{q}_r{r}_s{seed}", "labels", argv + ["--ensemble-members", *member_files],
                        [dataset, ivae_ckpt] + member_files, [out])
                train(run(f"oilca_ens_q{q}"), "labels", seed, "train_dwbc.py", out, method=f"oilca_ens_q{q}", evals=evals)
        for q in sorted(args.sup_keeps, reverse=True) if "oilca_sup" in fams else ():
            out = sup_data(dataset, q, seed)
            add(f"augment{prefix}_sup_q{q}_r{r}_s{seed}", "labels",
                ["augment.py", "--dataset", dataset, "--ivae", ivae_ckpt, "--sampler", sampler, "--support-keep", q,
                 "--ratio", r, "--seed", seed, "--out", out, *threads], [dataset, ivae_ckpt, sampler], [out])
            train(run(f"oilca_sup_q{q}"), "labels", seed, "train_dwbc.py", out, method=f"oilca_sup_q{q}", evals=evals)
        prev = first_policy
        for rnd in range(2, args.self_rounds + 1) if "oilca_self" in fams else ():
            out = round_data(dataset, rnd, seed)
            add(f"augment{prefix}_round{rnd}_r{r}_s{seed}", "labels",
                ["augment.py", "--dataset", dataset, "--ivae", ivae_ckpt, "--sampler", prev, "--ratio", r, "--seed", seed,
                 "--out", out, *threads], [dataset, ivae_ckpt, prev], [out])
            train(run(f"oilca_round{rnd}"), "labels", seed, "train_dwbc.py", out, method=f"oilca_round{rnd}", evals=evals)
            prev = path(runs, run(f"oilca_round{rnd}"), "policy.pt")

    if fams:
        for seed in args.seeds:
            label_chains("", data, ivae, path(runs, f"oilca_s{seed}", "policy.pt"),
                         path(runs, f"bc_exp_s{seed}", "policy.pt"), seed, True)
        for k in range(K):  # the folds: every part trained without fold k's D_E episodes
            cv_split_job(k)
            fold_ivae = ivae_job(f"ivae_cv{K}_f{k}", "labels", fold(k), f"ivae_cv{K}_f{k}")
            first = None
            if "oilca_self" in fams or "oilca_sup" in fams:  # round 1 (q = 1) on the fold: BC-exp on the fold labels
                out = fold_oilca_data(k, fold_ivae, "labels")
                train(f"lsel_oilca_f{k}_s0", "labels", 0, "train_dwbc.py", out, evals=False)
                first = path(runs, f"lsel_oilca_f{k}_s0", "policy.pt")
            label_chains(f"_cv{K}_f{k}", fold(k), fold_ivae, first, path(runs, f"select_bc_exp_f{k}", "policy.pt"), 0,
                         False)
        for f, cand in fams.items():
            result = path(res, "{candidate}_s{seed}_{split}.json")
            chosen = path(res, f"{f}_s{{seed}}_{{split}}.json")
            add(f"select_{f}", "labels",
                ["select_sampler.py", "--dataset", data, "--folds", K, "--candidates", *cand,
                 "--fold-dataset", fold("{fold}"), "--heldout", held("{fold}"),
                 "--fold-policy", path(runs, "lsel_{candidate}_f{fold}_s0", "policy.pt"),
                 "--full-policy", path(runs, "{candidate}_s{seed}", "policy.pt"), "--seeds", *args.seeds,
                 "--out", path(res, f"label_selection_{f}.json"), "--report-only", "--results", result,
                 "--out-result", chosen, "--selected-method", f, "--splits", *p["splits"], *threads],
                [data] + [x for k in range(K) for x in (fold(k), held(k))]
                + [path(runs, f"lsel_{c}_f{k}_s0", "policy.pt") for c in cand for k in range(K)]
                + [path(runs, f"{c}_s{s}", "policy.pt") for c in cand for s in args.seeds]
                + [fill(result, candidate=c, seed=s, split=sp) for c in cand for s in args.seeds for sp in p["splits"]],
                [path(res, f"label_selection_{f}.json")]
                + [fill(chosen, seed=s, split=sp) for s in args.seeds for sp in p["splits"]])
        if p["kind"] == "toy":  # each source's label error against the toy's controller, before training (seed 0)
            s0 = args.seeds[0]
            rows = [(m, aug(m, args.ratio, s0)) for m in ("oilca", "oilca_oracle", "oilca_bc_all", "oilca_dwbc",
                                                          "oilca_iswbc", "oilca_ilid", "oilca_best")
                    if (m, s0) in wanted and VARIANTS[m].get("ivae", True)]
            rows += [(f"oilca_ens_q{q}", ens_data(data, q, s0)) for q in sorted(args.ens_keeps, reverse=True)
                     if "oilca_ens" in fams]
            rows += [(f"oilca_round{rnd}", round_data(data, rnd, s0)) for rnd in range(2, args.self_rounds + 1)
                     if "oilca_self" in fams]
            rows += [(f"oilca_sup_q{q}", sup_data(data, q, s0)) for q in sorted(args.sup_keeps, reverse=True)
                     if "oilca_sup" in fams]
            outs = [path(res, f"fidelity_labels.{e}") for e in ("json", "md", "png")]
            add("fidelity_labels", "labels", ["fidelity.py", "--augmented", *[d for _, d in rows], "--names",
                                              *[m for m, _ in rows], "--out", outs[0], "--table", outs[1],
                                              "--figure", outs[2]], [d for _, d in rows], outs)
    for seed in args.seeds:  # custom methods (--methods NAME=SCRIPT[:augmented]), labelled NAME in every result
        for name, (script, augmented) in p.get("custom", {}).items():
            train(f"{name}_s{seed}", "custom", seed, script, aug("oilca", args.ratio, seed) if augmented else data,
                  method=name)
    flush_fast()
    for ref in ("expert", "random") if args.references else ():
        result = path(res, f"reference_{ref}_{{split}}.json")
        add(f"reference_{ref}", "references", ["evaluate.py", "--reference", ref, "--env-dataset", data, "--split",
            *p["splits"], "--episodes", args.episodes, "--out", result], [data],
            [result.replace("{split}", sp) for sp in p["splits"]])
    results = [o for j in jobs for o in j.outputs if o.endswith(".json") and os.path.dirname(o) == path(res)
               and "selection" not in os.path.basename(o)]
    add("report", "report", ["report.py", "--results", path(res)], results,
        [path(res, "table.md"), path(res, "summary.json"), path(res, "fig4.png")])

    producer = {o: j.name for j in jobs for o in j.outputs}
    for j in jobs:
        j.deps = sorted({producer[i] for i in j.inputs if i in producer})
    return topological(jobs)


def fill(template: str, **values) -> str:
    """`template` with each `{name}` replaced by its value."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def topological(jobs: List[Job]) -> List[Job]:
    """The jobs with each after the jobs it depends on, otherwise in the order given (fast-path trainings are
    gathered at the end of build, before the jobs that read their policies)."""
    done, out, todo = set(), [], list(jobs)
    while todo:
        ready = next(j for j in todo if set(j.deps) <= done)
        todo.remove(ready)
        out.append(ready)
        done.add(ready.name)
    return out


# ---- the skip rule -------------------------------------------------------------------------------------------------

_DIGESTS: Dict[tuple, str] = {}


def file_state(path: str) -> dict:
    """{size, mtime_ns, sha256} of a file; the hash is cached by (path, size, mtime)."""
    st = os.stat(os.path.join(REPO, path))
    key = (os.path.join(REPO, path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(key[0], "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _DIGESTS[key]}


def module_files(words: List[str]) -> List[str]:
    """The repo files an import line may load: `import a.b` -> a/b.py (and a/__init__.py); `from a import b, c` ->
    a.py or a/__init__.py, and a/b.py, a/c.py where those are modules of a package."""
    if len(words) < 2 or words[0] not in ("import", "from"):
        return []
    mod = words[1].rstrip(",").split(".")
    files = ["/".join(mod) + ".py", "/".join(mod + ["__init__.py"])]
    files += ["/".join(mod[:i]) + "/__init__.py" for i in range(1, len(mod))]
    if words[0] == "from" and len(words) >= 4 and words[2] == "import":
        names = " ".join(words[3:]).split("#")[0].replace("(", " ").replace(")", " ").replace(",", " ").split()
        names = [n for i, n in enumerate(names) if n != "as" and (i == 0 or names[i - 1] != "as")]
        files += ["/".join(mod + [n]) + ".py" for n in names]
    return files


def code_files(script: str, backend: str = "") -> List[str]:
    """The script and every module of this repo it imports, directly or through another (`import x`, `from x import`
    at any indentation, so lazily imported backends count too): a change to any of them makes the job stale. With
    `backend` (toy, dmc, cw) the other env backends' modules are left out: a job of one benchmark runs no code of
    another (envs/__init__.py dispatches on the dataset's env), so an edit to the CausalWorld backend leaves a
    finished DeepMind Control study up to date."""
    others = {m.replace(".", "/") + ".py" for k, m in envs.BACKENDS.items() if k != backend} if backend else set()
    found, todo = [], [script]
    while todo:
        f = todo.pop()
        if f in found or f in others or not os.path.isfile(os.path.join(REPO, f)):
            continue
        found.append(f)
        if f == "envs/__init__.py":  # it imports its backends by name (importlib)
            todo += [m.replace(".", "/") + ".py" for m in envs.BACKENDS.values()]
        with open(os.path.join(REPO, f)) as src:
            for line in src:
                todo += module_files(line.split())
    return sorted(found)


def code_digest(job: Job) -> str:
    return hashlib.sha256("".join(file_state(f)["sha256"] for f in code_files(job.argv[0], job.backend)).encode()).hexdigest()


def same_job(rec, job: Job) -> bool:
    """A record (local or ledger) is of this job: its argv, environment, input and output names, and code."""
    return isinstance(rec, dict) and rec.get("argv") == job.argv and rec.get("env", {}) == job.env and \
        isinstance(rec.get("inputs"), dict) and set(rec["inputs"]) == set(job.inputs) and \
        isinstance(rec.get("outputs"), dict) and set(rec["outputs"]) == set(job.outputs) and \
        rec.get("code") == code_digest(job)


def up_to_date(job: Job) -> bool:
    """Every output exists, and the record has this argv, the same code and these inputs with the same digests."""
    exists = lambda f: os.path.exists(os.path.join(REPO, f))
    try:
        with open(os.path.join(REPO, job.record)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return False
    if not same_job(rec, job) or not all(map(exists, job.outputs + job.inputs)):
        return False
    outputs = rec["outputs"]
    same = lambda i, old: (os.path.getsize(os.path.join(REPO, i)), os.stat(os.path.join(REPO, i)).st_mtime_ns) == \
        (old["size"], old["mtime_ns"]) or file_state(i)["sha256"] == old["sha256"]  # hash only a touched file
    # the kept outputs are checked too: a truncated or replaced output is not up to date
    return all(same(i, rec["inputs"][i]) for i in job.inputs) and all(same(o, outputs[o]) for o in job.outputs)


def job_env(preset: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """What every job's environment sets, and its record holds: the benchmark preset's variables (CausalWorld's
    one-thread BLAS) and torch's CPU kernels pinned to their AVX2 versions (ATEN_CPU_CAPABILITY=avx2) on an x86 CPU
    that has AVX2, so a CPU with AVX-512 gives the floats of one without it (seen here: BCND's returns differed between
    such two machines, and matched with the pin; the speed of the toy's trainers did not change). A value already in
    the environment wins (e.g. avx512 or default)."""
    env = {k: os.environ.get(k, v) for k, v in (preset or {}).items()}
    if os.environ.get("ATEN_CPU_CAPABILITY"):
        env["ATEN_CPU_CAPABILITY"] = os.environ["ATEN_CPU_CAPABILITY"]
    elif "avx2" in contract.machine()["isa"]:
        env["ATEN_CPU_CAPABILITY"] = "avx2"
    return env


def ledger_record(job: Job) -> Optional[dict]:
    """The job's ledger record if it has this argv, code, inputs and outputs; None otherwise."""
    if not job.ledger:
        return None
    try:
        with open(os.path.join(REPO, job.ledger)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if same_job(rec, job) else None


def git_ignored(paths: List[str]) -> set:
    """The paths (relative to the repo, or absolute) that git ignores; none outside a git checkout or without git."""
    full = [os.path.join(REPO, p) for p in paths]  # a study outside the repo (--root) has absolute paths
    where = os.path.commonpath(full) if full else ""
    while where and not os.path.isdir(where):
        where = os.path.dirname(where)
    if not where:
        return set()
    try:
        run = subprocess.run(["git", "check-ignore", "--stdin"], cwd=where, input="\n".join(sorted(set(full))),
                             capture_output=True, text=True)
    except OSError:
        return set()
    ignored = set(run.stdout.split("\n"))
    return {p for p, f in zip(paths, full) if f in ignored}


def plan(jobs: List[Job], force: bool) -> Dict[str, str]:
    """'skip', 'keep', 'run' or 'regen' per job (in topological order). A job runs if it is not up to date or
    anything upstream of it runs. A job that is up to date itself but has an upstream job to run is marked `recheck`:
    when its turn comes it is checked again and skipped if its inputs came out byte-identical (early cut-off: a
    re-run that reproduces its outputs, e.g. after a code change that leaves the numbers alone, does not re-run
    everything below it).

    With --ledger, a job that is not up to date here is kept ('keep') when its ledger record has its argv and code,
    its outputs under results/ are the recorded ones (or, where git ignores one, absent), and each input is the
    recorded one (the file here, or the ledger's record of a kept upstream job's output that is not here), with no
    upstream job to run. A kept job whose missing outputs a running job needs is made again ('regen'), and must
    reproduce its recorded outputs."""
    state: Dict[str, str] = {}
    recorded: Dict[str, str] = {}  # output -> sha256 of the kept jobs' outputs, as their ledger records have them
    kept: Dict[str, dict] = {}  # the kept jobs' ledger records
    exists = lambda f: os.path.exists(os.path.join(REPO, f))  # noqa: E731
    digest = lambda f: file_state(f)["sha256"] if exists(f) else recorded.get(f)  # noqa: E731
    # a results/ output that git ignores (a figure such as returns_hist.png) is in no clone: its absence does not
    # stop a job being kept, else a fresh clone would collect a dataset again only to redraw the figure
    ignored = git_ignored([o for j in jobs if j.ledger for o in j.kept if not exists(o)])  # only --ledger keeps
    for j in jobs:
        upstream, fresh = any(state[d] in ("run", "regen") for d in j.deps), not force and up_to_date(j)
        j.recheck = upstream and fresh
        state[j.name] = "skip" if fresh and not upstream else "run"
        rec = None if fresh or upstream or force else ledger_record(j)
        if rec is not None and all(exists(o) and file_state(o)["sha256"] == rec["outputs"][o] or
                                   not exists(o) and o in ignored for o in j.kept) \
                and all(not exists(o) or file_state(o)["sha256"] == rec["outputs"][o] for o in j.outputs) \
                and all(digest(i) == rec["inputs"][i] for i in j.inputs):
            state[j.name], kept[j.name] = "keep", rec
            recorded.update(rec["outputs"])
    producer = {o: j for j in jobs for o in j.outputs}
    for j in reversed(jobs):  # a job that runs needs its inputs: a kept job whose output is not here makes it again
        if state[j.name] not in ("run", "regen"):
            continue
        for i in j.inputs:
            up = producer.get(i)
            if up is not None and state[up.name] == "keep" and not exists(i):
                state[up.name] = "regen"
                up.regen = dict(kept[up.name]["outputs"])
    for j in jobs:  # an up-to-date job below a regenerated one: checked again when its turn comes
        if state[j.name] == "skip" and any(state[d] in ("run", "regen") for d in j.deps):
            state[j.name], j.recheck = "run", True
    return state


def command(job: Job) -> str:
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(REPO + os.sep) else sys.executable
    return shlex.join([python, *job.argv])


# ---- executing one job (in this process's thread pool, or in a Ray worker) ------------------------------------------

def execute(job: Job) -> dict:
    """Run the job's script, its output into its log; on success write its record (atomically). Never raises."""
    at, start = lambda f: os.path.join(REPO, f), time.time()
    if job.recheck and up_to_date(job):
        return {"name": job.name, "ok": True, "rc": 0, "start": start, "end": time.time(), "unchanged": True}
    code = code_digest(job)  # the code as the job starts: an edit while it runs leaves it stale
    other: List[str] = []  # a job made again whose outputs differ from its ledger record's
    try:
        for f in [job.log, job.record, *job.outputs]:
            os.makedirs(os.path.dirname(at(f)), exist_ok=True)
        if os.path.exists(at(job.record)):
            os.remove(at(job.record))  # no record while it runs: an interrupted job is not up to date
        with open(at(job.log), "w") as log:
            path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)  # a trainer copied anywhere
            with CHILDREN.lock:
                if CHILDREN.stopping.is_set():  # the runner is being stopped: start nothing more
                    raise OSError("the runner was stopped")
                proc = subprocess.Popen([sys.executable, *job.argv], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        env={**os.environ, **job.env, "PYTHONPATH": path})
                CHILDREN.procs.add(proc)
            try:
                rc = wait_job(proc, job, log)
            finally:
                with CHILDREN.lock:
                    CHILDREN.procs.discard(proc)
            missing = [f for f in job.outputs if not os.path.exists(at(f))]
            if rc == 0 and missing:
                rc = f"0 but no {' '.join(missing)}"
                print(f"runner: exit {rc}", file=log)
            other = [f for f in (job.regen or {}) if rc == 0 and file_state(f)["sha256"] != job.regen[f]]
            if other:  # made again for a job that needs it: the kept results below rest on the recorded bytes
                print(f"runner: {other[0]} differs from its ledger record {job.ledger}", file=log)
        if rc == 0:
            rec = {"argv": job.argv, "env": job.env, "code": code, "inputs": {i: file_state(i) for i in job.inputs},
                   "outputs": {o: file_state(o) for o in job.outputs},
                   "seconds": round(time.time() - start, 2),
                   "finished": datetime.datetime.now().isoformat(timespec="seconds")}
            contract.save_text(at(job.record), json.dumps(rec, indent=1) + "\n")
            # what a fresh clone needs to keep it: digests, no mtimes; a job made again that gave other bytes than
            # its ledger record is this machine's run now (recorded here and in the ledger, so it is not run again)
            if job.ledger and (job.regen is None or other):
                sha = lambda d: {f: v["sha256"] for f, v in d.items()}  # noqa: E731
                entry = {**rec, "inputs": sha(rec["inputs"]), "outputs": sha(rec["outputs"]),
                         "machine": contract.machine()}
                os.makedirs(os.path.dirname(at(job.ledger)), exist_ok=True)
                contract.save_text(at(job.ledger), json.dumps(entry, indent=1) + "\n")
    except OSError as e:
        rc = f"{type(e).__name__}: {e}"
    if rc == 0 and other:  # the grid stops here: nothing below may mix results made from two different upstream files
        rc = (f"0 but {other[0]} differs from its ledger record {job.ledger} (another machine's floats?): the kept "
              f"results below it rest on the recorded bytes; this run is recorded (its ledger record too), so the same "
              f"command again runs every job below it here, not this one")
    return {"name": job.name, "ok": rc == 0, "rc": rc, "start": start, "end": time.time()}


REGEN_POLL = 5.0  # seconds between a made-again job's output checks


def wait_job(proc: subprocess.Popen, job: Job, log) -> int:
    """The job's exit status. A kept job made again (`job.regen`) that has outputs under results/ (a trainer: its
    evaluation results) is stopped as soon as every one of its outputs is here with its recorded bytes: made again for
    the policy a running job needs, it has nothing left to give once that policy reproduced, since its kept results
    are here already (its final evaluation would write the same bytes again). A job without such outputs (a
    collection, which cleans up after writing its dataset) runs to its end. An output is hashed once it exists, and
    again only when its size or time changes."""
    if job.regen is None or not job.kept:
        return proc.wait()
    at = lambda f: os.path.join(REPO, f)  # noqa: E731
    while True:
        try:
            return proc.wait(timeout=REGEN_POLL)
        except subprocess.TimeoutExpired:
            pass
        if all(os.path.exists(at(f)) for f in job.regen) and \
                all(file_state(f)["sha256"] == sha for f, sha in job.regen.items()):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            print(f"runner: stopped: every output of this job made again has its recorded bytes "
                  f"(its ledger record {job.ledger})", file=log, flush=True)
            return 0


class Children:
    """The job processes this runner is running (the local backend), so a stopped runner stops them. Pickled (Ray
    ships this module's functions by value) as a fresh, empty registry: a Ray worker has its own processes."""

    def __init__(self):
        self.procs, self.lock, self.stopping = set(), threading.Lock(), threading.Event()

    def __reduce__(self):
        return (Children, ())


CHILDREN = Children()


class Stopped(Exception):
    """The runner got SIGTERM or SIGINT: its running jobs are stopped with it."""


def stop_children(grace: float = 10.0) -> int:
    """SIGTERM to every running job, SIGKILL to those still alive after `grace` seconds; returns how many ran."""
    CHILDREN.stopping.set()
    with CHILDREN.lock:
        procs = list(CHILDREN.procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.time() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return len(procs)


def on_signal(signum, frame):
    raise Stopped(signal.Signals(signum).name)


WIND_DOWN = threading.Event()  # set by SIGUSR1: start no new job, let the running ones finish and be recorded


def run_local(todo: List[Job], jobs: int, on_start, on_done, solo: Sequence[str] = ()):
    """Up to `jobs` jobs at a time, in list order as their dependencies finish; a job whose name starts with one of
    `solo` waits for the running ones to end and keeps every other job waiting until it ends."""
    names = {j.name for j in todo}
    done = {d for j in todo for d in j.deps if d not in names}  # the skipped (up-to-date) jobs
    running, failed = {}, False
    alone = lambda j: j.name.startswith(tuple(solo))  # noqa: E731
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        try:
            while todo or running:
                stopping = failed or WIND_DOWN.is_set()  # after a failure or SIGUSR1 no new job starts
                ready = [] if stopping else [j for j in todo if all(d in done for d in j.deps)]
                for j in ready:
                    if len(running) >= max(1, jobs) or any(map(alone, running.values())) or (alone(j) and running):
                        break
                    todo.remove(j)
                    on_start(j)
                    running[pool.submit(execute, j)] = j
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    res = fut.result()
                    running.pop(fut)
                    failed |= not res["ok"]
                    done.add(res["name"])
                    on_done(res)
        except Stopped as e:  # stop the jobs before the pool waits for its threads
            e.jobs = stop_children()
            raise


def _ray_task(job: Job, stop_file: str, *upstream: dict) -> dict:
    """A Ray task: runs the job unless an upstream job failed or the driver has stopped the grid."""
    if not all(u["ok"] for u in upstream) or os.path.exists(stop_file):
        return {"name": job.name, "ok": False, "rc": None, "start": time.time(), "end": time.time()}
    return execute(job)


def run_ray(todo: List[Job], args: Args, on_start, on_done, stop_file: str):
    import ray  # optional: requirements-ray.txt
    if __name__ != "__main__":  # workers need not import this module: ship its functions by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=args.ray_address, num_cpus=None if args.ray_address else args.jobs,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as e:  # no cluster at that address, a refused connection, a bad address
            where = f"--ray-address {args.ray_address}" if args.ray_address else "--backend ray"
            raise SystemExit(f"error: {where}: Ray did not start ({cli.short(str(e).splitlines()[0] if str(e) else type(e).__name__)})") from None
    try:
        task, refs = ray.remote(_ray_task), {}
        for j in todo:  # topological order: every upstream ref exists before its dependents are submitted
            on_start(j)
            refs[j.name] = task.options(name=j.name, num_cpus=j.cpus, num_gpus=j.gpus, max_retries=0).remote(
                j, stop_file, *[refs[d] for d in j.deps if d in refs])
        pending, names, bad = list(refs.values()), {ref: name for name, ref in refs.items()}, set()
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                res = ray.get(ready[0])
            except Exception as e:  # the worker died (out of memory, node lost): a failure of this job
                job = next(j for j in todo if j.name == names[ready[0]])
                res = {"name": job.name, "ok": False, "rc": None if bad & set(job.deps) else repr(e)[:200],
                       "start": time.time(), "end": time.time()}
            if not res["ok"]:
                bad.add(res["name"])
            if not res["ok"] and res["rc"] is not None:
                open(stop_file, "w").close()  # tasks that have not started yet return without running
            on_done(res)
    finally:
        if started:
            ray.shutdown()


# ---- main --------------------------------------------------------------------------------------------------------

def write_timing(path: str, measured: Dict[str, float], stages: List[str]) -> dict:
    """Update timing.json with this invocation's `measured` {stage: wall s, "total": wall s}: a stage measured now
    gets its new value, every other stage keeps the value it had (the last invocation that ran it), and "total"
    becomes this invocation's. Stages in graph order, then any others the file held. Returns what was written."""
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {}
    old = old if isinstance(old, dict) else {}
    timing = {}
    for stage in [*dict.fromkeys(stages), *old]:
        if stage != "total" and stage not in timing and (stage in measured or stage in old):
            timing[stage] = measured.get(stage, old.get(stage))
    timing["total"] = measured["total"]
    contract.save_text(path, json.dumps(timing, indent=1) + "\n")  # atomic, stages kept in graph order
    return timing


def main(args: Args) -> dict:
    given_threads = args.threads is not None
    args, p = resolve(args)
    jobs = build(args, p)
    env = job_env(p.get("env"))
    for j in jobs:
        j.env = dict(env)
    state = plan(jobs, args.force)
    listing = [dict(name=j.name, state=state[j.name], command=command(j)) for j in jobs]
    why = "as given" if given_threads else f"{cpu_cores()} cores // --jobs {args.jobs}"
    print(f"runner: --threads {args.threads} for every job that takes it ({why})")
    if env:
        print(f"runner: every job runs with {' '.join(f'{k}={v}' for k, v in env.items())} (job_env: the preset's "
              f"variables; the same floats on CPUs with and without AVX-512)")
    if args.solo:
        print(f"runner: jobs named {' '.join(p + '*' for p in args.solo)} run alone (--solo)")
    if args.dry_run:
        print("\n".join(f"{j['state']:<4} {j['name']:<22} {j['command']}" for j in listing))
        maybe, kept = sum(j.recheck for j in jobs), sum(s == "keep" for s in state.values())
        again = sum(s == "regen" for s in state.values())
        print(f"dry run: {sum(s in ('run', 'regen') for s in state.values())} of {len(jobs)} jobs would run"
              + (f" ({maybe} of them only if an upstream output changes)" if maybe else "")
              + (f" ({again} of them kept jobs made again for the jobs that need their outputs)" if again else "")
              + (f"; {kept} kept from the ledger" if kept else ""))
        return {"jobs": listing, "ran": [], "failed": [], "ok": True}

    runs, res = (os.path.join(os.path.abspath(args.root), d, p["slug"]) for d in ("runs", "results"))
    try:  # one runner per --root: a second would start the first one's jobs (shared SAC runs, the same slug)
        lock = contract.claim(os.path.join(os.path.abspath(args.root), "runs", "runner"))
    except contract.ContractError:
        raise SystemExit(f"error: --root {args.root}: another runner is at work there (lock "
                         f"{os.path.join(args.root, 'runs', 'runner.lock')}); wait for it to end") from None
    try:
        return run_jobs(args, jobs, state, listing, runs, res)
    finally:
        lock.release()


def run_jobs(args: Args, jobs: List[Job], state: dict, listing: list, runs: str, res: str) -> dict:
    """Run the jobs to run (the local backend or Ray), then print and record the timing; SIGTERM or SIGINT stops the
    running jobs too (they are not up to date afterwards: the next invocation reruns them)."""
    stop_file = os.path.join(runs, ".jobs", "STOP")  # exists while a failed grid winds down (Ray tasks read it)
    os.makedirs(os.path.dirname(stop_file), exist_ok=True)
    todo = [j for j in jobs if state[j.name] in ("run", "regen")]
    print("".join(f"[skip] {j.name}\n" for j in jobs if state[j.name] == "skip"), end="")
    print("".join(f"[kept] {j.name} (its ledger record)\n" for j in jobs if state[j.name] == "keep"), end="")
    results, failed, t0 = {}, [], time.time()

    def on_start(j: Job):
        with open(os.path.join(runs, "jobs.log"), "a") as f:
            f.write(f"{datetime.datetime.now().isoformat(timespec='seconds')} {j.name}: {command(j)} > {j.log}\n")
        print(f"[{'start' if args.backend == 'local' else 'queued'}] {j.name}", flush=True)

    def on_done(r: dict):
        results[r["name"]] = r
        if r.get("unchanged"):
            print(f"[skip] {r['name']} (its inputs came out unchanged)", flush=True)
        elif r["ok"] or r["rc"] is not None:
            n_ok = sum(x["ok"] and not x.get("unchanged") for x in results.values())
            done = f"done {n_ok}/{len(todo)}" if r["ok"] else f"FAILED, exit {r['rc']}"
            print(f"[{done}] {r['name']} {r['end'] - r['start']:.1f}s", flush=True)
            failed.extend([] if r["ok"] else [r["name"]])

    main_thread = threading.current_thread() is threading.main_thread()
    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}

    def on_wind_down(signum, frame):  # SIGUSR1; Ray's tasks that have not started read the stop file
        WIND_DOWN.set()
        if args.backend == "ray":
            open(stop_file, "w").close()

    if main_thread:
        handlers[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_wind_down)
    WIND_DOWN.clear()
    try:
        if args.backend == "ray":
            run_ray(todo, args, on_start, on_done, stop_file)
        else:
            run_local(list(todo), args.jobs, on_start, on_done, args.solo)
    except Stopped as e:
        n = getattr(e, "jobs", 0)  # run_local stopped its jobs; Ray's tasks are Ray's
        raise SystemExit(f"error: the runner got {e}: stopped it and its {n} running job(s); run the same command "
                         f"again to resume (finished jobs are skipped)") from None
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)
        CHILDREN.stopping.clear()
        if os.path.exists(stop_file):
            os.remove(stop_file)

    # timing: per stage the wall time from its first start to its last end (stages overlap), and the total
    ran = [r for r in results.values() if r["ok"] and not r.get("unchanged")]
    unchanged = {r["name"] for r in results.values() if r.get("unchanged")}
    timing, total = {}, time.time() - t0  # this invocation's: the stages that ran jobs now, and its wall time
    print(f"\n{'stage':<14}{'ran':>5}{'skipped':>9}{'wall s':>9}{'job s':>9}")
    for stage in dict.fromkeys(j.stage for j in jobs):
        rs = [r for r in ran if r["name"] in {j.name for j in jobs if j.stage == stage}]
        wall = round(max(r["end"] for r in rs) - min(r["start"] for r in rs), 1) if rs else 0.0
        if rs:
            timing[stage] = wall
        skipped = sum(state[j.name] in ("skip", "keep") or j.name in unchanged for j in jobs if j.stage == stage)
        print(f"{stage:<14}{len(rs):>5}{skipped:>9}{wall:>9.1f}{sum(r['end'] - r['start'] for r in rs):>9.1f}")
    timing["total"] = round(total, 1)
    print(f"{'total':<14}{len(ran):>5}{len(jobs) - len(todo) + len(unchanged):>9}{total:>9.1f}")
    if ran and not failed:  # an all-skipped run keeps the timing of the run that made the results
        write_timing(os.path.join(res, "timing.json"), timing, [j.stage for j in jobs])
    if failed:
        print(f"not run after the failure: {len(todo) - len(ran) - len(unchanged) - len(failed)} jobs")
        print(f"error: job {failed[0]} failed; see {next(j.log for j in jobs if j.name == failed[0])}", file=sys.stderr)
    started = sum(r["ok"] or r["rc"] is not None for r in results.values())  # Ray's unstarted tasks: not ok, rc None
    left = len(todo) - started
    if WIND_DOWN.is_set() and not failed and left:
        print(f"error: the runner got SIGUSR1: it finished and recorded its {started} started job(s) and started "
              f"none of the other {left}; run the same command again to resume", file=sys.stderr)
    return {"jobs": listing, "ran": [r["name"] for r in ran], "failed": failed, "timing": timing,
            "ok": not failed and not (WIND_DOWN.is_set() and left)}


if __name__ == "__main__":
    sys.exit(0 if cli.run(main, Args)["ok"] else 1)
