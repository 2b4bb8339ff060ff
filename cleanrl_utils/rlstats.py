"""Statistics for comparing RL runs across tasks and seeds, after Agarwal et al. (2021), "Deep RL at the
Edge of the Statistical Precipice": the interquartile mean (IQM) of normalised scores and the probability
of improvement, each with a stratified-bootstrap confidence interval, plus a stratified permutation test.

Scores come as one array per task (env), one value per run (seed); tasks may have different numbers
of runs. "Stratified" means every resample draws runs within each task, never across tasks.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Scores = Sequence[np.ndarray]  # one 1-D array of run scores per task


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float  # confidence interval; NaN when undefined (a task with a single run)
    high: float

    @property
    def defined(self) -> bool:
        return not np.isnan(self.low)


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the values left after dropping the lowest and highest quarter.

    As scipy.stats.trim_mean(values, 0.25): int(n / 4) values are cut from each end.
    """
    values = np.sort(values, axis=axis)
    n = values.shape[axis]
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) for one task: the share of (x, y) run pairs where x scores higher, ties counting half.

    The last axis holds the runs; leading axes (bootstrap or permutation draws) are kept.
    """
    greater = x[..., :, None] > y[..., None, :]
    equal = x[..., :, None] == y[..., None, :]
    return (greater + 0.5 * equal).mean(axis=(-2, -1))


def normalize(scores: Scores, low: Sequence[float], high: Sequence[float]) -> list[np.ndarray]:
    """Each task's scores mapped so that `low` becomes 0 and `high` becomes 1."""
    return [(np.asarray(s, dtype=float) - lo) / (hi - lo) for s, lo, hi in zip(scores, low, high)]


def _resample(rng: np.random.Generator, scores: np.ndarray, reps: int) -> np.ndarray:
    """`reps` bootstrap draws of one task's runs, shape (reps, runs)."""
    return scores[rng.integers(0, len(scores), size=(reps, len(scores)))]


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def iqm_estimate(scores: Scores, reps: int, confidence: float, rng: np.random.Generator) -> Estimate:
    """IQM over every run of every task, with a percentile interval from a stratified bootstrap."""
    value = float(iqm(np.concatenate(scores)))
    if min(len(s) for s in scores) < 2:
        return Estimate(value, np.nan, np.nan)
    draws = iqm(np.concatenate([_resample(rng, np.asarray(s), reps) for s in scores], axis=1))
    return Estimate(value, *_interval(draws, confidence))


def improvement_estimate(x: Scores, y: Scores, reps: int, confidence: float, rng: np.random.Generator) -> Estimate:
    """Average over tasks of P(X > Y), with a percentile interval from a bootstrap of X's and Y's runs per task."""
    value = float(np.mean([probability_of_improvement(np.asarray(a), np.asarray(b)) for a, b in zip(x, y)]))
    if min(len(s) for s in [*x, *y]) < 2:
        return Estimate(value, np.nan, np.nan)
    draws = np.mean(
        [
            probability_of_improvement(_resample(rng, np.asarray(a), reps), _resample(rng, np.asarray(b), reps))
            for a, b in zip(x, y)
        ],
        axis=0,
    )
    return Estimate(value, *_interval(draws, confidence))


def permutation_p_value(x: Scores, y: Scores, reps: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of "X and Y are the same algorithm", from the average probability of improvement.

    Under that hypothesis the runs of a task are exchangeable between X and Y, so each draw shuffles
    the X/Y labels within every task and recomputes the statistic; p counts the draws at least as far
    from 0.5 as the observed one (the observed one included, so p is never 0).
    """
    observed = abs(np.mean([probability_of_improvement(np.asarray(a), np.asarray(b)) for a, b in zip(x, y)]) - 0.5)
    per_task = []
    for a, b in zip(x, y):
        pooled = np.concatenate([a, b]).astype(float)
        order = np.argsort(rng.random((reps, len(pooled))), axis=1)  # one random permutation per row
        shuffled = pooled[order]
        per_task.append(probability_of_improvement(shuffled[:, : len(a)], shuffled[:, len(a) :]))
    drawn = np.abs(np.mean(per_task, axis=0) - 0.5)
    # A small tolerance: the same split must count as "as far" despite float rounding in the average.
    return float((1 + np.sum(drawn >= observed - 1e-12)) / (1 + reps))
