"""The figures of Agarwal et al. (2021) for groups of runs, drawn with matplotlib alone (no rliable at run time):
performance profiles with bootstrap bands, aggregate scores with their intervals, and the IQM over training.

Every function takes normalised scores, {group: one array of run scores per task}, and draws each group in the
colour it has in the learning curves (its index in the order given).
"""

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from cleanrl_utils import rlstats
from cleanrl_utils.report import rolling_mean
from cleanrl_utils.runtime.atomic import atomic_path
from cleanrl_utils.tensorboard_reader import Series

PROFILE_POINTS = 101
STEP_POINTS = 100


def save(figure: Figure, stem: Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """`figure` as stem.png, stem.svg, each file written whole or not at all."""
    paths = [stem.with_name(f"{stem.name}.{fmt}") for fmt in formats]
    for path in paths:
        with atomic_path(path) as tmp:
            figure.savefig(tmp)
    return paths


def _colour(index: int) -> str:
    return f"C{index % 10}"


def _band(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1 - confidence) / 2
    return np.quantile(draws, tail, axis=0), np.quantile(draws, 1 - tail, axis=0)


# ---------------------------------------------------------------- performance profile


def fraction_above(scores: rlstats.Scores, taus: np.ndarray) -> np.ndarray:
    """The share of runs scoring above each tau, every task weighing the same: shape (..., len(taus))."""
    per_task = [(np.asarray(s)[..., None, :] > taus[:, None]).mean(axis=-1) for s in scores]
    return np.mean(per_task, axis=0)


def performance_profile(
    normalized: dict[str, list[np.ndarray]], reps: int, confidence: float, rng: np.random.Generator
) -> Figure:
    """For every score tau, the share of runs above it (a higher curve is better), with a stratified-bootstrap band."""
    every = np.concatenate([s for per_task in normalized.values() for s in per_task])
    taus = np.linspace(min(0.0, every.min()), max(1.0, every.max()), PROFILE_POINTS)
    figure = Figure(figsize=(6, 4), layout="constrained")
    ax = figure.subplots()
    for index, (group, scores) in enumerate(normalized.items()):
        colour = _colour(index)
        ax.plot(taus, fraction_above(scores, taus), color=colour, label=group)
        if not rlstats.single_run(scores):
            draws = fraction_above([rlstats.resample(rng, s, reps) for s in scores], taus)
            ax.fill_between(taus, *_band(draws, confidence), color=colour, alpha=0.2, linewidth=0)
    ax.set_xlabel("normalised score τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure


# ---------------------------------------------------------------- aggregate scores


def aggregate_estimates(
    normalized: dict[str, list[np.ndarray]], reps: int, confidence: float, rng: np.random.Generator
) -> dict[str, dict[str, rlstats.Estimate]]:
    """{group: {median, IQM, mean, optimality gap: estimate with its interval}}."""
    return {
        group: {
            name: rlstats.aggregate_estimate(metric, scores, reps, confidence, rng)
            for name, metric in rlstats.AGGREGATES.items()
        }
        for group, scores in normalized.items()
    }


def aggregate_figure(estimates: dict[str, dict[str, rlstats.Estimate]], confidence: float) -> Figure:
    """One panel per aggregate, one bar per group spanning its interval, a tick at the estimate."""
    names = list(rlstats.AGGREGATES)
    groups = list(estimates)
    figure = Figure(figsize=(3 * len(names), 0.6 * len(groups) + 1.4), layout="constrained")
    axes = figure.subplots(1, len(names), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, names):
        for row, group in enumerate(groups):
            estimate = estimates[group][name]
            colour = _colour(row)
            if estimate.defined:
                ax.barh(row, estimate.high - estimate.low, left=estimate.low, height=0.6, color=colour, alpha=0.6)
            ax.vlines(estimate.value, row - 0.3, row + 0.3, color="black", linewidth=1.5)
        ax.set_title(name + (" (lower is better)" if name == "optimality gap" else ""), fontsize="medium")
        ax.set_xlabel("normalised score")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(groups)), groups)
    axes[0].invert_yaxis()
    figure.suptitle(f"Aggregate scores, {confidence:.0%} stratified-bootstrap intervals", fontsize="medium")
    return figure


# ---------------------------------------------------------------- IQM over training


def run_curve(series: Series, steps: np.ndarray, smooth: int) -> np.ndarray:
    """The run's values smoothed by a trailing mean and read at `steps` (held at its first and last value outside)."""
    points = sorted(series, key=lambda point: point[0])
    logged = np.array([step for step, _ in points], dtype=float)
    values = rolling_mean(np.array([value for _, value in points], dtype=float), smooth)
    return np.interp(steps, logged, values)


def iqm_over_steps(
    curves: dict[str, list[list[Series]]],
    lows: Sequence[float],
    highs: Sequence[float],
    smooth: int,
    reps: int,
    confidence: float,
    rng: np.random.Generator,
) -> Figure:
    """The IQM of normalised scores along training, with a stratified-bootstrap band.

    `curves` holds each group's runs per task. The x axis is the global step when every task trained for
    the same number of steps (within 5%), else the share of its task's steps; it starts where every run has
    logged.
    """
    task_ends = [max(s[-1][0] for group in curves.values() for s in group[t]) for t in range(len(lows))]
    start = max(
        min(step for step, _ in s) / end for group in curves.values() for t, end in enumerate(task_ends) for s in group[t]
    )
    fractions = np.linspace(start, 1.0, STEP_POINTS)
    same_budget = max(task_ends) <= 1.05 * min(task_ends)  # last episodes end a little before the budget
    figure = Figure(figsize=(6, 4), layout="constrained")
    ax = figure.subplots()
    x = fractions * max(task_ends) if same_budget else fractions
    for index, (group, per_task) in enumerate(curves.items()):
        # per task: (points, runs) normalised values
        values = [
            (np.stack([run_curve(s, fractions * end, smooth) for s in runs], axis=-1) - low) / (high - low)
            for runs, end, low, high in zip(per_task, task_ends, lows, highs)
        ]
        colour = _colour(index)
        ax.plot(x, rlstats.aggregate_iqm(values), color=colour, label=group)
        if not rlstats.single_run(values):
            drawn = [v[:, rng.integers(0, v.shape[1], size=(reps, v.shape[1]))].transpose(1, 0, 2) for v in values]
            ax.fill_between(x, *_band(rlstats.aggregate_iqm(drawn), confidence), color=colour, alpha=0.2, linewidth=0)
    ax.set_xlabel("global step" if same_budget else "share of the env's training steps")
    ax.set_ylabel("IQM of normalised score")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return figure
