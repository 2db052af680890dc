"""A scripted manipulator expert (insert_ball: envs/dmc_scripted.py; insert_peg: envs/dmc_scripted_peg.py) against
uniform-random actions, episode for episode on the same starts and the same perturbations, as a JSON record and a
markdown table.

    .venv/bin/python scripts/scripted_expert.py --seeds 10000 30000 --episodes 30 \
        --out results/dmc_manipulator-insert_ball_scripted/expert_check.json
    .venv/bin/python scripts/scripted_expert.py --task manipulator-insert_peg --seeds 10000 30000 --episodes 30 \
        --out results/dmc_manipulator-insert_peg_scripted/expert_check.json

Per evaluation stream (`--seeds`; 10000 is evaluate.py's, the one every row's reference runs use) and setting
(`perturbed`: the dataset's three perturbation classes of c, round-robin, from the default table of envs/dmc.py;
`clean`: none), `--episodes` 1000-step episodes of each policy, episode i from task seed (seed·1_000_003 + i) mod
2³² with its perturbations and random actions from default_rng([seed, i]) (envs/dmc.run_episodes, as evaluation
steps them). The table gives each policy's mean return, the share of episodes above 100 (the ball in the cup or the
peg held, hovered over or slotted for a while), and the paired gap expert − random with a 95% bootstrap interval over
episodes.

Output: `--out` (JSON: every episode's return) and the table beside it (`.md`), both written atomically.
"""

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from analysis import stats  # noqa: E402
from oilca import cli, contract  # noqa: E402

TASKS = ("manipulator-insert_ball", "manipulator-insert_peg")


@dataclass
class Args:
    out: str
    """JSON record to write (the markdown table goes beside it, .md)"""
    task: str = "manipulator-insert_ball"
    """the scripted task: manipulator-insert_ball or manipulator-insert_peg"""
    seeds: Tuple[int, ...] = (10000,)
    """evaluation streams (10000: evaluate.py's; keep them apart from data seeds and the tuning seeds, 2000-2029 for
    insert_ball and 2000-2059 for insert_peg)"""
    episodes: int = 30
    """episodes per stream, setting and policy"""
    settings: Tuple[str, ...] = field(default_factory=lambda: ("perturbed", "clean"))
    """`perturbed` (the dataset's classes of c) and/or `clean`"""


def run(args: Args) -> dict:
    from envs import dmc

    table = dmc.noise_table(5, 3, 0, 0.2, 0.05, 0.4)  # DMCConfig's defaults: the table of every manipulator dataset
    zero = {"mean": np.zeros((1, 5)).tolist(), "std": np.zeros((1, 5)).tolist()}
    rows = []
    for seed in args.seeds:
        task_seeds = (seed * 1_000_003 + np.arange(args.episodes)) % 2**32
        for setting in args.settings:
            tab, classes = (table, np.arange(args.episodes) % 3) if setting == "perturbed" else \
                (zero, np.zeros(args.episodes, int))
            ret = {}
            for name, policy in (("scripted", dmc.scripted_expert(f"dmc:{args.task}")), ("random", None)):
                ret[name] = dmc.run_episodes(args.task, [policy], tab, classes, np.zeros(args.episodes, int), task_seeds,
                                             seed, 25, record=False)["returns"].tolist()
            rows.append({"seed": seed, "setting": setting, "returns": ret})
            print(f"stream {seed} {setting}: scripted {np.mean(ret['scripted']):.1f}, random "
                  f"{np.mean(ret['random']):.1f}", flush=True)
    m = contract.machine()
    return {"task": f"dmc:{args.task}", "episodes": args.episodes, "machine": m, "rows": rows, "args": vars(args),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": " ".join(["scripts/scripted_expert.py", *map(shlex.quote, sys.argv[1:])]),
            "machine_text": f"{m['cpu']}, {m['cores']} cores, mujoco {m['versions'].get('mujoco')}"}


def markdown(rec: dict) -> str:
    lines = [f"recorded output, {rec['date']}, {rec['machine_text']}; `{rec['command']}`", "",
             "| stream | setting | scripted: mean (s.e.) | share > 100 | random: mean (s.e.) | share > 100 | "
             "scripted − random, paired [95% CI] |", "|---|---|---|---|---|---|---|"]
    for row in rec["rows"]:
        e, r = (np.asarray(row["returns"][k]) for k in ("scripted", "random"))
        point, ci = stats.bootstrap([e - r])
        se = lambda x: x.std(ddof=1) / np.sqrt(len(x))  # noqa: E731
        lines.append(f"| {row['seed']} | {row['setting']} | {e.mean():.1f} ({se(e):.1f}) | {np.mean(e > 100):.2f} | "
                     f"{r.mean():.1f} ({se(r):.1f}) | {np.mean(r > 100):.2f} | {point:.1f}"
                     f"{stats.ci_text(ci, 1)} |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict:
    if args.task not in TASKS:
        raise ValueError(f"--task: no scripted expert for {args.task}: use one of {', '.join(TASKS)}")
    if args.episodes < 2:
        raise ValueError(f"--episodes must be at least 2, got {args.episodes}")
    bad = [s for s in args.settings if s not in ("perturbed", "clean")]
    if bad:
        raise ValueError(f"--settings: unknown {bad}: use perturbed and/or clean")
    if not args.out.endswith(".json"):
        raise ValueError(f"--out must name a .json file, got {args.out}")
    rec = run(args)
    md = markdown(rec)
    contract.save_json(args.out, rec)
    contract.save_text(args.out[:-5] + ".md", md)
    print(md)
    return rec


if __name__ == "__main__":
    cli.run(main, Args)
