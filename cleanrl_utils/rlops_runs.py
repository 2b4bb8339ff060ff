"""The runs RLops compares: read from local TensorBoard folders or a W&B project, grouped by tag, and checked so
that a broken run stops the comparison (a non-finite score, a run in two groups, a run counted twice) or is named
and left out (a run that stopped early, a non-finite speed) instead of quietly moving a verdict."""

import itertools
import math
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cleanrl_utils.report import SPS_TAG, ReportError, Run, collect_runs, count_or_none
from cleanrl_utils.rlops_args import UNTAGGED, RlopsError
from cleanrl_utils.tensorboard_reader import EventFileError

STEP_KEY = "global_step"  # the step of W&B runs synced from TensorBoard
SAMPLED_HISTORY_ROWS = 500  # W&B history rows read per run without --scan-history


def warn(message: str) -> None:
    print(f"rlops: warning: {' '.join(message.split())}", file=sys.stderr)


def describe(run: Run) -> str:
    """A run as the messages name it: where it is, its group (tag), seed and env."""
    return f"{run.path} ({run.group or 'no group'}, seed {run.seed}, {run.env_id})"


@dataclass(frozen=True)
class LeftOut:
    run: Run
    reason: str


# ---------------------------------------------------------------- where runs come from


def local_runs(runs_dirs: list[Path]) -> list[Run]:
    try:
        return collect_runs(runs_dirs, split_by_dir=False)
    except (ReportError, EventFileError) as e:
        raise RlopsError(str(e)) from None


def unreadable(runs: list[Run], exp_names: set[str]) -> list[Run]:
    """Runs of a compared exp name whose event files gave nothing (empty, or bytes TensorBoard skips): their tags are
    lost with the rest, so they cannot be told apart from a seed of a compared group that crashed. Each is named."""
    empty = [run for run in runs if not run.scalars and not run.tags and run.exp_name in exp_names]
    for run in empty:
        warn(f"{run.path}: its event files hold nothing readable (empty or damaged): left out, and its tag is unknown")
    return empty


def _series(rows, tag: str) -> list[tuple[int, float]]:
    return [
        (int(row[STEP_KEY]), float(row[tag])) for row in rows if row.get(tag) is not None and row.get(STEP_KEY) is not None
    ]


def _sampled_with_exact_tail(remote, keys: list[str], tag: str, window: int) -> tuple[list[tuple[int, float]], bool]:
    """A sample of the run's history, its last `window` values of `tag` read whole: (series, exact tail?).

    The sample's rows carry their history row (`_step`); from the window-th last sampled row of `tag` on,
    every row is read, so the score averages the last `window` values the run logged, not the last of a sample.
    """
    rows = list(remote.history(keys=keys, samples=SAMPLED_HISTORY_ROWS, pandas=False))
    tagged = [row for row in rows if row.get(tag) is not None]
    if not tagged or any("_step" not in row for row in tagged):
        return _series(rows, tag), False
    first_row = int(tagged[-window]["_step"]) if len(tagged) >= window else int(tagged[0]["_step"])
    head = [row for row in tagged if int(row["_step"]) < first_row]
    tail = list(remote.scan_history(keys=keys, min_step=first_row))
    return sorted(_series(head, tag) + _series(tail, tag), key=lambda point: point[0]), True


def wandb_runs(
    api, entity: str | None, project: str, exp_names: set[str], metric: str, scan_history: bool, window: int
) -> tuple[list[Run], list[LeftOut]]:
    """The finished runs of a W&B project, as the local reader gives them (`api` is a `wandb.Api()`), and the runs
    left out: those still running, crashed, failed or killed, counted in a warning. A crashed seed may be what a
    change broke, so they count as left out, as a local run that stopped early does."""
    path = f"{entity}/{project}" if entity else project
    runs, unfinished, sampled, left_out = [], Counter(), 0, []
    try:
        for remote in api.runs(path, filters={"config.exp_name": {"$in": sorted(exp_names)}}):
            config = remote.config
            if config.get("exp_name") not in exp_names or "env_id" not in config:
                continue
            state = getattr(remote, "state", "finished")
            if state != "finished":
                unfinished[state] += 1
                run = Run(
                    path=Path(f"wandb:{path}/{remote.id}"),
                    env_id=str(config["env_id"]),
                    exp_name=str(config["exp_name"]),
                    seed=str(config.get("seed", "?")),
                    group="",
                    scalars={},
                    runtime_minutes=None,
                    tags=tuple(remote.tags),
                )
                left_out.append(LeftOut(run, f"is {state} on W&B, not finished"))
                continue
            scalars = {}
            for tag in (metric, SPS_TAG):
                keys = [STEP_KEY, tag]
                if scan_history:
                    series = _series(remote.scan_history(keys=keys), tag)
                elif tag == metric:
                    series, exact = _sampled_with_exact_tail(remote, keys, tag, window)
                    sampled += not exact
                else:
                    series = _series(remote.history(keys=keys, samples=SAMPLED_HISTORY_ROWS, pandas=False), tag)
                if series:
                    scalars[tag] = sorted(series, key=lambda point: point[0])
            runtime = remote.summary.get("_runtime")
            runs.append(
                Run(
                    path=Path(f"wandb:{path}/{remote.id}"),
                    env_id=str(config["env_id"]),
                    exp_name=str(config["exp_name"]),
                    seed=str(config.get("seed", "?")),
                    group="",
                    scalars=scalars,
                    runtime_minutes=runtime / 60 if runtime is not None else None,
                    tags=tuple(remote.tags),
                    num_envs=count_or_none(config.get("num_envs")),
                )
            )
    except Exception as e:  # the network boundary: wandb raises its own, requests' and HTTP errors
        raise RlopsError(f"cannot read W&B project {path}: {type(e).__name__}: {' '.join(str(e).split())}") from None
    if unfinished:
        states = ", ".join(f"{count} {state}" for state, count in sorted(unfinished.items()))
        warn(f"W&B project {path}: left out {sum(unfinished.values())} runs that have not finished ({states})")
    if sampled:
        warn(
            f"{sampled} W&B runs give no history row numbers: their scores average the last values of a sample of "
            f"{SAMPLED_HISTORY_ROWS} rows, not the last episodes; --scan-history reads every row"
        )
    if not runs:
        raise RlopsError(f"W&B project {path} has no finished runs with exp_name {', '.join(sorted(exp_names))}")
    return runs, left_out


# ---------------------------------------------------------------- choosing runs


def exp_names_per_tag(exp_name_groups: list[list[str]], tags: list[str]) -> dict[str, set[str]]:
    """`--exp-name` given once applies to every tag; given once per tag, the i-th applies to the i-th tag."""
    if len(exp_name_groups) == 1:
        return {tag: set(exp_name_groups[0]) for tag in tags}
    if len(exp_name_groups) != len(tags):
        raise RlopsError(
            f"--exp-name is given {len(exp_name_groups)} times for {len(tags)} tags: give it once, or once per tag"
        )
    return {tag: set(names) for tag, names in zip(tags, exp_name_groups)}


def has_tag(run: Run, tag: str) -> bool:
    return tag in run.tags or (tag == UNTAGGED and not run.tags)


def select(runs: list[Run], tags: list[str], exp_names: dict[str, set[str]]) -> list[Run]:
    """Each matching run with its `group` set to its tag; a run matching two compared tags is an error."""
    chosen = []
    for run in runs:
        matching = [tag for tag in tags if has_tag(run, tag) and run.exp_name in exp_names[tag]]
        if len(matching) > 1:
            raise RlopsError(
                f"{run.path} (seed {run.seed}, {run.env_id}) carries the tags {' and '.join(map(repr, matching))}, which "
                "are compared with each other: a run can be in one group only; start each group's runs with its own tag"
            )
        if matching:
            chosen.append(replace(run, group=matching[0]))
    for tag in tags:
        if not any(run.group == tag for run in chosen):
            seen = sorted({t for run in runs for t in run.tags} | ({UNTAGGED} if any(not r.tags for r in runs) else set()))
            raise RlopsError(
                f"no runs of exp name {', '.join(sorted(exp_names[tag]))} carry tag {tag!r}; tags found: {', '.join(seen) or 'none'}"
            )
    return chosen


def select_left_out(left_out: list[LeftOut], tags: list[str], exp_names: dict[str, set[str]]) -> list[LeftOut]:
    """The runs left out before selection (W&B's unfinished ones) that belong to a compared tag, with their group set
    (the first compared tag they carry), each named in a warning."""
    chosen = []
    for item in left_out:
        matching = [tag for tag in tags if has_tag(item.run, tag) and item.run.exp_name in exp_names[tag]]
        if matching:
            chosen.append(LeftOut(replace(item.run, group=matching[0]), item.reason))
            warn(f"{describe(chosen[-1].run)} {item.reason}: left out, and the gate cannot pass without it")
    return chosen


def check_coverage(runs: list[Run], tags: list[str], env_ids: list[str]) -> None:
    """Every tag needs runs of a single exp name on every env, or the comparison across envs means nothing."""
    for tag in tags:
        for env_id in env_ids:
            names = {run.exp_name for run in runs if run.group == tag and run.env_id == env_id}
            if not names:
                raise RlopsError(f"tag {tag!r} has no runs on {env_id}")
            if len(names) > 1:
                raise RlopsError(
                    f"tag {tag!r} has runs of {', '.join(sorted(names))} on {env_id}: give --exp-name once per tag"
                )


def check_metric(runs: list[Run], metric: str) -> list[Run]:
    """The runs that logged `metric`; the others are left out with a warning (and count as left out)."""
    kept = [run for run in runs if run.scalars.get(metric)]
    if not kept:
        tags = sorted({tag for run in runs for tag in run.scalars})
        raise RlopsError(f"no selected run has {metric!r} values; tags found: {', '.join(tags) or 'none'}")
    for run in runs:
        if not run.scalars.get(metric):
            warn(f"{describe(run)} has no {metric!r} values: left out")
    return kept


# ---------------------------------------------------------------- checks on the values


def check_finite(runs: list[Run], metric: str) -> None:
    """A NaN or infinite value of the metric is an error: it would poison the normalisation and every test."""
    for run in runs:
        values = np.array([value for _, value in run.scalars[metric]], dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            step, value = run.scalars[metric][bad[0]]
            raise RlopsError(
                f"{describe(run)}: {metric} is {value} at step {step} ({bad.size} non-finite of {values.size} values); "
                "a score must be a finite number: fix the run or leave it out"
            )


def fingerprint(run: Run, metric: str) -> tuple | None:
    """What a copy of a run keeps even when its returns are edited, and another run never shares: the steps it logged
    the metric at, its SPS values (clock readings) and its runtime; without SPS, its metric values and runtime; None
    when it has neither SPS nor a runtime, as then two runs that never learned (every episode -200 at the same steps)
    could not be told from copies."""
    speeds = tuple(run.scalars.get(SPS_TAG, []))
    if speeds and run.runtime_minutes is not None:
        return tuple(step for step, _ in run.scalars[metric]), speeds, run.runtime_minutes
    if run.runtime_minutes is None:
        return None
    return tuple(run.scalars[metric]), run.runtime_minutes


def mostly_equal(first: list[tuple[int, float]], second: list[tuple[int, float]]) -> bool:
    """Whether more than half of two series' values (at the same steps) agree to 4 digits: a copy with a few returns
    edited still does; two seeds' returns do not (seeds that never learned are told apart by their clocks)."""
    a, b = np.array([v for _, v in first]), np.array([v for _, v in second])
    return a.shape == b.shape and float(np.mean(np.isclose(a, b, rtol=1e-4, atol=0.0))) > 0.5


COPY_RTOL = 0.01  # two values this close (relative) count as the same: a copy scaled by up to 1% still matches
COPY_LAGS = 10  # chance agreement is measured between each value and the other run's values up to this many apart
COPY_MAX_LAG = 1000  # and each run's agreement with itself at any lag up to half the run or this many (cycles of levels)
COPY_MIN_VALUES = 10  # fewer fluctuations than this in common: too little to tell a copy (short or flat runs)
COPY_CHANCE = 1e-9  # a bound on the chance that independent runs agree as much: below it, the runs are copies
COPY_SMOOTH_LEVELS = 5  # curves without fluctuations (only written by hand) need this many distinct values
COPY_SHIFTS = 1  # a copy cut or extended by up to this many episodes at its start or its end is lined up with its run
COPY_NULL_LAGS = range(6, 16)  # the correlation of fluctuations this many episodes apart is the chance correlation
COPY_WHITE_SHARED = 1.45  # Bartlett's 1 + 2 sum of rho_k^2 for white noise less its mean of five: rho = -.3 -.35 .1 .05
COPY_CYCLE_CHANCE = 1e-3  # a run whose fluctuations repeat at a lag with less chance than this holds a cycle
COPY_CLIP = 8  # fluctuations beyond this many robust standard deviations are clipped: a fall must not decide a fit
COPY_DISTINCT = 0.9  # runs with a smaller share of distinct values are discrete (0/1, integers): no correlation rule


def alignments(
    first: list[tuple[int, float]], second: list[tuple[int, float]]
) -> tuple[list, np.ndarray, np.ndarray, list[int]]:
    """The ways to line two runs' values up: (at the steps both logged, a, b, lags). At the global steps both logged
    (a copy with episodes added or cut anywhere, its steps kept), left out when those are all the steps of both; and
    episode by episode, a[i + lag] beside b[i], with the shorter run's first episode at the longer run's first or its
    last at the longer run's last, each moved by up to `COPY_SHIFTS` episodes (a copy cut or extended at its start or
    its end, its steps moved or not; a run's second half re-logged as a run lines up at its end)."""
    at_second = dict(second)
    common = [(value, at_second[step]) for step, value in first if step in at_second]
    a, b = np.array([v for _, v in first], dtype=float), np.array([v for _, v in second], dtype=float)
    ends = len(a) - len(b)
    lags = {*range(-COPY_SHIFTS, COPY_SHIFTS + 1), *range(ends - COPY_SHIFTS, ends + COPY_SHIFTS + 1)}
    lags = [lag for lag in sorted(lags, key=abs) if overlap(a, b, lag) >= COPY_MIN_VALUES + 2]
    by_step = []
    if COPY_MIN_VALUES + 2 <= len(common) and not len(common) == len(a) == len(b):
        by_step.append((np.array([x for x, _ in common], dtype=float), np.array([y for _, y in common], dtype=float)))
    return by_step, a, b, lags


def overlap(a: np.ndarray, b: np.ndarray, lag: int) -> int:
    return min(len(b), len(a) - lag) - max(0, -lag)


def beside(a: np.ndarray, b: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """The parts of a and b lined up with a[i + lag] beside b[i]."""
    start, stop = max(0, -lag), min(len(b), len(a) - lag)
    return a[start + lag : stop + lag], b[start:stop]


def chance_bound(agreeing: int, compared: int, chance: float) -> float:
    """A bound on P(`agreeing` or more of `compared` agree) when each agrees with probability `chance`: Chernoff's,
    exp(-n KL(k/n || q)), with n a third of the comparisons (second differences three apart share no value, so only
    those are independent)."""
    share = agreeing / compared
    if share <= chance:
        return 1.0
    chance = min(max(chance, 1e-12), 1 - 1e-12)
    kl = share * math.log(share / chance) + (0.0 if share == 1 else (1 - share) * math.log((1 - share) / (1 - chance)))
    return math.exp(-compared / 3 * kl)


def most_self_agreement(da: np.ndarray, db: np.ndarray, agree) -> float:
    """The most two runs' fluctuations agree with their own, at any one lag up to half the run (or `COPY_MAX_LAG`),
    less three standard errors.

    Seeds that learned an env handing out a fixed list of levels in turn repeat each level's return every cycle, and
    both seeds do so in step: they agree at the same episode as much as each agrees with itself a cycle later. A copy
    edited by a cut or a shift agrees with the original at a lag, but each run's agreement with itself stays at chance.
    """
    most = 0.0
    # from lag 3: second differences closer share a value (a lone dip's are d, -2d, d), and a cycle of one or two
    # levels shows at its multiples
    for lag in range(3, min(len(da) // 2, COPY_MAX_LAG) + 1):
        agreeing = compared = 0
        for d in (da, db):
            counted = (d[lag:] != 0) | (d[:-lag] != 0)
            agreeing += int(agree(d[lag:], d[:-lag])[counted].sum())
            compared += int(counted.sum())
        if compared >= COPY_MIN_VALUES:
            # three Poisson standard errors off: the most of up to a thousand lags' chance agreements is no cycle
            most = max(most, (agreeing - 3 * math.sqrt(agreeing)) / compared)
    return most


def agreement_chance(a: np.ndarray, b: np.ndarray) -> float | None:
    """The chance bound of two lined-up runs' second differences agreeing to `COPY_RTOL` as often as they do (see
    `near_copy`); None when they do not fluctuate, or fluctuate too little to tell."""
    scale = max(float(np.abs(a).max()), float(np.abs(b).max()), 1e-30)
    flat = 1e-5 * scale  # float32 rounding of the values, not a fluctuation
    da, db = np.diff(a, 2), np.diff(b, 2)
    da[np.abs(da) <= flat], db[np.abs(db) <= flat] = 0.0, 0.0

    def agree(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.abs(x - y) <= COPY_RTOL * np.maximum(np.abs(x), np.abs(y))

    moving = (da != 0) | (db != 0)
    if moving.sum() < COPY_MIN_VALUES:
        return None
    agreeing = int(agree(da, db)[moving].sum())
    chance_agreeing = chance_compared = 0
    for lag in range(1, COPY_LAGS + 1):
        for x, y in ((da[lag:], db[:-lag]), (da[:-lag], db[lag:])):
            counted = (x != 0) | (y != 0)
            chance_agreeing += int(agree(x, y)[counted].sum())
            chance_compared += int(counted.sum())
    chance = (chance_agreeing + 1) / (chance_compared + 1)
    compared = int(moving.sum())
    bound = chance_bound(agreeing, compared, chance)
    if bound > COPY_CHANCE:
        return bound
    # the self-agreement costs a pass per lag: measured only for runs the near lags call copies
    return chance_bound(agreeing, compared, max(chance, most_self_agreement(da, db, agree)))


def is_straight_copy(a: np.ndarray, b: np.ndarray) -> bool:
    """Curves without any fluctuation (straight lines, only written by hand) are copies when 90% of their values
    agree to `COPY_RTOL` and they take at least `COPY_SMOOTH_LEVELS` distinct values."""
    scale = max(float(np.abs(a).max()), float(np.abs(b).max()), 1e-30)
    if len(a) < COPY_MIN_VALUES + 2 or (np.abs(np.diff(a, 2)) > 1e-5 * scale).any():
        return False
    if (np.abs(np.diff(b, 2)) > 1e-5 * scale).any():
        return False
    levels = len(np.unique(np.round(a / (COPY_RTOL * scale))))
    return (
        levels >= COPY_SMOOTH_LEVELS and float(np.mean(np.abs(a - b) <= COPY_RTOL * np.maximum(np.abs(a), np.abs(b)))) >= 0.9
    )


def fluctuations(values: np.ndarray) -> np.ndarray | None:
    """Each value less the mean of it and its four neighbours (the episode's noise, with the trend taken out: a
    straight stretch exactly, a learning curve's bend nearly), clipped at `COPY_CLIP` robust standard deviations
    (1.4826 times the median absolute deviation) so that a rare fall cannot decide a fit; None when most are 0
    (within float32 rounding)."""
    noise = values[2:-2] - np.convolve(values, np.full(5, 0.2), "valid")
    noise[np.abs(noise) <= 1e-5 * float(np.abs(values).max())] = 0.0  # float32 rounding, not a fluctuation
    middle = float(np.median(noise))
    spread = 1.4826 * float(np.median(np.abs(noise - middle)))
    if spread == 0.0:
        return None
    return np.clip(noise, middle - COPY_CLIP * spread, middle + COPY_CLIP * spread)


def repeats_itself(noise: np.ndarray) -> bool:
    """Whether a run's fluctuations correlate with their own at some lag from 6 (where white noise less its mean of
    five shares nothing) to half the run or `COPY_MAX_LAG`, beyond `COPY_CYCLE_CHANCE` (Bonferroni over the lags):
    a cycle of levels, which two honest seeds share in step."""
    count = len(noise)
    lags = np.arange(6, min(count // 2, COPY_MAX_LAG) + 1)
    if not lags.size:
        return False
    centred = noise - noise.mean()
    spectrum = np.fft.rfft(centred, 2 * count)
    products = np.fft.irfft(spectrum * np.conj(spectrum))[:count]  # sum of centred[i] * centred[i + lag]
    squares = np.cumsum(centred**2)
    earlier, later = squares[count - 1 - lags], squares[-1] - squares[lags - 1]  # of centred[:-lag] and [lag:]
    spread = np.sqrt(earlier * later)
    correlation = np.clip(products[lags] / np.where(spread > 0, spread, 1.0), -1.0, 1.0)  # 0 for a flat stretch
    independent = 1 + (count - lags - 1) / COPY_WHITE_SHARED
    chance = (1.0 - correlation**2) ** np.maximum(0.0, (independent - 3) / 2)
    return float(chance.min()) * lags.size <= COPY_CYCLE_CHANCE


def explained(y: np.ndarray, x: np.ndarray, lag: int) -> tuple[float, int]:
    """(R², values used) of `y[i]` fitted by `x[i + lag]` and `x[i + lag - 1]` (a shift, or a moving average of two
    episodes), least squares with an intercept."""
    start, stop = max(0, 1 - lag), min(len(y), len(x) - lag)
    if stop - start < COPY_MIN_VALUES:
        return 0.0, 0
    target = y[start:stop] - y[start:stop].mean()
    inputs = np.column_stack([x[start + lag : stop + lag], x[start + lag - 1 : stop + lag - 1]])
    inputs = inputs - inputs.mean(axis=0)
    total = float(target @ target)
    if total == 0.0:
        return 0.0, stop - start
    # the normal equations of two inputs (pinv: one input may repeat the other, as in a flat stretch)
    covariance, towards = inputs.T @ inputs, inputs.T @ target
    fit = np.linalg.pinv(covariance) @ towards
    return min(1.0, max(0.0, float(towards @ fit) / total)), stop - start


def correlation_applies(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the correlation rule may judge two runs: both of continuous values (discrete ones, 0/1 or whole
    numbers, can repeat each other exactly by chance), fluctuating, and without a cycle (which two honest seeds
    share in step: left to the agreement rule, which weighs it)."""
    if min(len(a), len(b)) < COPY_MIN_VALUES + 4:
        return False
    if min(len(np.unique(a)) / len(a), len(np.unique(b)) / len(b)) < COPY_DISTINCT:
        return False
    fa, fb = fluctuations(a), fluctuations(b)
    return fa is not None and fb is not None and not repeats_itself(fa) and not repeats_itself(fb)


def correlation_chance(a: np.ndarray, b: np.ndarray, lag: int) -> float:
    """The chance of two runs' fluctuations, lined up with a[i + lag] beside b[i], fitting each other as well as they
    do (see `near_copy`), the better of the two directions (1 where too few episodes overlap to measure it); only
    for runs `correlation_applies` to."""
    fa, fb = fluctuations(a), fluctuations(b)
    # neighbouring fluctuations of a run share the mean of five, so n of them hold fewer independent values:
    # n / 1.45 for white episode noise (Bartlett's), fewer where the noise itself is correlated (the fits below)
    least = 1.0
    for y, x, at in ((fb, fa, lag), (fa, fb, -lag)):
        r2, used = explained(y, x, at)
        if not used or (1.0 - r2) ** max(0.0, (1 + (used - 1) / COPY_WHITE_SHARED - 3) / 2) > COPY_CHANCE:
            continue  # no copy even with the most independent values the lagged fits could leave: spare them
        # the fits at lags where a copy's noise no longer lines up: their mean R², against 2 / (n - 1) for n
        # independent normal values, measures how many independent values the fluctuations hold
        inflation = []
        for apart in (*COPY_NULL_LAGS, *(-step for step in COPY_NULL_LAGS)):
            null_r2, null_used = explained(y, x, at + apart)
            if null_used:
                inflation.append(null_r2 * (null_used - 1) / 2)
        if len(inflation) < len(COPY_NULL_LAGS) // 2:
            continue
        independent = 1 + (used - 1) / max(COPY_WHITE_SHARED, float(np.mean(inflation)))
        # R² of a least-squares fit on two inputs, in n independent normal values: above r with chance (1 - r)^((n-3)/2)
        chance = (1.0 - r2) ** max(0.0, (independent - 3) / 2)
        least = min(least, chance)
    return least


def near_copy(first: list[tuple[int, float]], second: list[tuple[int, float]]) -> bool:
    """Whether two runs' learning curves are one run's, edited or not (its SPS, its steps, episodes cut at its start
    or end, its returns scaled by up to 1%, a tenth of them changed, 1% noise on each, a moving average of two), rather
    than two seeds'.

    A copy keeps a run's episode-to-episode fluctuations. The runs are lined up in a few ways (`alignments`) and,
    in each, two rules bound the chance that independent runs match this well. Every bound taken draws on one
    budget, `COPY_CHANCE` (weighted Bonferroni: trying more alignments must not raise false alarms): half to the
    agreement at the steps both logged, when those differ from the episodes, the rest shared equally by the others:

    - agreement: the second differences of the returns (the noise, with any straight trend taken out) agree to
      `COPY_RTOL`, episode for episode, far more often than at episodes 1 to `COPY_LAGS` apart (the chance rate,
      measured on the two runs themselves, and raised to each run's agreement with itself at any lag: cycles of
      levels). Episodes where both are flat (CartPole's 500) are not counted; fewer than `COPY_MIN_VALUES`
      fluctuations in common are never copies. This finds copies edited by a scale, a shift or a tenth of changed
      returns, in any kind of run that fluctuates.
    - correlation: for runs of continuous values, each run's fluctuations (a return less the mean of five around it)
      fitted by the other's at the same and the previous episode explain nearly all of them (R²), where fits at lags
      `COPY_NULL_LAGS` away, which no copy shares, explain little. This finds copies with 1% noise on each return or
      smoothed by a moving average of two, which agree to 1% nowhere. The chance is a normal-theory tail,
      (1 - R²) ** ((n - 3) / 2), with n the independent values the fluctuations hold (Bartlett's count for white
      noise, or fewer as the lagged fits measure); fluctuations are clipped (`COPY_CLIP`) so that heavy tails do not
      decide it. It is not used for discrete returns, where two seeds can repeat each other exactly, nor for runs
      that repeat themselves (`repeats_itself`: cycles of levels).

    Curves without any fluctuation (straight lines, only written by hand) are copies when 90% of their values agree."""
    by_step, a, b, lags = alignments(first, second)
    continuous = correlation_applies(a, b)
    # the budget of chance: half to the steps both logged (where a copy with episodes dropped lines up), when they
    # differ from the episodes; the rest shared by one agreement and two correlations per episode alignment
    at_steps = COPY_CHANCE / 2 if by_step else 0.0
    each = (COPY_CHANCE - at_steps) / (len(lags) * (3 if continuous else 1) or 1)
    for a_part, b_part in by_step:
        if is_straight_copy(a_part, b_part):
            return True
        chance = agreement_chance(a_part, b_part)
        if chance is not None and chance <= at_steps:
            return True
    for lag in lags:
        a_part, b_part = beside(a, b, lag)
        if lag == 0 and is_straight_copy(a_part, b_part):
            return True
        chance = agreement_chance(a_part, b_part)
        if chance is not None and chance <= each:
            return True
    for lag in lags if continuous else []:
        if correlation_chance(a, b, lag) <= each:
            return True
    return False


def check_evidence(runs: list[Run], metric: str) -> None:
    """One run per (tag, env, seed), and no run twice under another seed: copied folders, a seed run twice under
    one tag or a copy given another seed would count the same evidence twice and shrink every p. A copy is found by
    its clock readings when it is exact (`fingerprint`: even a flat run's copy) and by its curve when it fluctuates
    (`near_copy`: edited or not).

    Two tags' runs of one seed may have each other's values: a change that alters nothing could be run
    deterministically. They may not share a clock (`fingerprint`): that is one run's files copied under another tag.
    """
    by_key: dict[tuple[str, str, str], list[Run]] = {}
    by_print: dict[tuple, list[Run]] = {}
    for run in runs:
        if run.seed == "?":
            raise RlopsError(
                f"{describe(run)}: no seed in its hyperparameters or folder name; runs are told apart by seed, so "
                "a run without one could be a copy of another"
            )
        by_key.setdefault((run.group, run.env_id, run.seed), []).append(run)
        key = fingerprint(run, metric)
        if key is not None:
            by_print.setdefault(key, []).append(run)
    for (group, env_id, seed), same in by_key.items():
        if len(same) > 1:
            raise RlopsError(
                f"tag {group!r} has {len(same)} runs of seed {seed} on {env_id}: "
                f"{', '.join(str(run.path) for run in same)}; the unit of evidence is one run per tag, env and seed "
                "(a copied folder or a seed run twice): remove the extra runs or tag them apart"
            )
    for same in by_print.values():
        for first, second in itertools.combinations(same, 2):
            if not mostly_equal(first.scalars[metric], second.scalars[metric]):
                continue  # one clock by chance (runs written in a blink): the returns tell them apart
            # one seed under two tags too: a deterministic re-run logs its own clock, copied files the same one
            raise RlopsError(
                f"{describe(first)} and {describe(second)} logged at the same steps with the same {SPS_TAG} values "
                "in the same time: copies of one run (their returns may have been edited), which would count "
                "twice or make two tags look alike; remove the copy"
            )
    for env_id in dict.fromkeys(run.env_id for run in runs):
        on_env = [run for run in runs if run.env_id == env_id]
        for first, second in itertools.combinations(on_env, 2):
            if first.group != second.group and first.seed == second.seed:
                continue  # two tags' runs of one seed: a change that alters nothing, run deterministically
            if share_sub_env_streams(first, second):
                # such seeds play the same levels a sub-env apart, which lines their returns up as a copy cut by an
                # episode does: `warn_close_seeds` says so in one line; only an unedited copy is refused
                num_envs = max(first.num_envs or 1, second.num_envs or 1)
                if not agree_beyond_chance(first.scalars[metric], second.scalars[metric], num_envs):
                    continue
            elif not near_copy(first.scalars[metric], second.scalars[metric]):
                continue
            raise RlopsError(
                f"{describe(first)} and {describe(second)}: their {metric} curves rise and fall together episode "
                f"by episode, as no two seeds' do: copies of one run (edited or not: its {SPS_TAG}, its length, "
                "its values scaled by up to 1%), which would count twice; remove the copy"
            )


def close_seeds(runs: list[Run]) -> list[tuple[str, Run, Run]]:
    """(env, run, run) for each pair of runs on one env whose sub-envs share a random stream: the scripts reset their
    vector env with `envs.reset(seed=s)`, which seeds sub-env i with s + i, so seeds s and s + 1 of 4 envs start
    three sub-envs on the same streams and are not independent, as the test assumes (and the copy rule judges them
    apart: `check_evidence`). Runs that logged no num_envs, or whose seed is not a number, are skipped."""
    close = []
    for env in dict.fromkeys(run.env_id for run in runs):
        on_env = [run for run in runs if run.env_id == env]
        close += [(env, *pair) for pair in itertools.combinations(on_env, 2) if share_sub_env_streams(*pair)]
    return close


def share_sub_env_streams(first: Run, second: Run) -> bool:
    """Whether two runs of different seeds start a sub-env on the same stream: seed s with n envs takes streams s to
    s + n - 1 (see `close_seeds`); False when either logged no num_envs or has a seed that is not a number."""
    if not (first.num_envs and second.num_envs and first.seed.isdecimal() and second.seed.isdecimal()):
        return False
    a, b = int(first.seed), int(second.seed)
    return a != b and max(a, b) < min(a + first.num_envs, b + second.num_envs)


def agree_beyond_chance(first: list[tuple[int, float]], second: list[tuple[int, float]], num_envs: int) -> bool:
    """Whether two runs give the same returns (to 4 digits) episode for episode, from their first, at most episodes
    and far more often than chance: an unedited copy (or one cut at its end), told from seeds closer than num_envs
    (see `close_seeds`). Such seeds line up in step at times (episodes of a shared stream logged at one position), a
    copy nearly everywhere. Chance is the most of the runs' agreement with each other past the num_envs nearest
    episodes, where shared streams log, and each run's agreement with itself at any lag up to half the run (less
    three standard errors): hit-or-miss or capped seeds agree there as often as in step, and so do runs that repeat
    themselves (levels handed out in turn, an evaluation every k episodes). `most_self_agreement` does the like on
    second differences, whose zeros mean no fluctuation; raw returns of 0 count here."""
    length = min(len(first), len(second))
    a, b = np.array([v for _, v in first[:length]]), np.array([v for _, v in second[:length]])
    if length < COPY_MIN_VALUES:
        return False

    def agree(x: np.ndarray, y: np.ndarray) -> int:
        return int(np.isclose(x, y, rtol=1e-4, atol=0.0).sum())

    agreeing = agree(a, b)
    if 2 * agreeing <= length:
        return False
    start = min(num_envs, length // 4) + 1
    lags = range(start, start + COPY_LAGS)
    chance_agreeing = sum(agree(a[lag:], b[:-lag]) + agree(a[:-lag], b[lag:]) for lag in lags)
    chance = (chance_agreeing + 1) / (sum(2 * (length - lag) for lag in lags) + 1)
    for run in (a, b):
        for lag in range(1, min(length // 2, COPY_MAX_LAG) + 1):
            itself = agree(run[lag:], run[:-lag]) / (length - lag)  # less 3 standard errors: the most of many lags
            chance = max(chance, itself - 3 * math.sqrt(itself * (1 - itself) / (length - lag)))
    return chance_bound(agreeing, length, chance) <= COPY_CHANCE


def sorted_seeds(close: tuple[str, Run, Run]) -> list[int]:
    return sorted(int(run.seed) for run in close[1:])


def warn_close_seeds(runs: list[Run]) -> None:
    """One warning line when some runs on an env share sub-env streams (see `close_seeds`)."""
    close = close_seeds(runs)
    if not close:
        return
    # the closest pair, lowest seeds first: the same runs always name the same pair
    env, first, second = min(close, key=lambda c: (abs(int(c[1].seed) - int(c[2].seed)), sorted_seeds(c), c[0]))
    first, second = sorted((first, second), key=lambda run: int(run.seed))
    num_envs = max(first.num_envs or 1, second.num_envs or 1)
    warn(
        f"seeds {first.seed} ({first.group}) and {second.seed} ({second.group}) on {env} are closer than their num_envs "
        f"({num_envs}), {len(close)} pair{'s' if len(close) > 1 else ''} of seeds in all: envs.reset(seed=s) seeds "
        "sub-env i with s + i, so such seeds start sub-envs on the same random streams and are not independent, as the "
        "test assumes (the p-values may be too small), and only an unedited copy among them is found; space every "
        f"seed at least num_envs apart: the benchmark runner's --seed-stride {num_envs} (with --start-seed S apart for "
        "the tag and the baseline), or each script's --seed yourself"
    )


def check_speeds(runs: list[Run]) -> list[Run]:
    """The runs with their non-finite `charts/SPS` values dropped, each named in a warning: the speed table only
    describes, so a NaN or infinite speed is no reason to stop, but it must not reach the table's arithmetic."""
    kept = []
    for run in runs:
        series = run.scalars.get(SPS_TAG, [])
        finite = [(step, value) for step, value in series if np.isfinite(value)]
        if len(finite) < len(series):
            step, value = next((s, v) for s, v in series if not np.isfinite(v))
            warn(
                f"{describe(run)}: {SPS_TAG} is {value} at step {step} ({len(series) - len(finite)} non-finite of "
                f"{len(series)} values): left out of its median SPS"
            )
            run = replace(run, scalars={**run.scalars, SPS_TAG: finite})
        kept.append(run)
    return kept


def last_step(run: Run) -> int:
    """The furthest step the run logged anything at (a resumed run may log steps out of order)."""
    return max(step for series in run.scalars.values() for step, _ in series)


def check_progress(runs: list[Run], env_ids: list[str], min_progress: float, strict: bool) -> tuple[list[Run], list[LeftOut]]:
    """Runs whose last step falls short of `min_progress` of the furthest run on their env: they crashed or were
    stopped, and their last episodes are not the end of training. Left out with a warning, or an error if `strict`."""
    furthest = {env: max((last_step(r) for r in runs if r.env_id == env), default=0) for env in env_ids}
    kept, left_out = [], []
    for run in runs:
        step, top = last_step(run), furthest[run.env_id]
        if top > 0 and step < min_progress * top:
            left_out.append(LeftOut(run, f"stopped at step {step:,} of {top:,} ({step / top:.0%})"))
        else:
            kept.append(run)
    if left_out and strict:
        first = left_out[0]
        more = f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else ""
        raise RlopsError(f"{describe(first.run)} {first.reason}{more}: --strict refuses runs that stopped early")
    for item in left_out:
        warn(f"{describe(item.run)} {item.reason}: left out (--min-progress {min_progress:g}; --strict makes this an error)")
    return kept, left_out


def check_window(runs: list[Run], metric: str, window: int) -> list[LeftOut]:
    """Runs with fewer values than the window: their score averages every value, early training included."""
    short = []
    for run in runs:
        count = len(run.scalars[metric])
        if count < window:
            short.append(LeftOut(run, f"has {count} values of {metric}, fewer than the window of {window}"))
            warn(f"{describe(run)} {short[-1].reason}: its score averages all of them, early training included")
    return short
