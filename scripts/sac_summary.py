"""The SAC behaviour runs of the DeepMind Control tasks as one markdown table: per task, the env steps trained, the
deterministic evaluation return at every snapshot the datasets use, the best evaluation return and the step it came
at, and the training time.

    .venv/bin/python scripts/sac_summary.py --runs runs/dmc_cartpole-swingup/sac runs/dmc_cheetah-run/sac

Input: each run's progress.csv (train_behavior.py: a row per 1,000 env steps with `step`, `sps` (env steps/s over
that stretch, evaluations included; before 2026-12-02 the mean since the process started, which --sps-since-start
reads) and, every --eval-every steps and at each snapshot, `eval_return`, the mean return of 5 deterministic
episodes on the clean task) and args.json (the task and the snapshot steps). The time column is the sum of
each row's env steps / sps: the training time as the run measured it, resumes and evaluations included, start-up
excluded; on a shared machine it is an upper bound of an idle core's. The median env steps/s is the median over those
1,000-step rows (10,000-step stretches with --sps-since-start; a run slowed by other work for less than half its
rows keeps its quiet rate), and the last column is 1,000,000 env steps at that rate: what a 1M-step run would cost,
at the same settings, on the same machine.

Output: the table on stdout (or --out, written atomically). A run folder without progress.csv stops the command with
one line on stderr naming it.
"""

import csv
import json
import os
import statistics
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
    rate_after: int = 0
    """the median env steps/s (and the 1M-step cost) over the stretches that end after this env step only: the part
    of a run that had the machine to itself, when other work shared it before"""
    sps_since_start: bool = False
    """the runs' progress.csv were written before train_behavior.py logged each row's own rate: their sps is the mean
    since the process started (right only for a run that was never resumed), and is turned into per-row rates"""


def read_rows(run: str) -> list:
    with open(os.path.join(run, "progress.csv")) as f:
        return list(csv.DictReader(f))


def per_row_rates(rows: list, window: int = 10_000) -> list:
    """A never-resumed run's sps column, each the mean rate since step 0, as the rate of each stretch of `window` env
    steps, given on the stretch's last row (the others get none): the mean is printed to 0.1 steps/s, too coarse to
    time a single 1,000-step row. The last row closes the last stretch."""
    out, prev_step, prev_t = [], 0, 0.0
    for i, r in enumerate(rows):
        step, sps = int(r["step"]), float(r["sps"] or 0)
        if sps > 0 and (step % window == 0 or i == len(rows) - 1):
            t = step / sps
            out.append({**r, "sps": (step - prev_step) / (t - prev_t) if t > prev_t else ""})
            prev_step, prev_t = step, t
        else:
            out.append({**r, "sps": ""})
    return out


def summarise(run: str, sps_since_start: bool = False, rate_after: int = 0) -> dict:
    """{task, steps, evals: {step: return}, best, best_step, seconds, median_sps, snapshots} of one SAC run."""
    rows = read_rows(run)
    if sps_since_start:
        rows = per_row_rates(rows)
    with open(os.path.join(run, "args.json")) as f:
        args = json.load(f)
    evals = {int(r["step"]): float(r["eval_return"]) for r in rows if r.get("eval_return")}
    rates, seconds, prev = [], 0.0, 0  # prev: the step where the last rated stretch ended
    for r in rows:
        sps = float(r.get("sps") or 0)
        if sps > 0:
            seconds += (int(r["step"]) - prev) / sps
            prev = int(r["step"])
            if prev > rate_after:
                rates.append(sps)
    median = statistics.median(rates) if rates else None
    steps = max((int(r["step"]) for r in rows), default=0)
    best_step = max(evals, key=evals.get) if evals else None
    snapshots = [s for s in args.get("snapshot_steps", ()) if s <= args.get("total_steps", steps)]
    return dict(task=args.get("env", run), steps=steps, evals=evals, best=evals.get(best_step), best_step=best_step,
                seconds=seconds, median_sps=median, snapshots=snapshots)


def table(summaries: list) -> str:
    snaps = sorted({s for r in summaries for s in r["snapshots"]})
    head = (["task", "env steps"] + [f"return at {s // 1000}k" for s in snaps]
            + ["best (at step)", "training time", "median env steps/s", "1M env steps at that rate"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summaries:
        cells = [r["task"], f"{r['steps']:,}"]
        cells += [f"{r['evals'][s]:.1f}" if s in r["evals"] else "—" for s in snaps]
        cells.append(f"{r['best']:.1f} ({r['best_step'] // 1000}k)" if r["best"] is not None else "—")
        cells.append(f"{r['seconds'] / 60:.0f} min")
        m = r["median_sps"]
        cells += [f"{m:.0f}", f"{1e6 / m / 3600:.1f} h"] if m else ["—", "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> str:
    for run in args.runs:
        for name in ("progress.csv", "args.json"):
            if not os.path.isfile(os.path.join(run, name)):
                raise SystemExit(f"error: --runs: {run} has no {name} (not a train_behavior.py run?)")
    text = table([summarise(r, args.sps_since_start, args.rate_after) for r in args.runs])
    if args.out:
        contract.save_text(args.out, text)
    else:
        print(text, end="")
    return text


if __name__ == "__main__":
    main(cli.parse(Args))
