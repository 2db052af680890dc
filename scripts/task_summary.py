"""Per task of the paper's tables: the behaviour data and what it cost on this machine, as one markdown table.

Two steps, so the docs come from committed files alone:

    .venv/bin/python scripts/task_summary.py --collect results/dmc_cheetah-run_t5 results/cw_pushing_t5
    .venv/bin/python scripts/task_summary.py --doc docs/tables.md

`--collect FOLDER ...` reads, for each results folder results/<slug>, what this machine holds of that run: the
dataset data/<slug>.npz (episodes, transitions, D_E episodes and rows, the behaviour policies), the runner's job
records runs/<slug>/.jobs/*.json (each job's wall seconds as the runner measured them, start to end of its
subprocess: collection, iVAE, augmentation, every training run with its final evaluation) and the expert reference
results/<slug>/reference_expert_<split>.json; it writes results/<slug>/task.json (atomically). task.json keeps every
job's seconds (`job_seconds`), and a later --collect keeps the entries of jobs whose records this machine lacks: a row
finished on a new machine (a fresh runs/) still counts the jobs timed on the old one. A cell with no timed job is
"—". Without --collect it reads every results/*_t5/task.json (or --tasks) and prints the table, or puts it between
`<!-- report: tasks -->` and `<!-- /report -->` in --doc.

Times are wall seconds of jobs that shared the 2-core machine with one other job (`--jobs 2 --threads 1`) and at
times with other work, so they are upper bounds of an idle core's. "training runs" sums every trainer job of the
folder (all methods and seeds, final evaluation included) and gives the mean per run; the SAC behaviour runs are
timed in docs/dmc.md.
"""

import glob
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402
from oilca import contract  # noqa: E402
import envs
import report  # noqa: E402
import runner  # noqa: E402

TRAINER_JOB = re.compile(r"^(.+)_s\d+$")  # a training job is <method>_s<seed>, method one of the runner's
OPEN, CLOSE = "<!-- report: tasks -->", "<!-- /report -->"


@dataclass
class Args:
    collect: Tuple[str, ...] = ()
    """results folders (results/<slug>) to summarise from this machine's data/ and runs/ into <folder>/task.json"""
    tasks: Tuple[str, ...] = ()
    """task.json files to tabulate (not given: results/*_t5/task.json)"""
    doc: Optional[str] = None
    """markdown file whose tasks block gets the table (not given: print it)"""
    root: str = "."
    """the folder holding data/, runs/ and results/"""


def behaviour(meta: dict) -> str:
    """A short description of the behaviour policies named in the dataset's metadata."""
    pols = meta.get("behavior_policies", [])
    steps = [p["train_step"] for p in pols if p.get("name") == "snapshot" and "train_step" in p]
    if steps:
        return f"SAC snapshots at {', '.join(f'{s // 1000}k' for s in sorted(steps))}"
    names = sorted({p.get("label", p.get("name", "?")) for p in pols})
    return ", ".join(names) if names else "?"


def collect(folder: str, root: str) -> dict:
    slug = os.path.basename(os.path.normpath(folder))
    data_path = os.path.join(root, "data", f"{slug}.npz")
    jobs_dir = os.path.join(root, "runs", slug, ".jobs")
    for path, what in ((data_path, "dataset"), (jobs_dir, "job records")):
        if not os.path.exists(path):
            raise SystemExit(f"error: --collect: {folder}: its {what} {path} is not on this machine")
    data = envs.load_dataset(data_path)
    meta = data["metadata"]
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["expert"]), bool)
    ids = data["episode_ids"][~aug]
    exp_ids = data["episode_ids"][data["expert"] & ~aug]
    seconds = previous_seconds(folder)  # jobs timed by an earlier --collect, on this machine or one since replaced
    for path in sorted(glob.glob(os.path.join(jobs_dir, "*.json"))):
        with open(path) as f:
            seconds[os.path.basename(path)[:-5]] = float(json.load(f).get("seconds", 0.0))
    methods = set(runner.METHODS) | set(runner.NEWER)
    train = {k: v for k, v in seconds.items() if (m := TRAINER_JOB.match(k)) and m.group(1) in methods}
    expert = {}
    for path in sorted(glob.glob(os.path.join(folder, "reference_expert_*.json"))):
        with open(path) as f:
            r = json.load(f)
        split = os.path.basename(path)[len("reference_expert_"):-5]
        expert[split] = {k: r[k] for k in ("mean_return", "mean_success") if k in r}
    return dict(slug=slug, env_id=meta["env_id"], behaviour=behaviour(meta), episodes=int(len(np.unique(ids))),
                transitions=int((~aug).sum()), expert_episodes=int(len(np.unique(exp_ids))),
                expert_rows=int((data["expert"] & ~aug).sum()), expert_reference=expert,
                collect_seconds=seconds.get("collect"), ivae_seconds=seconds.get("ivae"),
                augment_seconds=sum(v for k, v in seconds.items() if k.startswith("augment")),
                train_runs=len(train), train_seconds=sum(train.values()), job_seconds=seconds)


def previous_seconds(folder: str) -> dict:
    """The per-job seconds of the folder's existing task.json ({} if none): a job record on this machine replaces its
    entry, the others are kept, so a row run over several machines (each with its own runs/) keeps every job's time."""
    try:
        with open(os.path.join(folder, "task.json")) as f:
            old = json.load(f).get("job_seconds", {})
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: --collect: {folder}/task.json cannot be read ({e})")
    if not isinstance(old, dict) or not all(isinstance(v, (int, float)) for v in old.values()):
        raise SystemExit(f"error: --collect: {folder}/task.json: job_seconds must map job names to seconds")
    return {str(k): float(v) for k, v in old.items()}


def minutes(s: Optional[float]) -> str:
    return "—" if s is None else f"{s / 60:.1f} min"


def table(rows: list) -> str:
    head = ["task", "behaviour policies", "expert reference", "episodes", "transitions", "D_E episodes (rows)",
            "collection", "iVAE + augmentation", "training runs: count, total (mean per run)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ref = []
        for split, v in sorted(r["expert_reference"].items()):
            cell = f"{v['mean_return']:.1f}" if "mean_return" in v else "?"
            if "mean_success" in v:
                cell += f" (success {v['mean_success']:.2f})"
            ref.append(cell if len(r["expert_reference"]) == 1 else f"{split}: {cell}")
        prep = None if r["ivae_seconds"] is None and not r["augment_seconds"] else \
            (r["ivae_seconds"] or 0) + (r["augment_seconds"] or 0)  # "—": no iVAE or augmentation job was timed
        per_run = r["train_seconds"] / r["train_runs"] if r["train_runs"] else None
        cells = [r["env_id"], r["behaviour"], "; ".join(ref) or "—", f"{r['episodes']:,}", f"{r['transitions']:,}",
                 f"{r['expert_episodes']} ({r['expert_rows']:,})", minutes(r["collect_seconds"]), minutes(prep),
                 f"{r['train_runs']}, {minutes(r['train_seconds'])} ({minutes(per_run)})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> str:
    if args.collect:
        for folder in args.collect:
            if not os.path.isdir(folder):
                raise SystemExit(f"error: --collect: {folder} is not a folder")
        summaries = [collect(folder, args.root) for folder in args.collect]  # all read before anything is written
        for folder, s in zip(args.collect, summaries):
            contract.save_json(os.path.join(folder, "task.json"), s)
            print(f"wrote {os.path.join(folder, 'task.json')}")
        return ""
    paths = list(args.tasks) or sorted(glob.glob(os.path.join(args.root, "results", "*_t5", "task.json")))
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                rows.append(json.load(f))
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: --tasks: {path} cannot be read ({e})")
    text = table(rows)
    if args.doc:
        try:
            with open(args.doc, encoding="utf-8") as f:
                old = f.read()
            new = report.replace_blocks(args.doc, old, lambda line: line.strip() == OPEN,
                                        lambda line: line.strip() == CLOSE, text, OPEN, CLOSE)
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: --doc: {e}")
        contract.save_text(args.doc, new)
    else:
        print(text, end="")
    return text


if __name__ == "__main__":
    main(cli.parse(Args))
