"""The SAC behaviour runs of the DeepMind Control tasks as one markdown table: per task, the env steps trained, the
deterministic evaluation return at every snapshot the datasets use, the best evaluation return and the step it came
at, and the training time.

    .venv/bin/python scripts/sac_summary.py --runs runs/dmc_cartpole-swingup/sac runs/dmc_cheetah-run/sac

Input: each run's progress.csv (train_behavior.py: a row per 1,000 env steps with `step`, `sps` (env steps/s over
that stretch) and, every --eval-every steps and at each snapshot, `eval_return`, the mean return of 5 deterministic
episodes on the clean task) and args.json (the task and the snapshot steps). The time column is the sum of
1,000 / sps over the rows: the training time as the run measured it, resumes included, start-up and evaluation
excluded; on a shared machine it is an upper bound of an idle core's.

Output: the table on stdout (or --out, written atomically). A run folder without progress.csv stops the command with
one line on stderr naming it.
"""

import csv
import json
import os
import sys
from dataclasses import dataclass
from typing import Optional, Tuple


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402
from oilca import contract  # noqa: E402


@dataclass
class Args:
    runs: Tuple[str, ...]
    """train_behavior.py output folders (each with progress.csv and args.json)"""
    out: Optional[str] = None
    """write the table here (.md) instead of stdout"""


def summarise(run: str) -> dict:
    """{task, steps, evals: {step: return}, best, best_step, seconds, snapshots} of one SAC run."""
    with open(os.path.join(run, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(run, "args.json")) as f:
        args = json.load(f)
    evals = {int(r["step"]): float(r["eval_return"]) for r in rows if r.get("eval_return")}
    seconds = sum(1000.0 / float(r["sps"]) for r in rows if r.get("sps") and float(r["sps"]) > 0)
    steps = max((int(r["step"]) for r in rows), default=0)
    best_step = max(evals, key=evals.get) if evals else None
    snapshots = [s for s in args.get("snapshot_steps", ()) if s <= args.get("total_steps", steps)]
    return dict(task=args.get("env", run), steps=steps, evals=evals, best=evals.get(best_step), best_step=best_step,
                seconds=seconds, snapshots=snapshots)


def table(summaries: list) -> str:
    snaps = sorted({s for r in summaries for s in r["snapshots"]})
    head = ["task", "env steps"] + [f"return at {s // 1000}k" for s in snaps] + ["best (at step)", "training time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summaries:
        cells = [r["task"], f"{r['steps']:,}"]
        cells += [f"{r['evals'][s]:.1f}" if s in r["evals"] else "—" for s in snaps]
        cells.append(f"{r['best']:.1f} ({r['best_step'] // 1000}k)" if r["best"] is not None else "—")
        cells.append(f"{r['seconds'] / 60:.0f} min")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> str:
    for run in args.runs:
        for name in ("progress.csv", "args.json"):
            if not os.path.isfile(os.path.join(run, name)):
                raise SystemExit(f"error: --runs: {run} has no {name} (not a train_behavior.py run?)")
    text = table([summarise(r) for r in args.runs])
    if args.out:
        contract.save_text(args.out, text)
    else:
        print(text, end="")
    return text


if __name__ == "__main__":
    main(cli.parse(Args))
