"""Statistics for comparing RL runs across tasks and seeds, after Agarwal et al. (2021), "Deep RL at the
Edge of the Statistical Precipice": aggregate scores (IQM, median, mean, optimality gap) and the probability
of improvement, each with a stratified-bootstrap confidence interval; plus a test of "no difference" that
holds its false-alarm rate when the two groups differ in spread or seed count (Brunner–Munzel's statistic,
judged by permutation, by its t approximation and by a floor for small groups), Holm's correction for several tests, and what a set of seed counts can detect.

Scores come as one array per task (env), one value per run (seed); tasks may have different numbers
of runs. "Stratified" means every resample draws runs within each task, never across tasks. Leading axes
of a task's array (bootstrap or permutation draws) are carried through every function that says so.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Scores = Sequence[np.ndarray]  # one array of run scores per task; the last axis holds the runs
Aggregate = Callable[[Scores], np.ndarray]


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float  # confidence interval; NaN when undefined (a task with a single run)
    high: float

    @property
    def defined(self) -> bool:
        return not np.isnan(self.low)


# ---------------------------------------------------------------- aggregate scores


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the values left after dropping the lowest and highest quarter.

    As scipy.stats.trim_mean(values, 0.25) and rliable: int(n / 4) values are cut from each end.
    """
    values = np.sort(values, axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def weighted_iqm(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The mean of the middle half of a weighted sample: values (..., n), weights (n,) summing to 1.

    Sorted, each value covers a slice of [0, 1] as long as its weight; it counts by the part of its slice
    inside [0.25, 0.75], so a value straddling a quartile counts in part.
    """
    order = np.argsort(values, axis=-1)
    sorted_values = np.take_along_axis(values, order, axis=-1)
    sorted_weights = np.asarray(weights)[order]
    ends = np.cumsum(sorted_weights, axis=-1)
    starts = ends - sorted_weights
    inside = np.clip(np.minimum(ends, 0.75) - np.maximum(starts, 0.25), 0.0, None)
    return (inside * sorted_values).sum(axis=-1) / 0.5


def _equal_counts(scores: Scores) -> bool:
    return len({np.shape(s)[-1] for s in scores}) == 1


def aggregate_iqm(scores: Scores) -> np.ndarray:
    """IQM over every run of every task, each task weighing the same.

    With the same number of runs per task this is rliable's IQM (the flat trimmed mean); with different
    numbers each run weighs 1 / (tasks × its task's runs), so a task with more seeds does not count more.
    """
    pooled = np.concatenate([np.asarray(s, dtype=float) for s in scores], axis=-1)
    if _equal_counts(scores):
        return iqm(pooled)
    weights = np.concatenate([np.full(np.shape(s)[-1], 1.0 / (len(scores) * np.shape(s)[-1])) for s in scores])
    return weighted_iqm(pooled, weights)


def _task_means(scores: Scores) -> np.ndarray:
    return np.stack([np.asarray(s, dtype=float).mean(axis=-1) for s in scores], axis=-1)


def aggregate_mean(scores: Scores) -> np.ndarray:
    """Mean over tasks of each task's mean run score (with equal seed counts: the mean of every run)."""
    return _task_means(scores).mean(axis=-1)


def aggregate_median(scores: Scores) -> np.ndarray:
    """Median over tasks of each task's mean run score, as rliable computes it."""
    return np.median(_task_means(scores), axis=-1)


def optimality_gap(scores: Scores, gamma: float = 1.0) -> np.ndarray:
    """How far runs fall short of `gamma` on average: gamma minus the mean of min(score, gamma); lower is better."""
    return gamma - aggregate_mean([np.minimum(np.asarray(s, dtype=float), gamma) for s in scores])


AGGREGATES: dict[str, Aggregate] = {
    "median": aggregate_median,
    "IQM": aggregate_iqm,
    "mean": aggregate_mean,
    "optimality gap": optimality_gap,
}


def normalize(scores: Scores, low: Sequence[float], high: Sequence[float]) -> list[np.ndarray]:
    """Each task's scores mapped so that `low` becomes 0 and `high` becomes 1."""
    return [(np.asarray(s, dtype=float) - lo) / (hi - lo) for s, lo, hi in zip(scores, low, high)]


# ---------------------------------------------------------------- the stratified bootstrap


def resample(rng: np.random.Generator, scores: np.ndarray, reps: int) -> np.ndarray:
    """`reps` bootstrap draws of one task's runs, shape (reps, runs)."""
    scores = np.asarray(scores, dtype=float)
    return scores[rng.integers(0, len(scores), size=(reps, len(scores)))]


def percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def single_run(*groups: Scores) -> bool:
    """Whether some task has one run in some group: a bootstrap cannot see that task's spread."""
    return any(np.shape(s)[-1] < 2 for scores in groups for s in scores)


def aggregate_estimate(metric: Aggregate, scores: Scores, reps: int, confidence: float, rng: np.random.Generator) -> Estimate:
    """`metric` of the scores, with a percentile interval from a stratified bootstrap of the runs."""
    value = float(metric(scores))
    if single_run(scores):
        return Estimate(value, np.nan, np.nan)
    draws = metric([resample(rng, s, reps) for s in scores])
    return Estimate(value, *percentile_interval(draws, confidence))


def iqm_estimate(scores: Scores, reps: int, confidence: float, rng: np.random.Generator) -> Estimate:
    return aggregate_estimate(aggregate_iqm, scores, reps, confidence, rng)


# ---------------------------------------------------------------- probability of improvement


def comparisons(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1 where x's run beats y's, 0.5 for a tie, 0 otherwise: shape (..., runs of x, runs of y)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return (x[..., :, None] > y[..., None, :]) + 0.5 * (x[..., :, None] == y[..., None, :])


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) for one task: the share of (x, y) run pairs where x scores higher, ties counting half."""
    return comparisons(x, y).mean(axis=(-2, -1))


def average_improvement(x: Scores, y: Scores) -> float:
    return float(np.mean([probability_of_improvement(a, b) for a, b in zip(x, y)]))


def improvement_estimate(x: Scores, y: Scores, reps: int, confidence: float, rng: np.random.Generator) -> Estimate:
    """Average over tasks of P(X > Y), with a percentile interval from a bootstrap of X's and Y's runs per task."""
    value = average_improvement(x, y)
    if single_run(x, y):
        return Estimate(value, np.nan, np.nan)
    draws = np.mean([probability_of_improvement(resample(rng, a, reps), resample(rng, b, reps)) for a, b in zip(x, y)], axis=0)
    return Estimate(value, *percentile_interval(draws, confidence))


# ---------------------------------------------------------------- the test


@dataclass(frozen=True)
class Studentized:
    """The test's statistic and what its t approximation needs (arrays over any leading draw axes)."""

    statistic: np.ndarray  # (average P(X > Y) - 1/2) / its standard error
    df: np.ndarray  # Welch–Satterthwaite degrees of freedom of that standard error


def _floor(n_x: int, n_y: int) -> float:
    """Half the smallest value above 0 a task's variance estimate can take (placements step by 1 / (2 n))."""
    return 1.0 / (8.0 * n_x**2 * n_y**2)


@dataclass(frozen=True)
class _Task:
    """What the statistic needs of one task: P(X > Y), the two variance parts, and the groups' sizes."""

    improvement: np.ndarray
    x_part: np.ndarray  # var(x placements) / n_x
    y_part: np.ndarray  # var(y placements) / n_y
    n_x: int
    n_y: int


def _task(x: np.ndarray, y: np.ndarray) -> _Task:
    cmp = comparisons(x, y)
    n_x, n_y = cmp.shape[-2], cmp.shape[-1]
    x_placements, y_placements = cmp.mean(axis=-1), 1.0 - cmp.mean(axis=-2)
    return _Task(
        x_placements.mean(axis=-1),
        x_placements.var(axis=-1, ddof=1) / n_x,
        y_placements.var(axis=-1, ddof=1) / n_y,
        n_x,
        n_y,
    )


def _combine(tasks: list[_Task]) -> Studentized:
    parts = [part for t in tasks for part in (t.x_part, t.y_part)]
    dfs = [df for t in tasks for df in (t.n_x - 1, t.n_y - 1)]
    variance = np.maximum(np.sum(parts, axis=0), sum(_floor(t.n_x, t.n_y) for t in tasks))
    spread = sum(part**2 / df for part, df in zip(parts, dfs))
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(spread > 0, np.sum(parts, axis=0) ** 2 / spread, min(dfs))
    statistic = (np.mean([t.improvement for t in tasks], axis=0) - 0.5) / (np.sqrt(variance) / len(tasks))
    return Studentized(statistic, np.clip(df, min(dfs), sum(dfs)))


def studentize(x: Scores, y: Scores) -> Studentized:
    """The Brunner–Munzel statistic of the average P(X > Y) over tasks (each group needs 2+ runs per task).

    Each run's placement is the share of the other group's runs it beats (ties half); a task's P(X > Y)
    varies by var(x placements) / n_x + var(y placements) / n_y. The sum over tasks is floored at half the
    smallest value it can take above 0, so a complete separation (variance 0) stays the most extreme split,
    not a 0/0. The degrees of freedom combine the 2 × tasks variance parts (Welch–Satterthwaite), kept
    between the smallest part's (n - 1) and their sum.
    """
    return _combine([_task(a, b) for a, b in zip(x, y)])


def studentized_improvement(x: Scores, y: Scores) -> np.ndarray:
    """(average P(X > Y) - 1/2) divided by its estimated standard error: the test's statistic."""
    return studentize(x, y).statistic


def _shuffled_task(x: np.ndarray, y: np.ndarray, reps: int, rng: np.random.Generator) -> _Task:
    """A task's statistic parts for `reps` random relabellings of its pooled runs, shape (reps,) each.

    The pooled runs' comparisons are computed once; a relabelling only picks which of them are X's, so every
    placement is a matrix product with the label masks.
    """
    pooled = np.concatenate([x, y]).astype(float)
    n_x, n_y = len(x), len(y)
    beats = comparisons(pooled, pooled)  # beats[i, j]: run i against run j, ties half
    keys = rng.random((reps, len(pooled)))
    in_x = keys <= np.partition(keys, n_x - 1, axis=1)[:, n_x - 1 : n_x]  # n_x runs drawn without replacement
    to_y = (~in_x).astype(float) @ beats.T / n_y  # (reps, runs): each run's placement among the Y runs
    to_x = in_x.astype(float) @ beats.T / n_x

    def moments(mask: np.ndarray, placements: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        mean = (mask * placements).sum(axis=1) / n
        return mean, ((mask * placements**2).sum(axis=1) - n * mean**2) / (n - 1) / n

    improvement, x_part = moments(in_x, to_y, n_x)
    _, y_part = moments(~in_x, to_x, n_y)
    return _Task(improvement, np.maximum(x_part, 0.0), np.maximum(y_part, 0.0), n_x, n_y)


def permutation_p_value(x: Scores, y: Scores, reps: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of the studentized statistic by permutation.

    Each draw shuffles the X/Y labels of the runs within every task and recomputes the statistic; p counts
    the draws at least as far from 0 as the observed one (itself included, so p > 0). When X and Y are the
    same algorithm this is exact; studentizing keeps it near its level when they only tie on average but
    differ in spread or seed count (Neubert and Brunner, 2007), where the plain probability of improvement
    does not.
    """
    observed = abs(float(studentized_improvement(x, y)))
    drawn = np.abs(_combine([_shuffled_task(np.asarray(a), np.asarray(b), reps, rng) for a, b in zip(x, y)]).statistic)
    # A relative tolerance: a split as extreme as the observed one must count despite rounding.
    return float((1 + np.sum(drawn >= observed * (1 - 1e-9))) / (1 + reps))


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def student_t_p_value(statistic: float, df: float) -> float:
    """Two-sided p of Student's t with `df` (not necessarily whole) degrees of freedom."""
    return regularized_beta(df / 2.0, 0.5, df / (df + statistic**2))


def separation_floor(counts: Sequence[tuple[int, int]]) -> float:
    """How likely a complete separation can be with no difference on average: 2 ** (1 - sum of the smaller groups).

    "No difference on average" lets the groups differ in spread. If one group's runs spread far wider than
    the other's, each of its runs lands above or below all of the other's by a coin flip, so all of them do,
    on every task in one direction, with probability 2 × 2 ** -(its runs, summed over tasks). No p below
    that can be trusted, whatever the permutations say.
    """
    return 2.0 ** (1 - sum(min(pair) for pair in counts))


def improvement_p_value(x: Scores, y: Scores, reps: int, rng: np.random.Generator) -> float:
    """Two-sided p of "the average P(X > Y) is 1/2": the largest of the permutation p, the Brunner–Munzel t
    approximation's p and the separation floor, so it holds its level when any of them does.

    Measured (benchmark/results/rlops_calibration.md), 3 runs of spread 3 against 8 of spread 1 with the same
    median: the permutation alone says p <= 0.05 in 8.6% of comparisons on 3 envs and 15.7% on one; the t
    approximation brings the first to 3.3%, the floor the second to 0.
    """
    counts = [(len(a), len(b)) for a, b in zip(x, y)]
    studentized = studentize(x, y)
    t_p = student_t_p_value(float(studentized.statistic), float(studentized.df))
    return max(permutation_p_value(x, y, reps, rng), t_p, separation_floor(counts))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: reject where the adjusted p is at most alpha, and the chance of any false
    rejection among the tests stays at most alpha."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


# ---------------------------------------------------------------- what seed counts allow


def smallest_p(counts: Sequence[tuple[int, int]], reps: int) -> float:
    """The smallest p `improvement_p_value` can give with these (runs of X, runs of Y) per task.

    Every part is smallest at a complete separation in one direction on every task: the permutation p is
    then 2 splits in all (or 1 / (reps + 1)), the t approximation sees the floored variance with its fewest
    degrees of freedom. With a single run in a group the test has nothing to go on.
    """
    if any(min(pair) < 2 for pair in counts):
        return 1.0
    splits = math.prod(math.comb(n_x + n_y, n_x) for n_x, n_y in counts)
    std_error = math.sqrt(sum(_floor(n_x, n_y) for n_x, n_y in counts)) / len(counts)
    t_p = student_t_p_value(0.5 / std_error, min(min(pair) for pair in counts) - 1)
    return min(1.0, max(2.0 / splits, 1.0 / (1 + reps), t_p, separation_floor(counts)))


def reachable(smallest: Sequence[float], alpha: float) -> list[bool]:
    """Which tests of a Holm family could reject at all: those rejected when every p is its smallest.

    Holm's procedure only rejects more when p-values fall, so this is the best case of each test.
    """
    return [p <= alpha for p in holm(smallest)]


def least_seeds(tasks: int, alpha: float, tests: int = 1) -> int:
    """The fewest seeds per group (the same in every group and task) with which a test can reach alpha / tests."""
    seeds = 2
    while smallest_p([(seeds, seeds)] * tasks, reps=10**9) > alpha / tests:
        seeds += 1
    return seeds


@dataclass(frozen=True)
class Detectable:
    improvement: float  # the probability of improvement found with the given power
    shift: float  # the same, as a shift of a normal score in standard deviations of the seed-to-seed spread


def detectable_effect(
    counts: Sequence[tuple[int, int]], alpha: float, power: float = 0.8, tests: int = 1
) -> Detectable | None:
    """The smallest effect the test finds with probability `power`, by a normal approximation; None past reach.

    Under no difference a task's P(X > Y) estimate varies by (n_x + n_y + 1) / (12 n_x n_y) (continuous
    scores); the average over tasks must clear its two-sided alpha / tests threshold. For normal scores a
    shift of d standard deviations has P(X > Y) = Phi(d / sqrt(2)).
    """
    normal = NormalDist()
    variance = sum((n_x + n_y + 1) / (12 * n_x * n_y) for n_x, n_y in counts) / len(counts) ** 2
    margin = (normal.inv_cdf(1 - alpha / tests / 2) + normal.inv_cdf(power)) * math.sqrt(variance)
    if margin >= 0.5:
        return None
    return Detectable(0.5 + margin, math.sqrt(2) * normal.inv_cdf(0.5 + margin))
