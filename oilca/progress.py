"""Progress you can watch while a long stage runs: a line at most every ~10 s, a CSV that grows as it goes, and
optionally TensorBoard event files.

    prog = Progress("dwbc", total=args.total_steps, out_dir=args.out_dir, tensorboard=args.tensorboard)
    for step in range(1, total + 1):
        ...
        prog.update(step, lambda: {"loss": loss.item()})  # cheap every step; the lambda runs only when a line is due
        if evaluation_step:
            prog.log({"step": step, "loss": loss.item(), "eval_return": ret})  # one row of progress.csv, flushed
    prog.close()

The line reads `[name] step 1200/5000 (24%)  812 steps/s  ETA 5s  loss 0.412`, printed when `every_s` seconds have
passed since the last one and always at the last step; the scalars are read only then, so a training loop on a
GPU syncs with the host at logging points alone. `progress.csv` is opened at the first row, appended and flushed
row by row (a killed run keeps what it logged); its header is the first row's keys. With `tensorboard=True` every
logged row (and every printed line's scalars) also goes to TensorBoard event files: the folder `tb_dir` (default:
`<out_dir>/tb`), read with `tensorboard --logdir <folder>`. One tag per scalar, as CleanRL names them: `train/<key>`
for a row's numbers and a line's scalars, `charts/<unit>_per_s` for the rate; each tag at most once per step (a line
printed at a step just logged repeats nothing). `hparams(...)` writes the run's arguments as a text table
(`hyperparameters`). `track` (a Weights & Biases run, see training/trainer.py's --track) gets the same numbers under
the same names.
"""

import csv
import os
import sys
import time
from typing import Callable, Dict, Optional, Union

Scalars = Union[Dict[str, float], Callable[[], Dict[str, float]], None]


def _fmt_seconds(s: float) -> str:
    if s < 100:
        return f"{s:.0f}s"
    if s < 6000:
        return f"{s / 60:.1f}min"
    return f"{s / 3600:.1f}h"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Progress:
    def __init__(self, name: str, total: int, out_dir: Optional[str] = None, every_s: float = 10.0,
                 tensorboard: bool = False, tb_dir: Optional[str] = None, csv_name: str = "progress.csv",
                 unit: str = "steps", start: int = 0, stream=None, track=None):
        self.name, self.total, self.every_s, self.unit = name, total, every_s, unit
        self.csv_path = os.path.join(out_dir, csv_name) if out_dir else None
        self.stream = stream or sys.stdout
        self.t0 = self.last_print = time.time()
        self.start = start  # steps already done before this process (a resumed run): the rate counts only ours
        self._csv_file = self._csv_writer = None
        self.writer, self.track, self._written = None, track, {}  # tag -> the last step it was written at
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package (requirements.txt)

            self.writer = SummaryWriter(tb_dir or os.path.join(out_dir or ".", "tb"))

    def rate(self, step: int) -> float:
        """Steps per second since this Progress started."""
        return (step - self.start) / max(time.time() - self.t0, 1e-9)

    def line(self, step: int, scalars: Dict[str, float]) -> str:
        rate = self.rate(step)
        eta = (self.total - step) / rate if rate > 0 else float("inf")
        text = " ".join(f"{k} {v:.4g}" for k, v in scalars.items())
        shown = f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}"  # 0.42 episodes/s, not 0
        return (f"[{self.name}] step {step}/{self.total} ({100 * step / max(self.total, 1):.0f}%)  {shown} "
                f"{self.unit}/s  ETA {_fmt_seconds(eta)}" + (f"  {text}" if text else ""))

    def update(self, step: int, scalars: Scalars = None, force: bool = False) -> bool:
        """Print a progress line if `every_s` seconds have passed (or at the last step, or with force); `scalars`
        may be a callable so that reading them (e.g. `loss.item()`) happens only when a line is printed."""
        now = time.time()
        if not (force or step >= self.total or now - self.last_print >= self.every_s):
            return False
        values = scalars() if callable(scalars) else dict(scalars or {})
        print(self.line(step, values), file=self.stream, flush=True)
        self.last_print = now
        numbers = {f"train/{k}": v for k, v in values.items() if _number(v)}
        numbers[f"charts/{self.unit.replace(' ', '_')}_per_s"] = self.rate(step)
        self._scalars(numbers, step)
        return True

    def _scalars(self, numbers: Dict[str, float], step: int) -> None:
        """Each tag at most once per step (the first value wins: a trainer logs its row, then prints its line)."""
        numbers = {k: v for k, v in numbers.items() if self._written.get(k) != step}
        self._written.update((k, step) for k in numbers)
        if self.writer is not None:
            for k, v in numbers.items():
                self.writer.add_scalar(k, v, step)
        if self.track is not None and numbers:
            self.track.log(numbers, step=step)

    def hparams(self, args: dict) -> None:
        """The run's arguments as TensorBoard text (a markdown table under `hyperparameters`, as CleanRL writes)."""
        if self.writer is not None:
            rows = "\n".join(f"|{k}|{v}|" for k, v in args.items())
            self.writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")

    def log(self, row: Dict[str, float]) -> None:
        """Append one row to progress.csv (flushed at once) and, with TensorBoard, its numbers at row['step']."""
        if self.csv_path:
            if self._csv_file is None:
                os.makedirs(os.path.dirname(os.path.abspath(self.csv_path)), exist_ok=True)
                self._csv_file = open(self.csv_path, "w", newline="")
                self._csv_writer = csv.DictWriter(self._csv_file, fieldnames=list(row))
                self._csv_writer.writeheader()
            self._csv_writer.writerow(row)
            self._csv_file.flush()
        step = int(row.get("step", row.get("round", 0)))
        self._scalars({f"train/{k}": v for k, v in row.items() if k not in ("step", "round") and _number(v)}, step)
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self._csv_file is not None:
            self._csv_file.close()
            self._csv_file = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
