"""stats.py on hand-computed inputs: the bootstrap of a mean and the stratified bootstrap (replayed draw by draw as the
module docstring states them), the IQM, P(X > Y) with ties as 1/2, paired gaps, the normalised score and the cell
text."""
import math

import numpy as np
import pytest
import scipy.stats

from analysis import stats


# ------------------------------------------------------------------------------------------------- bootstrap
def test_bootstrap_is_a_seeded_percentile_bootstrap_of_the_mean():
    mean, ci = stats.bootstrap([[1, 2, 3, 4, 5]])
    assert mean == 3.0 and stats.bootstrap([[1, 2, 3, 4, 5]]) == (mean, ci)  # the same inputs, the same numbers
    ref = scipy.stats.bootstrap(([1, 2, 3, 4, 5],), np.mean, n_resamples=10_000, method="percentile",
                                random_state=np.random.default_rng(1)).confidence_interval
    assert ci == pytest.approx((ref.low, ref.high), abs=0.1)  # scipy's percentile bootstrap, another stream
    half_t = scipy.stats.t.ppf(0.975, 4) * math.sqrt(2.5) / math.sqrt(5)
    assert ci[1] - ci[0] < 2 * half_t  # narrower than the t interval: the under-coverage the header warns about
    # two seeds: a resampled mean is x1, (x1 + x2)/2 or x2 with probabilities 1/4, 1/2, 1/4, so [lo, hi] = [x1, x2]
    assert stats.bootstrap([[2.0, 4.0]]) == (3.0, (2.0, 4.0))
    assert stats.bootstrap([[7.0]]) == (7.0, None)  # one seed: no interval


def test_bootstrap_draws_exactly_as_the_docstring_says():
    strata = [[0.0, 10.0, 4.0], [5.0, 7.0], [1.0]]
    rng = np.random.default_rng(0)  # a fresh generator, stratum by stratum, (B, n_k) indices each
    draws = [np.asarray(s)[rng.integers(0, len(s), size=(300, len(s)))] for s in strata]
    means = np.concatenate(draws, axis=1).mean(axis=1)
    expected = tuple(float(v) for v in np.percentile(means, [2.5, 97.5]))  # numpy's default: linear interpolation
    point, ci = stats.bootstrap(strata, n_resamples=300)
    assert point == np.mean(sum(strata, [])) and ci == pytest.approx(expected, abs=1e-12)  # 50·(1 − 0.95) ≈ 2.5
    # every call restarts the generator: the same strata sizes draw the same indices, so a scaled input scales the CI
    lo, hi = stats.bootstrap([[1.0, 2.0, 3.0]])[1]
    assert stats.bootstrap([[10.0, 20.0, 30.0]])[1] == pytest.approx((10 * lo, 10 * hi))


def test_stratified_bootstrap_resamples_inside_each_stratum():
    # stratum 1 {0, 10} resamples to a mean of 0, 5 or 10; stratum 2 is constant: the mean of all four values is
    # 2.5 (p = 1/4), 5 (1/2) or 7.5 (1/4), so the 95% interval is exactly [2.5, 7.5]
    assert stats.bootstrap([[0.0, 10.0], [5.0, 5.0]]) == (5.0, (2.5, 7.5))
    # pooled into one stratum, a resample can draw three 0s (p = 3.5%), and the interval reaches lower
    assert stats.bootstrap([[0.0, 10.0, 5.0, 5.0]])[1][0] < 2.5
    # constant strata never change: the IQM of 1, 1, 3, 3, 3 (one cut each side: 1, 3, 3) with no spread
    point, ci = stats.bootstrap([[1.0, 1.0], [3.0, 3.0, 3.0]], stats.iqm)
    assert point == pytest.approx(7 / 3) and ci == pytest.approx((7 / 3, 7 / 3))


def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm(np.array([[1, 2, 3, 4, 5, 6, 7, 8]]))[0] == 4.5  # mean of 3, 4, 5, 6
    assert stats.iqm(np.array([[0, 0, 1, 2, 3, 100, 100, 100]]))[0] == 26.5  # mean of 1, 2, 3, 100
    assert stats.iqm(np.array([[1, 2, 30]]))[0] == 11.0  # int(0.25 · 3) = 0 cut: the mean
    assert stats.iqm(np.array([[5, 1, 4, 2, 3]]))[0] == 3.0  # int(0.25 · 5) = 1 cut each side: mean of 2, 3, 4
    assert list(stats.mean(np.array([[1.0, 2.0], [3.0, 5.0]]))) == [1.5, 4.0]  # row by row


# ------------------------------------------------------------------------------------------------- P(X > Y)
def test_probability_of_improvement_counts_pairs_with_ties_as_half():
    assert stats.mann_whitney([1, 2, 3], [2, 2]) == 0.5  # 1<2 twice: 0; 2=2 twice: 1/2 each; 3>2 twice: 1 each
    assert stats.mann_whitney([3, 4], [1, 2]) == 1.0 and stats.mann_whitney([1], [1]) == 0.5
    assert stats.mann_whitney([-6.5, -5.5], [-7, -6, -4]) == 0.5  # 1 + 2 of 6 pairs
    p, ci = stats.probability_of_improvement([([1, 2, 3], [2, 2]), ([3, 4], [1, 2])])
    assert p == 0.75  # the mean over the two strata
    assert 0.5 <= ci[1] <= 1.0 and ci[0] >= 0.5  # stratum 2 is always 1: P >= (0 + 1) / 2
    assert stats.probability_of_improvement([([3, 4], [1, 2])]) == (1.0, (1.0, 1.0))
    assert stats.probability_of_improvement([([3.0], [1.0])]) == (1.0, None)  # one seed each: no interval


def test_mann_whitney_counts_scores_equal_up_to_float_noise_as_ties():
    # the toy rerun case: one score's last digits move (…369195 → …191) and must not flip a tie into a win
    a, b = -7.273565072369195, -7.273565072369191
    assert stats.mann_whitney([a], [b]) == 0.5 and stats.mann_whitney([b], [a]) == 0.5
    assert stats.mann_whitney([0.0], [1e-13]) == 0.5  # near zero the absolute tolerance decides
    assert stats.mann_whitney([1.0 + 1e-6], [1.0]) == 1.0  # a real difference, however small, still counts
    assert stats.mann_whitney([1e-6], [0.0]) == 1.0 and stats.mann_whitney([-5.0, 2.0], [2.0 + 1e-14]) == 0.25


def test_probability_of_improvement_resamples_x_then_y_in_every_stratum():
    pairs = [(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.5])), (np.array([0.0, 4.0]), np.array([1.0, 3.0, 5.0]))]
    rng = np.random.default_rng(0)
    per_stratum = []
    for x, y in pairs:  # X's indices, then Y's: independent draws
        xi, yi = rng.integers(0, len(x), size=(200, len(x))), rng.integers(0, len(y), size=(200, len(y)))
        a, b = x[xi][:, :, None], y[yi][:, None, :]
        per_stratum.append(((a > b) + 0.5 * (a == b)).mean(axis=(1, 2)))  # a tie counts 1/2
    expected = tuple(float(v) for v in np.percentile(np.mean(per_stratum, axis=0), [2.5, 97.5]))
    p, ci = stats.probability_of_improvement(pairs, n_resamples=200)
    assert p == pytest.approx((2.5 / 6 + 2 / 6) / 2)  # stratum 1: 2 wins and 1 tie of 6 pairs; stratum 2: 2 wins of 6
    assert ci == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------------------------------------- cells, gaps, scores
def test_cell_text_is_mean_sample_std_and_bootstrap_interval():
    c = stats.cell([1, 2, 3, 4, 5])
    assert c["std"] == pytest.approx(math.sqrt(2.5)) and c["n"] == 5  # ddof=1
    assert stats.cell_text(c) == f"3.00 ± 1.58 [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]"
    assert stats.cell_text(stats.cell([-8.0])) == "-8.00"  # one seed: the mean alone
    assert stats.cell_text(stats.cell([2.0, 4.0]), 1) == "3.0 ± 1.4 [2.0, 4.0]"
    assert stats.ci_text(None) == "" and stats.ci_text((0.125, 1.0), 1) == " [0.1, 1.0]"


def test_paired_gap_uses_the_seeds_both_have():
    gap = stats.paired_gap({0: 1.0, 1: 5.0, 2: 3.0}, {1: 2.0, 2: 1.0, 3: 9.0})  # seeds 1, 2: differences 3, 2
    assert list(gap) == ["seeds", "n", "mean", "std", "ci"]  # summary.json's key order
    assert gap["seeds"] == [1, 2] and (gap["n"], gap["mean"], gap["ci"]) == (2, 2.5, [2.0, 3.0])
    assert gap["std"] == pytest.approx(math.sqrt(0.5))
    assert stats.paired_gap({0: 1.0}, {1: 1.0}) is None


def test_normalised_score_is_100_at_the_expert_and_0_at_random():
    assert stats.normalise(-3.0, -3.0, -40.0) == 100.0 and stats.normalise(-40.0, -3.0, -40.0) == 0.0
    assert stats.normalise(-9.0, -3.0, -40.0) == pytest.approx(100 * 31 / 37)
    assert stats.normalise(0.0, -3.0, -40.0) > 100.0  # a method can beat the expert reference


def test_two_level_weighs_each_group_the_same_and_resamples_the_groups():
    c = stats.two_level([[0.0, 0.0, 0.0, 0.0], [10.0]], n_resamples=2000)
    assert c["mean"] == 5.0 and c["n_groups"] == 2 and c["n"] == 5  # the mean of the group means, not of the values
    assert c["ci"][0] == 0.0 and c["ci"][1] == 10.0  # a resample may draw the same group twice
    same = stats.two_level([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]], n_resamples=2000)
    assert same["std"] == 0.0 and same["ci"][0] >= 1.0 and same["ci"][1] <= 3.0 and same["ci"][0] < 2.0 < same["ci"][1]
    assert stats.two_level([[1.0, 2.0]])["ci"] is None and stats.two_level([[1.0, 2.0]])["std"] is None
    assert stats.two_level([[1.0], [2.0], [4.0]]) == stats.two_level([[1.0], [2.0], [4.0]])  # seeded: same text
