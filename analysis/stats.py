"""The statistics of report.py's tables: pure functions over numbers (no files, no method names).

Each number starts from seed scores (report.py: one per training seed, the mean of that run's episode returns).
B = N_RESAMPLES = 10,000 resamples unless the caller passes another count (report.py's --resamples); level 95%.

- mean(a), iqm(a): per row of an (n, N) array. The IQM is rliable's interquartile mean,
  scipy.stats.trim_mean(row, 0.25): sort, cut int(0.25·N) values from each end, average the rest (N < 4 cuts
  nothing: the IQM is the mean).
- bootstrap(strata, stat): the point is `stat` of all values of all strata pooled. The interval is a percentile
  bootstrap: a fresh generator np.random.default_rng(BOOT_SEED = 0) per call draws, stratum by stratum in the given
  order, the indices rng.integers(0, n_k, size=(B, n_k)) (n_k values with replacement from stratum k); resample b
  pools the k draws of row b; lo and hi are numpy.percentile (its default, linear interpolation) of the B statistics at
  2.5 and 97.5. One stratum is the plain bootstrap over seeds; several are the stratified bootstrap (each task keeps
  its own number of seeds, so a task with many seeds cannot stand in for one with few). No interval when no stratum
  has two values. Because every call restarts the generator, an interval depends on its own inputs only (the same
  files give the same text), and two calls with the same strata sizes draw the same indices. With n = 2 values a
  resampled mean is x₁, (x₁ + x₂)/2 or x₂ (p = 1/4, 1/2, 1/4), so the interval is exactly [min, max].
- cell(values): n, the mean, the sample std s (ddof=1, divides by n − 1), and bootstrap([values], mean); one value:
  no s and no interval. Over 3–5 seeds the percentile bootstrap under-covers: it is about mean ± 1.96·σ̂/√n with σ̂
  the ddof=0 std, where the t interval t₀.₉₇₅,ₙ₋₁·s/√n is 1.58 times as wide at n = 5 and 2.69 times at n = 3.
- mann_whitney(x, y) = 1/(m·k) · Σᵢ Σⱼ [1(xᵢ > yⱼ) + ½·1(xᵢ = yⱼ)] over X's m and Y's k seed scores: the chance
  that a random seed of X beats a random seed of Y, a tie counting one half. Two scores tie when they are equal up to
  float noise, |x − y| ≤ TIE_RTOL·max(|x|, |y|) + TIE_ATOL (1e-9, 1e-12): a rerun on another machine or thread
  count moves the last digits of a score, and exact equality would flip such a pair from ½ to 0 or 1.
- probability_of_improvement(pairs) (rliable): one (x, y) per stratum (task, split); the point is the mean over
  strata of mann_whitney(x, y). The interval: a fresh default_rng(BOOT_SEED) draws, stratum by stratum, X's indices
  (B, m) and then Y's (B, k), so X's and Y's seeds are resampled independently (rliable's
  StratifiedIndependentBootstrap); each resample's statistic is the mean over strata; percentiles as above. No
  interval when every stratum has fewer than two seeds on both sides.
- paired_gap(x, y): the keys (training seeds) both have, sorted, and the cell of the differences x[s] − y[s].
- two_level(groups): the cell of values that come in groups (the training seeds of several data draws). The point is
  the mean of the group means (each draw weighs the same); the interval is a two-level percentile bootstrap: a fresh
  default_rng(BOOT_SEED) draws G groups with replacement, then, inside each drawn group, its values with replacement;
  a resample's statistic is the mean of its group means. It counts the spread between draws, which the stratified
  bootstrap (one stratum per draw) does not; with 3 draws it is coarse and under-covers. No interval with one group.
- normalise(x, r_expert, r_random) = 100·(x − r_random)/(r_expert − r_random): 100 at the expert reference, 0 at
  the random one (report.py: the means of the reference runs' seed scores of the same env and split).
- cell_text(c) = `mean ± s [lo, hi]` with `digits` decimals (one value: `mean`); ci_text(ci) = ` [lo, hi]`.
- ranks(values): 1 for the highest value; equal values share the best rank of their group (1, 2, 2, 4).
- kendall_tau(x, y): Kendall's τ-b of paired values, (P − Q)/√((P + Q + Tₓ)(P + Q + T_y)) over all pairs i < j, P
  the concordant pairs, Q the discordant ones, Tₓ the pairs tied in x only, T_y in y only: 1 for the same order, −1
  for the reverse. None with fewer than two pairs or when either side is constant.
- interval_order(a, b): `above` when interval a lies wholly above b (a_lo > b_hi), `below` when wholly below
  (a_hi < b_lo), else `tie` (the intervals overlap or touch).
"""

import numpy as np

CI_LEVEL = 0.95
N_RESAMPLES = 10_000  # bootstrap resamples per interval
BOOT_SEED = 0  # every interval draws from np.random.default_rng(BOOT_SEED): the same inputs give the same text
IQM_CUT = 0.25  # the IQM trims this fraction from each end (rliable)


def mean(a: np.ndarray) -> np.ndarray:
    """Mean of each row of a 2-D array."""
    return a.mean(axis=1)


def iqm(a: np.ndarray) -> np.ndarray:
    """Interquartile mean of each row of a 2-D array (rliable: scipy.stats.trim_mean, IQM_CUT cut from each end)."""
    from scipy.stats import trim_mean

    return trim_mean(a, IQM_CUT, axis=1)


def bootstrap(strata, stat=mean, n_resamples: int = N_RESAMPLES, level: float = CI_LEVEL):
    """(point, (lo, hi) or None): `stat` of all values of `strata` (a list of 1-D value lists, one per stratum) and
    its percentile-bootstrap interval. A resample draws len(s) values with replacement inside every stratum s and
    joins them (stratified bootstrap; one stratum: the plain bootstrap over seeds). `stat` maps an (n, N) array to its
    n row statistics. No interval when no stratum has two values."""
    strata = [np.asarray(s, dtype=np.float64) for s in strata]
    point = float(stat(np.concatenate(strata)[None, :])[0])
    if all(len(s) < 2 for s in strata):
        return point, None
    rng = np.random.default_rng(BOOT_SEED)
    sample = np.concatenate([s[rng.integers(0, len(s), size=(n_resamples, len(s)))] for s in strata], axis=1)
    lo, hi = np.percentile(stat(sample), [50 * (1 - level), 50 * (1 + level)])
    return point, (float(lo), float(hi))


def cell(values, n_resamples: int = N_RESAMPLES) -> dict:
    """{n, mean, std (ddof=1; None for one value), ci ([lo, hi] percentile bootstrap of the mean; None for one)}"""
    v = np.asarray(values, dtype=np.float64)
    point, ci = bootstrap([v], mean, n_resamples)
    return {"n": len(v), "mean": point, "std": float(v.std(ddof=1)) if len(v) > 1 else None,
            "ci": list(ci) if ci else None}


TIE_RTOL, TIE_ATOL = 1e-9, 1e-12  # scores this close are equal for mann_whitney (float noise, not a difference)


def mann_whitney(x, y) -> np.ndarray:
    """P(X > Y) + ½ P(X = Y) over all pairs of the last axes: x (..., nx), y (..., ny) → (...); X = Y up to float
    noise (TIE_RTOL, TIE_ATOL)."""
    x, y = np.asarray(x, dtype=np.float64)[..., :, None], np.asarray(y, dtype=np.float64)[..., None, :]
    tie = np.abs(x - y) <= TIE_RTOL * np.maximum(np.abs(x), np.abs(y)) + TIE_ATOL
    return ((x > y) & ~tie).mean(axis=(-2, -1)) + 0.5 * tie.mean(axis=(-2, -1))


def probability_of_improvement(pairs, n_resamples: int = N_RESAMPLES, level: float = CI_LEVEL):
    """(P(X > Y), (lo, hi) or None) over strata (rliable): `pairs` holds one (x, y) of seed scores per (task, split)
    both methods have; P is the mean over strata of mann_whitney(x, y). The interval is a stratified bootstrap that
    resamples x and y independently inside each stratum."""
    pairs = [(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for x, y in pairs]
    point = float(np.mean([mann_whitney(x, y) for x, y in pairs]))
    if all(len(x) < 2 and len(y) < 2 for x, y in pairs):
        return point, None
    rng = np.random.default_rng(BOOT_SEED)
    per_stratum = []
    for x, y in pairs:
        xi = rng.integers(0, len(x), size=(n_resamples, len(x)))
        yi = rng.integers(0, len(y), size=(n_resamples, len(y)))
        per_stratum.append(mann_whitney(x[xi], y[yi]))
    lo, hi = np.percentile(np.mean(per_stratum, axis=0), [50 * (1 - level), 50 * (1 + level)])
    return point, (float(lo), float(hi))


def paired_gap(x: dict, y: dict, n_resamples: int = N_RESAMPLES):
    """{seeds, **cell of x[s] − y[s]} over the seeds (keys) both {seed: score} dicts have; None if they share none."""
    shared = sorted(set(x) & set(y))
    if not shared:
        return None
    return {"seeds": shared, **cell([x[s] - y[s] for s in shared], n_resamples)}


def two_level(groups, n_resamples: int = N_RESAMPLES, level: float = CI_LEVEL) -> dict:
    """{n_groups, n, mean, std, ci} of values in groups (e.g. seeds within data draws): mean = the mean of the group
    means, std = the sample std (ddof=1) of the group means (None for one group), ci = the two-level percentile
    bootstrap (groups with replacement, then values within each drawn group); None with one group."""
    groups = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    means = np.array([g.mean() for g in groups])
    out = {"n_groups": len(groups), "n": int(sum(len(g) for g in groups)), "mean": float(means.mean()),
           "std": float(means.std(ddof=1)) if len(groups) > 1 else None, "ci": None}
    if len(groups) > 1:
        rng = np.random.default_rng(BOOT_SEED)
        G = len(groups)
        pick = rng.integers(0, G, size=(n_resamples, G))  # resample b's j-th group
        # inner[j, g, b]: the mean of an own resample of group g's values, for slot j of resample b (a group drawn
        # twice in one resample gets two independent inner resamples)
        inner = np.stack([np.stack([g[rng.integers(0, len(g), size=(n_resamples, len(g)))].mean(axis=1)
                                    for g in groups]) for _ in range(G)])
        stat = inner[np.arange(G)[None, :], pick, np.arange(n_resamples)[:, None]].mean(axis=1)
        lo, hi = np.percentile(stat, [50 * (1 - level), 50 * (1 + level)])
        out["ci"] = [float(lo), float(hi)]
    return out


def normalise(x: float, r_expert: float, r_random: float) -> float:
    """100·(x − r_random)/(r_expert − r_random): 100 at the expert reference, 0 at the random one."""
    return float(100.0 * (x - r_random) / (r_expert - r_random))


def ci_text(ci, digits: int = 2) -> str:
    """' [lo, hi]', or '' without an interval."""
    return f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else ""


def cell_text(c: dict, digits: int = 2) -> str:
    """'mean ± s [lo, hi]'; one value: 'mean'."""
    return f"{c['mean']:.{digits}f}" + (f" ± {c['std']:.{digits}f}" if c["std"] is not None else "") \
        + ci_text(c["ci"], digits)


def ranks(values: dict) -> dict:
    """{key: rank} of {key: value}: 1 for the highest value; equal values share the best rank of their group."""
    return {k: 1 + sum(w > v for w in values.values()) for k, v in values.items()}


def kendall_tau(x, y):
    """Kendall's τ-b of the pairs (x[i], y[i]) (1: the same order, −1: the reverse); None with fewer than two pairs or
    when x or y is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(len(x), k=1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    untied_x, untied_y = np.sum(dx != 0), np.sum(dy != 0)
    if untied_x == 0 or untied_y == 0:
        return None
    return float(np.sum(dx * dy) / np.sqrt(untied_x * untied_y))


def interval_order(a, b) -> str:
    """`above` when interval a = (lo, hi) lies wholly above b, `below` when wholly below, else `tie` (they overlap or
    touch)."""
    if a[0] > b[1]:
        return "above"
    if a[1] < b[0]:
        return "below"
    return "tie"
