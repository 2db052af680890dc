"""Checks of a stage's arguments and of its training losses, shared so every CLI refuses the same way.

A stage calls them at the top of `main`, before it reads or writes anything; each problem is a one-line ValueError
that names the flag, which the stage's `__main__` prints as `error: …` (exit status 1):

    checks.trainer(args, eta=checks.OPEN_UNIT)     # every field a trainer shares, plus the stage's own rules
    checks.fields(args, ratio=checks.Real(0, 100), sampler_steps=checks.COUNT)

`trainer` knows the fields the trainers share (steps, batch size, widths, evaluation counts, seeds, threads, act_eps,
every `*lr` and `*weight_decay`) and checks those the Args has; rules given by name add to or replace them.
Learning rates and weight decays must also fit float32 (RATE, DECAY: at most F32_MAX ≈ 3.4e38): a larger Python float
is finite, but torch's float32 optimisers overflow on it with a traceback.
A value of None is never checked: it means "the documented default". Tuples (`--seeds`) are checked element-wise.

`finite_losses(row, step, label)` stops a run whose logged losses are no longer finite; trainers call it where they
read the losses anyway (their logging and evaluation points), so it adds no host synchronisation.
"""

import math
from dataclasses import dataclass
from typing import Optional

SEED_MAX = 2**31 - 1  # seeds also feed dm_control's RandomState (below 2**32) after small offsets
F32_MAX = 3.4028234663852886e38  # float32's largest finite value: a larger rate or decay overflows float32 tensors


@dataclass(frozen=True)
class Int:
    low: int = 1
    high: Optional[int] = None

    def problem(self, v) -> Optional[str]:
        if isinstance(v, bool) or not isinstance(v, int):
            return "must be an integer"
        if v < self.low or (self.high is not None and v > self.high):
            return f"must be an integer >= {self.low}" + (f" and <= {self.high}" if self.high is not None else "")
        return None


@dataclass(frozen=True)
class Real:
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False

    def problem(self, v) -> Optional[str]:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return "must be a finite number"
        lo_bad = self.low is not None and (v <= self.low if self.low_open else v < self.low)
        hi_bad = self.high is not None and (v >= self.high if self.high_open else v > self.high)
        if lo_bad or hi_bad:
            parts = ([(">" if self.low_open else ">=") + f" {self.low:g}"] if self.low is not None else []) + \
                    ([("<" if self.high_open else "<=") + f" {self.high:g}"] if self.high is not None else [])
            return "must be a number " + " and ".join(parts)
        return None


@dataclass(frozen=True)
class Text:
    def problem(self, v) -> Optional[str]:
        if not isinstance(v, str) or not v.strip() or any(c in v for c in "/\n"):
            return "must be a non-empty label without '/' or line breaks"
        return None


COUNT = Int(1)  # how many: steps, episodes, widths, threads
COUNT0 = Int(0)  # how many, where 0 means "off" (e.g. --eval-every 0: only at the end)
SEED = Int(0, SEED_MAX)
POSITIVE = Real(0, low_open=True)  # variances, step sizes, slopes, box half-widths (learning rates: RATE)
NON_NEGATIVE = Real(0)  # noise levels and scales, loss and penalty weights, τ, GPU shares (weight decays: DECAY)
RATE = Real(0, F32_MAX, low_open=True)  # learning rates and other coefficients that meet float32 tensors
DECAY = Real(0, F32_MAX)  # weight decays and penalties that meet float32 tensors
UNIT = Real(0, 1)  # probabilities and fractions
OPEN_UNIT = Real(0, 1, low_open=True, high_open=True)  # a class prior η, a discount
LABEL = Text()

TRAINER = dict(seed=SEED, seeds=SEED, eval_seed=SEED, total_steps=COUNT, batch_size=COUNT, hidden=COUNT, n_hidden=COUNT0,
               eval_every=COUNT0, eval_episodes=COUNT0, final_eval_episodes=COUNT, threads=COUNT, loss_trace=COUNT0,
               act_eps=OPEN_UNIT, method=LABEL)


def flag(prefix: str, name: str) -> str:
    """How the user wrote the field: `--total-steps`, `--toy.env.episode-len`; other prefixes keep the name."""
    return prefix + name.replace("_", "-") if prefix.startswith("--") else prefix + name


def fields(obj, prefix: str = "--", **rules) -> None:
    """Check `obj`'s fields by name with the given rules; one-line ValueError naming the first bad flag."""
    for name, rule in rules.items():
        if not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        for v in (value if isinstance(value, (tuple, list)) else (value,)):
            problem = None if v is None else rule.problem(v)
            if problem:
                raise ValueError(f"{flag(prefix, name)} {problem}, got {v!r}")


def trainer(args, **rules) -> None:
    """The rules every trainer shares (TRAINER; any `lr`/`*_lr` a RATE, `weight_decay`/`*_weight_decay` a DECAY), for
    the fields `args` has, then the stage's own `rules` (which may override them)."""
    names = vars(args) if hasattr(args, "__dict__") else {}
    auto = {n: RATE for n in names if n == "lr" or n.endswith("_lr")}
    auto.update({n: DECAY for n in names if n == "weight_decay" or n.endswith("_weight_decay")})
    fields(args, **{**TRAINER, **auto, **rules})


def finite_losses(row: dict, step: int, label: str, skip=("eval_return",)) -> None:
    """Stop training when a logged value (a loss, a mean output) is NaN or inf: one-line ValueError naming the
    stage and the step. `eval_return` is skipped: it is NaN by design with --eval-episodes 0."""
    for key, v in row.items():
        if key not in skip and isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{label}: {key} became {v} at step {step}: training diverged, stopped and nothing saved "
                             f"(check the data and the learning rates)")
