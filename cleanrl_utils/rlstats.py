"""Statistics for comparing RL runs across tasks and seeds, after Agarwal et al. (2021), "Deep RL at the
Edge of the Statistical Precipice": aggregate scores (IQM, median, mean, optimality gap) and the probability
of improvement (PoI), each with a stratified-bootstrap confidence interval; the test RLops gates on, whose
false-alarm rate is bounded for any score distributions with a mean PoI of 1/2 at any run count, whatever a seed's
runs share (a matched-pairs bound over independent seeds after Hoeffding, 1963); Holm's correction for several tests; and what a set of seed counts can detect.
Brunner–Munzel's studentized statistic, with its permutation and t p-values, is kept for checks that compare
two samples of one evaluation and as the calibration study's reference; it is not the gate's test.

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


# ---------------------------------------------------------------- the test RLops uses


TOLERANCE = 1e-12  # a distance this close above an atom of the bound counts as that atom


@dataclass(frozen=True)
class NullBound:
    """A variable at least as spread as the mean PoI's distance from 1/2 when the mean PoI is 1/2.

    |D|, where D is a mixture of B / m - 1/2 with B ~ Binomial(m, 1/2) (the PoI of m disjoint (x, y) pairs, each a
    fair coin) over one or more pair counts m. Stored as the distinct values of |D| (ascending), their
    probabilities, and E(|D| - value)+ at each.
    """

    atoms: np.ndarray
    probabilities: np.ndarray
    stop_loss: np.ndarray

    def p_value(self, distance: np.ndarray | float) -> np.ndarray:
        """The bound on P(|mean PoI - 1/2| >= distance) with no difference, for any array of distances.

        By Markov's inequality on the convex function (|u| - c)+, P(|U| >= t) <= E(|D| - c)+ / (t - c) for every
        c < t; the best c is an atom of |D| (between atoms the ratio is monotone), and 1 caps it.
        """
        distance = np.asarray(distance, dtype=float)[..., None]
        below = self.atoms < distance - TOLERANCE
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(below, self.stop_loss / (distance - self.atoms), np.inf)
        return np.minimum(1.0, ratios.min(axis=-1))


def mixture_bound(parts: Sequence[tuple[float, int]]) -> NullBound:
    """The bound for a statistic that is a weighted average of parts, each no more spread than the mean of m fair
    coins: `parts` lists (weight, m), weights summing to 1. By Jensen, E f(average) <= the weighted sum of E f(part)
    for every convex f, so the mixture of the parts' coin-flip laws bounds every stop-loss value."""
    from fractions import Fraction

    mass: dict[Fraction, float] = {}
    for weight, pairs in parts:
        for wins in range(pairs + 1):
            atom = Fraction(abs(2 * wins - pairs), 2 * pairs)
            mass[atom] = mass.get(atom, 0.0) + weight * math.comb(pairs, wins) / 2.0**pairs
    ordered = sorted(mass)
    atoms = np.array([float(a) for a in ordered])
    probabilities = np.array([mass[a] for a in ordered])
    at_or_above = np.cumsum(probabilities[::-1])[::-1]
    # E(|D| - a_j)+ = sum over i > j of (a_i - a_{i-1}) P(|D| >= a_i): positive terms, no cancellation
    gains = np.diff(atoms) * at_or_above[1:]
    stop_loss = np.append(np.cumsum(gains[::-1])[::-1], 0.0)
    return NullBound(atoms, probabilities, stop_loss)


def null_bound(pairs: int) -> NullBound:
    """The bound for `pairs` matched pairs: |B / pairs - 1/2|, B ~ Binomial(pairs, 1/2), and its stop-loss values."""
    return mixture_bound([(1.0, pairs)])


def seed_parts(n_x: int, n_y: int, shared: int = 0) -> list[tuple[float, int]]:
    """(weight, matched pairs) of each part of the test's statistic when the tag has `n_x` seeds, the baseline `n_y`,
    and `shared` of the seed numbers are run by both.

    A seed is the unit: its runs (on every env, in both groups) may share luck, runs of different seeds are
    independent. The statistic compares every tag run with every baseline run of another seed; those (x, y) pairs
    fall in up to four kinds, by whether each seed is shared. Within a kind the average is a U-statistic whose
    kernel reads two different seeds: Hoeffding (1963, section 5) writes it as an average over matchings of
    disjoint pairs of seeds, as many as the kind allows: shared against shared, half the shared seeds (a seed can
    be in one pair only, on one side); otherwise the smaller side. The weights are the kinds' shares of all pairs.
    """
    own_x, own_y = n_x - shared, n_y - shared
    kinds = [
        (shared * (shared - 1), shared // 2),
        (shared * own_y, min(shared, own_y)),
        (own_x * shared, min(own_x, shared)),
        (own_x * own_y, min(own_x, own_y)),
    ]
    total = sum(count for count, _ in kinds)
    return [(count / total, pairs) for count, pairs in kinds if count > 0]


def seed_bound(n_x: int, n_y: int, shared: int = 0) -> NullBound | None:
    """The bound for these seed counts; None when no pair of runs of different seeds exists (nothing to test)."""
    parts = seed_parts(n_x, n_y, shared)
    return mixture_bound(parts) if parts else None


@dataclass(frozen=True)
class ImprovementTest:
    """The test of one tag against the baseline, over one or more envs."""

    improvement: float  # the mean over envs of P(X > Y) over runs of different seeds (the statistic tested)
    p_value: float
    smallest_p: float  # the p of a complete separation: the best these seeds allow
    n_x: int  # the tag's seeds run on every env tested (the runs the test uses)
    n_y: int
    shared: int  # of those, the seed numbers both groups ran


def positions(scores: Scores) -> list[list[int]]:
    """Seed labels when none are given: run i of each group on each env is seed i (the runner's numbering)."""
    return [list(range(np.shape(s)[-1])) for s in scores]


def improvement_test(x: Scores, y: Scores, x_seeds: Sequence[Sequence] | None = None, y_seeds=None) -> ImprovementTest:
    """Two-sided test of "the mean PoI over envs is 1/2", whatever the score distributions, ties, seed counts, and
    whatever a seed's runs share (its luck on every env; the tag's and the baseline's runs of one seed number).

    `x_seeds[k][i]` labels the i-th run of x on env k (default: its position, so run i of x and run i of y are
    one seed). Runs of a seed missing on some env are left out (the seed is the unit across envs). The statistic is
    the mean over envs of the share of (x, y) run pairs of different seeds that x wins (ties half). Written per seed
    (each seed's comparisons averaged over envs first), it is an average of U-statistics over independent seeds,
    no more spread in the convex order than the mixture `seed_parts` gives (an average of m independent values in
    [0, 1] is no more spread than m fair coins with the same mean: Hoeffding, 1956 and 1963). `NullBound.p_value`
    turns that into a tail bound. Exact arithmetic on the runs, no random draws.
    """
    x_seeds = positions(x) if x_seeds is None else x_seeds
    y_seeds = positions(y) if y_seeds is None else y_seeds
    for labels in [*x_seeds, *y_seeds]:
        if len(set(labels)) != len(labels):
            raise ValueError(f"a group has a seed twice on one env: {list(labels)}")
    kept_x = set.intersection(*(set(labels) for labels in x_seeds))
    kept_y = set.intersection(*(set(labels) for labels in y_seeds))
    shared = len(kept_x & kept_y)
    bound = seed_bound(len(kept_x), len(kept_y), shared)
    if bound is None:
        return ImprovementTest(0.5, 1.0, 1.0, len(kept_x), len(kept_y), shared)
    shares = []
    for a, b, a_seeds, b_seeds in zip(x, y, x_seeds, y_seeds):
        keep_a = np.array([s in kept_x for s in a_seeds], dtype=bool)
        keep_b = np.array([s in kept_y for s in b_seeds], dtype=bool)
        labels_a = [s for s in a_seeds if s in kept_x]
        labels_b = [s for s in b_seeds if s in kept_y]
        other = np.array([[sa != sb for sb in labels_b] for sa in labels_a], dtype=bool)
        shares.append(comparisons(np.asarray(a, dtype=float)[keep_a], np.asarray(b, dtype=float)[keep_b])[other].mean())
    improvement = float(np.mean(shares))
    p = float(bound.p_value(abs(improvement - 0.5)))
    return ImprovementTest(improvement, p, float(bound.p_value(0.5)), len(kept_x), len(kept_y), shared)


def improvement_p_value(x: Scores, y: Scores, x_seeds: Sequence[Sequence] | None = None, y_seeds=None) -> float:
    """The p of `improvement_test`: by default run i of x and run i of y are taken as one seed (they may share luck)."""
    return improvement_test(x, y, x_seeds, y_seeds).p_value


def smallest_p(n_x: int, n_y: int, shared: int = 0) -> float:
    """The smallest p the test can give with these seeds: every run of one group above every run of the other."""
    bound = seed_bound(n_x, n_y, shared)
    return 1.0 if bound is None else float(bound.p_value(0.5))


# ---------------------------------------------------------------- Brunner–Munzel's statistic (not the gate's test)


@dataclass(frozen=True)
class Studentized:
    """Brunner–Munzel's statistic and what its t approximation needs (arrays over any leading draw axes)."""

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
    """(average P(X > Y) - 1/2) divided by its estimated standard error: Brunner–Munzel's statistic."""
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
    the draws at least as far from 0 as the observed one (itself included, so p > 0). Exact when X and Y
    are one distribution; when they only share a PoI of 1/2 it is near its level for large groups only
    (Neubert and Brunner, 2007): with hit-or-miss runs at 7 a side it calls about 1 in 10 comparisons
    different at 0.05 (benchmark/results/rlops_calibration.md), so RLops does not use it.
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


# ---------------------------------------------------------------- hit-or-miss outcomes (games won or lost)


def binomial_p_value(successes: int, trials: int, p: float = 0.5) -> float:
    """One-sided exact p of `successes` or more in `trials` independent trials that each succeed with probability `p`:
    the test of "the success rate is at most `p`" for outcomes that are hits or misses (a game won or lost).

    Trials need not share one probability: if their probabilities average at most `p` (a policy that wins more on
    one side of a game than on the other, sides taken equally often), the count of successes is no more spread than
    this binomial (Hoeffding, 1956), so its upper tail beyond the mean is no heavier and the test keeps its level.
    Computed with exact fractions (`p` is taken as the nearest fraction with a denominator up to 10^6).
    """
    from fractions import Fraction

    if not (isinstance(trials, int) and isinstance(successes, int) and 0 <= successes <= trials):
        raise ValueError(f"successes must be a whole number in [0, trials], got {successes} of {trials}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    chance = Fraction(p).limit_denominator(10**6)
    tail = sum(math.comb(trials, k) * chance**k * (1 - chance) ** (trials - k) for k in range(successes, trials + 1))
    return float(tail)


# ---------------------------------------------------------------- what seed counts allow


def reachable(smallest: Sequence[float], alpha: float) -> list[bool]:
    """Which tests of a Holm family could reject at all: those rejected when every p is its smallest.

    Holm's procedure only rejects more when p-values fall, so this is the best case of each test.
    """
    return [p <= alpha for p in holm(smallest)]


def least_seeds(alpha: float, tests: int = 1) -> int:
    """The fewest seeds per group, none shared by the two groups, with which a test can reach alpha / tests."""
    seeds = 1
    while smallest_p(seeds, seeds) > alpha / tests:
        seeds += 1
    return seeds


def shift_improvement(shift: float) -> float:
    """P(X > Y) of two normal scores whose means differ by `shift` standard deviations."""
    return NormalDist().cdf(shift / math.sqrt(2))


def detectable_shift(
    envs: int, n_x: int, n_y: int, shared: int, level: float, power: float = 0.8, draws: int = 10000, seed: int = 0
) -> float | None:
    """The smallest shift of normal scores (in seed-to-seed standard deviations, the same on every env) that the test
    at `level` calls an improvement with probability at least `power`, by simulation of independent runs; None when
    no shift reaches it. `shared`: how many of the seed numbers both groups ran (their pairs are left out).

    The draws are fixed by `seed` and shared by every shift tried, so the share found grows with the shift and a
    bisection finds it to within 0.001 std. It aims two standard errors above `power` (0.808 for 0.8 at 10,000
    draws), so that the shift's chance on fresh draws is at least `power`, not `power` give or take the draws' luck.
    """
    bound = seed_bound(n_x, n_y, shared)
    if bound is None or bound.p_value(0.5) > level:
        return None
    aim = power + 2 * math.sqrt(power * (1 - power) / draws)
    other = np.ones((n_x, n_y), dtype=bool)
    other[np.arange(shared), np.arange(shared)] = False  # the first `shared` runs of each group are one seed each
    rng = np.random.default_rng(seed)
    env_seeds = [int(s) for s in rng.integers(1 << 31, size=envs)]

    def found(shift: float) -> float:
        improvement = np.zeros(draws)
        for env_seed in env_seeds:
            env_rng = np.random.default_rng(env_seed)  # the same draws at every shift
            x, y = env_rng.normal(size=(draws, n_x)), env_rng.normal(size=(draws, n_y))
            improvement += comparisons(x + shift, y)[:, other].mean(axis=-1) / envs
        p = bound.p_value(np.abs(improvement - 0.5))
        return float(np.mean((p <= level) & (improvement > 0.5)))

    low, high = 0.0, 12.0
    if found(high) < aim:
        return None
    while high - low > 1e-3:
        middle = (low + high) / 2
        low, high = (low, middle) if found(middle) >= aim else (middle, high)
    return high
