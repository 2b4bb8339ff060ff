"""RLops: did a change make an algorithm worse? Compare tagged groups of runs against a baseline tag.

    python -m cleanrl_utils.rlops --exp-name ppo --tags v2-base my-change --baseline v2-base \\
        --env-ids CartPole-v1 Acrobot-v1 --output-filename compare

Runs are found in local TensorBoard folders (`--runs-dir`, default `runs`; a run's tags are the
`WANDB_TAGS` it was started with) or in a Weights & Biases project (`--wandb-project-name`); each (tag, env,
seed) counts once. Per env, it prints each tag's mean ± std over seeds of every run's last-N average, runtime
and median SPS; across envs, aggregate scores of normalised runs (IQM, median, mean, optimality gap) and each
tag's probability of improvement (PoI) over the baseline, with stratified-bootstrap confidence intervals. The
gate tests each tag against the baseline across envs and on every env, in one Holm family, with a test whose
false-alarm rate is bounded for any score distributions and whatever a seed's runs share (`rlstats.improvement_test`,
the seed its unit); a tag fails when it regressed across envs or on any env, and is inconclusive when its seeds cannot
reach the test's level or runs were left out.
`--fail-on-regression` exits 1 on a regression and 3 on an inconclusive comparison. The Markdown, the learning
curves and rliable's figures go to `<output>.md` and `<output>*.png/.svg`.
"""

import sys

from cleanrl_utils.rlops_args import (
    EXIT_BAD_INPUT,
    PROG,
    Args,
    RlopsError,
    check_args,
    openrlbenchmark_equivalent,
    parse_target_scores,
    refuse_bad_flags,
)

if __name__ == "__main__":  # `python -m cleanrl_utils.rlops`: bad flags get their one line before the slow imports
    refuse_bad_flags(sys.argv[1:])

import functools  # noqa: E402 - after the flags are checked, as in the algorithm files
import math  # noqa: E402
import os  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from cleanrl_utils import rlfigures, rlstats  # noqa: E402
from cleanrl_utils.reference_scores import reference_scores  # noqa: E402
from cleanrl_utils.report import Run, last_mean, plot_learning_curves, report_tables  # noqa: E402
from cleanrl_utils.rlops_runs import (  # noqa: E402
    LeftOut,
    check_coverage,
    check_evidence,
    check_finite,
    check_metric,
    check_progress,
    check_speeds,
    check_window,
    describe,
    exp_names_per_tag,
    local_runs,
    select,
    select_left_out,
    unreadable,
    wandb_runs,
    warn,
    warn_close_seeds,
)
from cleanrl_utils.runtime.atomic import write_text  # noqa: E402
from cleanrl_utils.runtime.command_line import parse_args  # noqa: E402

EXIT_REGRESSION = 1
EXIT_INCONCLUSIVE = 3
FIGURES = {"profile": "performance profile", "aggregates": "aggregate scores", "iqm_steps": "IQM over training"}


@dataclass(frozen=True)
class Test:
    """One test of the gate: a tag against the baseline, across envs or on one env."""

    improvement: rlstats.Estimate  # PoI (P(tag's run beats the baseline's)), averaged over the envs tested
    p_value: float
    adjusted: float  # Holm-adjusted over the gate's family (every tag, across envs and on each env)
    counts: list[tuple[int, int]]  # (tag's runs, baseline's runs) per env
    seeds: tuple[int, int, int]  # the seeds the test used: the tag's and the baseline's on every env, and shared
    smallest_p: float  # the smallest p these seeds allow
    reachable: bool  # whether the adjusted p could reach alpha at all
    label: str


@dataclass(frozen=True)
class Verdict:
    tag: str
    overall: Test  # across envs
    per_env: list[Test]  # in --env-ids order; with one env, the test across envs itself
    gate: str  # regression (across envs or on any env), inconclusive or pass
    left_out: int = 0  # runs or seeds of the tag or the baseline left out (see why_inconclusive): cannot pass


# ---------------------------------------------------------------- scores and normalisation


def oriented(values: np.ndarray | float, lower_is_better: bool):
    """Scores turned so that higher is better: the tests and aggregates assume it."""
    return -values if lower_is_better else values


START_SHARE = 0.1  # a run's start of training: its first tenth of values


def start_mean(series: list[tuple[int, float]]) -> float:
    """Mean of the run's first tenth of values (at least one): where its training started."""
    values = [v for _, v in series[: max(1, int(START_SHARE * len(series)))]]
    return sum(values) / len(values)


def score_table(
    runs: list[Run], tags: list[str], env_ids: list[str], metric: str, window: int, lower_is_better: bool
) -> dict[str, list[np.ndarray]]:
    """{tag: [each env's array of per-run last-`window` averages]} in `env_ids` order, higher is better."""
    return {
        tag: [
            oriented(
                np.array([last_mean(r.scalars[metric], window) for r in runs if r.group == tag and r.env_id == env_id]),
                lower_is_better,
            )
            for env_id in env_ids
        ]
        for tag in tags
    }


def seed_table(runs: list[Run], tags: list[str], env_ids: list[str]) -> dict[str, list[list[str]]]:
    """{tag: [each env's seeds]}, in `score_table`'s order: the test's unit is the seed, not the run."""
    return {tag: [[r.seed for r in runs if r.group == tag and r.env_id == env_id] for env_id in env_ids] for tag in tags}


@dataclass(frozen=True)
class MissingSeed:
    """A seed with runs on some envs of a tag and none on others: the test across envs leaves it out."""

    tag: str
    seed: str
    found_on: list[str]
    missing_on: list[str]

    def text(self) -> str:
        return (
            f"tag {self.tag!r}, seed {self.seed}: runs on {', '.join(self.found_on)} but none on {', '.join(self.missing_on)}"
        )


def missing_seeds(seeds: dict[str, list[list[str]]], env_ids: list[str], left_out: list[LeftOut]) -> list[MissingSeed]:
    """Every (tag, seed) run on some env and missing on another, which no left-out run already accounts for: a seed
    that died before its first write on an env, or that the runner lost. The test across envs counts only the seeds
    run on every env, so such a seed would drop out of it silently; like a crashed run, it keeps the tag from
    passing. A left-out run of an unknown tag (unreadable) accounts for its seed under any tag."""
    named = {(item.run.group, item.run.env_id, item.run.seed) for item in left_out}
    found = []
    for tag, per_env in seeds.items():
        for seed in dict.fromkeys(seed for env_seeds in per_env for seed in env_seeds):
            on = [env for env, env_seeds in zip(env_ids, per_env) if seed in env_seeds]
            gone = [
                env
                for env, env_seeds in zip(env_ids, per_env)
                if seed not in env_seeds and (tag, env, seed) not in named and ("", env, seed) not in named
            ]
            if gone:
                found.append(MissingSeed(tag, seed, on, gone))
    return found


def baseline_starts(runs: list[Run], baseline: str, env_ids: list[str], metric: str, lower_is_better: bool) -> list[float]:
    """Per env, the mean over the baseline's runs of their first tenth of values: where its training started."""
    return [
        oriented(
            float(np.mean([start_mean(r.scalars[metric]) for r in runs if r.group == baseline and r.env_id == env])),
            lower_is_better,
        )
        for env in env_ids
    ]


def normalization(
    scores: dict[str, list[np.ndarray]],
    starts: list[float],
    baseline: str,
    env_ids: list[str],
    targets: dict[str, tuple[float, float]],
) -> tuple[list[float], list[float], list[str]]:
    """(score → 0, score → 1) per env, on the higher-is-better scale, and the envs that have no scale.

    The targets when given, else the baseline's start of training and its final mean. Only the baseline sets
    them, so adding a tag changes no normalised score, and 0 lies below 1 always, so no normalised comparison
    can come out reversed. An env where the baseline did not improve has no scale.
    """
    lows, highs, unscaled = [], [], []
    for index, env_id in enumerate(env_ids):
        if env_id in targets:
            low, high = targets[env_id]
        else:
            low, high = starts[index], float(np.mean(scores[baseline][index]))
            if not high > low:
                unscaled.append(env_id)
        lows.append(low)
        highs.append(high)
    return lows, highs, unscaled


# ---------------------------------------------------------------- verdicts


def label(adjusted: float, improvement: float, reachable: bool, alpha: float) -> str:
    """Regression / improvement when the Holm-adjusted p is at most alpha, by the side of 1/2 the PoI lies on."""
    if not reachable:
        return "inconclusive"
    if adjusted <= alpha:
        return "regression" if improvement < 0.5 else "improvement"
    return "no detectable difference"


def gate_outcome(overall: Test, per_env: list[Test], left_out: int = 0) -> str:
    """A tag fails the gate when it regressed across envs or on any env; it is inconclusive when some of these
    tests cannot reach alpha with its seeds (a regression there would go unseen) or when runs were left out (seeds
    that crashed may be what the change broke); else it passes."""
    tests = [overall, *per_env]
    if any(test.label == "regression" for test in tests):
        return "regression"
    if left_out or any(test.label == "inconclusive" for test in tests):
        return "inconclusive"
    return "pass"


def family_pairs(scores: dict[str, list[np.ndarray]], baseline: str) -> list[tuple[str, int | None, list, list]]:
    """The gate's tests: per tag, (tag, None, ...) across envs, then (tag, env index, ...) per env when there are
    several envs (with one, the test across envs is the env's own)."""
    base = scores[baseline]
    pairs = []
    for tag, per_env in scores.items():
        if tag == baseline:
            continue
        pairs.append((tag, None, per_env, base))
        if len(base) > 1:
            pairs += [(tag, env, [per_env[env]], [base[env]]) for env in range(len(base))]
    return pairs


def family_smallest(tags: int, envs: int, seeds: int) -> list[float]:
    """The smallest p of each of the gate's tests with `seeds` runs per tag on every env, none shared with the
    baseline's (the test across envs counts seeds, not runs: it has the same smallest p as one env alone)."""
    return [rlstats.smallest_p(seeds, seeds)] * family_size(tags, envs)


def family_size(tags: int, envs: int) -> int:
    """How many tests the gate makes: per tag, one across envs and, with several envs, one per env."""
    return tags * (envs + 1 if envs > 1 else 1)


def least_seeds(tags: int, envs: int, alpha: float) -> int:
    """The fewest seeds per tag on every env with which every test of the gate could reach alpha."""
    seeds = 1
    while not all(rlstats.reachable(family_smallest(tags, envs, seeds), alpha)):
        seeds += 1
    return seeds


def compare(
    scores: dict[str, list[np.ndarray]],
    baseline: str,
    reps: int,
    confidence: float,
    seed: int,
    seeds: dict[str, list[list[str]]] | None = None,
    left_out: dict[str, int] | None = None,
) -> list[Verdict]:
    """Each tag against the baseline, across envs and on each env, all in one Holm family (the gate's).

    `seeds[tag][env]` labels the runs of `scores[tag][env]`; without it, run i of every tag is seed i (runs of one
    seed number may share luck, so the test leaves their pairs out). `left_out[tag]`: runs left out, which keep a
    tag from passing (the baseline's count for every tag)."""
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    labels = seeds or {tag: rlstats.positions(per_env) for tag, per_env in scores.items()}
    pairs = family_pairs(scores, baseline)
    label_pairs = family_pairs({tag: labels[tag] for tag in scores}, baseline)
    results = [rlstats.improvement_test(x, y, sx, sy) for (_, _, x, y), (_, _, sx, sy) in zip(pairs, label_pairs)]
    adjusted = rlstats.holm([r.p_value for r in results])
    reach = rlstats.reachable([r.smallest_p for r in results], alpha)
    tests = []
    for (_, _, x, y), result, adj, ok in zip(pairs, results, adjusted, reach):
        estimate = rlstats.improvement_estimate(x, y, reps, confidence, rng)
        counts = [(len(a), len(b)) for a, b in zip(x, y)]
        design = (result.n_x, result.n_y, result.shared)
        # the side of 1/2 is the tested statistic's (pairs of one seed left out), the interval the bootstrap's
        side = result.improvement
        tests.append(Test(estimate, result.p_value, adj, counts, design, result.smallest_p, ok, label(adj, side, ok, alpha)))
    left_out = left_out or {}
    verdicts = []
    for tag in dict.fromkeys(tag for tag, _, _, _ in pairs):
        own = [test for (t, _, _, _), test in zip(pairs, tests) if t == tag]
        overall, per_env = own[0], own[1:] or own[:1]
        dropped = left_out.get(tag, 0) + left_out.get(baseline, 0)
        verdicts.append(Verdict(tag, overall, per_env, gate_outcome(overall, per_env, dropped), dropped))
    return verdicts


def rounded_up(value: float, digits: int = 1) -> str:
    """`value` to `digits` decimals, never below it: a detectable shift printed lower than the one found would claim
    more power than the seeds have (3.625 shows as 3.7, not 3.6). A hair of float error is not rounded up."""
    scale = 10**digits
    return f"{math.ceil(value * scale - 1e-9) / scale:.{digits}f}"


@functools.lru_cache(maxsize=64)
def detectable(design: tuple[int, int, int, int], level: float) -> float | None:
    """`rlstats.detectable_shift` for (envs, tag's seeds, baseline's seeds, shared), once per design."""
    return rlstats.detectable_shift(*design, level)


def seeds_text(test: Test) -> str:
    n_x, n_y, shared = test.seeds
    envs = len(test.counts)
    env_text = f"{envs} env" + ("s" if envs > 1 else "")
    text = f"{n_x} vs {n_y} seeds on {env_text}"
    if envs > 1 and any(c != (n_x, n_y) for c in test.counts):
        text += " (the seeds run on every env)"
    if shared:
        text += (
            f", {shared} of them run by both (runs of one seed may share its luck, so only pairs of different seeds "
            "count: run the tag on seeds the baseline did not use)"
        )
    return text


def why_inconclusive(verdict: Verdict, alpha: float, tags: int, envs: int) -> str:
    """Which of the tag's tests its seeds cannot decide, and how many seeds would decide them all."""
    tests = family_size(tags, envs)
    family = f" (Holm over {tests} tests)" if tests > 1 else ""
    least = f"{least_seeds(tags, envs, alpha)} seeds per tag on every env is the least that can"
    overall = verdict.overall
    if not overall.reachable:
        return (
            f"{seeds_text(overall)} can reach p = {overall.smallest_p:.2g} at best, too large for "
            f"α = {alpha:.2g}{family}: no effect of any size can be detected; {least}"
        )
    blind = [test for test in verdict.per_env if not test.reachable]
    if not blind:  # every test can reach alpha: runs were left out
        return (
            f"{verdict.left_out} run{'s' if verdict.left_out > 1 else ''} of it or the baseline left out (stopped early, "
            "not finished, no metric, unreadable or a seed missing on an env: see the warnings): seeds that crash may "
            "be what the change broke, so the gate "
            "does not pass on the rest"
        )
    best = min(test.smallest_p for test in blind)
    return (
        f"{len(blind)} of {len(verdict.per_env)} envs alone can reach p = {best:.2g} at best, too large for "
        f"α = {alpha:.2g}{family}: a regression on one env alone would go unseen; {least}"
    )


def detectable_text(verdict: Verdict, alpha: float, tags: int, envs: int) -> str:
    """What these seed counts can find: the sentence under the verdicts."""
    test = verdict.overall
    if not test.reachable:
        return why_inconclusive(verdict, alpha, tags, envs)
    reach = f"{seeds_text(test)} can reach p = {test.smallest_p:.2g}"
    level = alpha / family_size(tags, envs)  # Holm's strictest step: what every test can count on
    shift = detectable((len(test.counts), *test.seeds), level)
    if shift is None:
        found = "no shift of normal scores on every env is found at least four times in five"
    else:
        shown = rounded_up(shift)
        found = (
            f"a shift of {shown} seed-to-seed standard deviations on every env (PoI "
            f"{rounded_up(rlstats.shift_improvement(float(shown)), 2)}) is found at least four times in five"
        )
    text = f"{reach}; {found}"
    if envs > 1:
        fewest = min(verdict.per_env, key=lambda t: min(t.seeds[:2]))
        one = detectable((1, *fewest.seeds), level)
        text += (
            "; on one env alone, no shift is found at least four times in five"
            if one is None
            else f"; on one env alone (the one with the fewest seeds), a shift of {rounded_up(one)} standard deviations"
        )
    return text + " (10,000 simulated draws of independent normal scores, at α divided by the number of tests)"


# ---------------------------------------------------------------- Markdown


def interval(estimate: rlstats.Estimate) -> str:
    bounds = f"[{estimate.low:.2f}, {estimate.high:.2f}]" if estimate.defined else "[undefined: one seed]"
    return f"{estimate.value:.2f} {bounds}"


def normalization_note(
    env_ids: list[str], lows: list[float], highs: list[float], sources: dict[str, str], lower_is_better: bool
) -> str:
    def shown(value: float) -> str:
        return f"{oriented(value, lower_is_better) + 0.0:.4g}"  # + 0.0: no "-0"

    parts = [f"{env} {shown(low)} → 0, {shown(high)} → 1 ({sources[env]})" for env, low, high in zip(env_ids, lows, highs)]
    direction = " Lower scores are better (`--lower-is-better`)." if lower_is_better else ""
    return f"Scores are normalised per env: {'; '.join(parts)}.{direction}"


TEST_NOTE = (
    'p: two-sided, of "the mean PoI is 1/2", whatever the score distributions and seed counts (hit-or-miss seeds, '
    "heavy tails, unequal spreads, ties) and whatever a seed's runs share (its luck on every env; the tag's and the "
    "baseline's runs of one seed number): the seed is the unit, so the test uses the seeds run on every env and "
    "leaves out pairs of runs of one seed; the mean PoI's distance from 1/2 is compared, by the matched-pairs bound "
    "(Hoeffding, 1963; Markov's inequality on (|u| - c)+), with the most spread mean of fair coin flips, one per pair "
    "of independent seeds (the fewer group's seeds when the groups share none, half the shared seeds when they share "
    "all); computed exactly, no random draws."
)


def gate_note(tags: int, envs: int, alpha: float) -> str:
    tests = family_size(tags, envs)
    where = "across envs and on each env" if envs > 1 else "on its env"
    return (
        f"Holm p: adjusted over the gate's {tests} test{'s' if tests != 1 else ''} (each tag {where}). A test is a "
        f"**regression** when its Holm p ≤ {alpha:.2g} and its PoI is below 0.5, an **improvement** when above, "
        f"**inconclusive** when its seed counts cannot reach p ≤ {alpha:.2g} even at a complete separation, and "
        "otherwise shows **no detectable difference**. **Gate**: a tag fails (*regression*) when it regressed across "
        "envs or on any env, is *inconclusive* when any of its tests is, and otherwise passes."
    )


def cell(text: str) -> str:
    """Text inside a Markdown table cell: a `|` would end the cell."""
    return text.replace("|", "\\|")


def verdict_section(
    verdicts: list[Verdict],
    estimates: dict[str, dict[str, rlstats.Estimate]],
    baseline: str,
    env_ids: list[str],
    confidence: float,
    reps: int,
    note: str,
    metric: str,
    window: int,
) -> str:
    alpha = 1 - confidence
    level = f"{confidence:.0%}"
    tags, envs = len(verdicts), len(env_ids)

    def iqm(tag: str) -> str:
        return interval(estimates[tag]["IQM"]) if estimates else "—"

    lines = [
        "## Across envs",
        "",
        f"Each run's score is the mean of its last {window} `{metric}` values. {note} IQM: the mean of the middle half "
        f"of the normalised run scores, every env weighing the same. PoI: the probability that a run of the tag beats "
        f"a run of the baseline `{baseline}` on the same env (ties half), averaged over envs. Brackets: {level} "
        f"intervals from {reps} stratified-bootstrap draws (runs resampled within each env); they describe the "
        f"scores, the verdicts do not use them. {TEST_NOTE} {gate_note(tags, envs, alpha)}",
        "",
        "| tag | IQM (normalised) | PoI over baseline | p | Holm p | across envs | gate |",
        "|---|---|---|---|---|---|---|",
        f"| {cell(baseline)} | {iqm(baseline)} | — | — | — | baseline | — |",
    ]
    for v in verdicts:
        t = v.overall
        lines.append(
            f"| {cell(v.tag)} | {iqm(v.tag)} | {interval(t.improvement)} | {t.p_value:.3g} | {t.adjusted:.3g} | "
            f"{t.label} | {v.gate} |"
        )
    if verdicts:
        lines += ["", "What these seeds can detect:", ""]
        lines += [f"- `{v.tag}`: {detectable_text(v, alpha, tags, envs)}." for v in verdicts]
        lines += [
            "",
            "## Per env",
            "",
            "The same test on each env alone, Holm p from the same family: an env is called different only when it "
            "stands out after looking at every env and tag."
            + (" With one env, this is the test across envs." if envs == 1 else ""),
            "",
            "| tag | env id | seeds | PoI over baseline | p | Holm p | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for v in verdicts:
            for env_id, t in zip(env_ids, v.per_env):
                lines.append(
                    f"| {cell(v.tag)} | {cell(env_id)} | {t.counts[0][0]} vs {t.counts[0][1]} | {interval(t.improvement)} | "
                    f"{t.p_value:.3g} | {t.adjusted:.3g} | {t.label} |"
                )
    return "\n".join(lines)


def aggregates_section(estimates: dict[str, dict[str, rlstats.Estimate]], confidence: float) -> str:
    names = list(rlstats.AGGREGATES)
    lines = [
        "## Aggregate scores",
        "",
        f"Normalised scores, {confidence:.0%} stratified-bootstrap intervals. Median: of the envs' mean scores; mean: "
        "of the envs' mean scores; optimality gap: how far runs fall short of 1 on average (lower is better).",
        "",
        "| tag | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    lines += [f"| {cell(tag)} | " + " | ".join(interval(e[name]) for name in names) + " |" for tag, e in estimates.items()]
    return "\n".join(lines)


def unscaled_note(unscaled: list[str], baseline: str) -> str:
    envs = ", ".join(unscaled)
    return (
        f"Scores are not normalised: the baseline `{baseline}` did not improve on {envs} (its final mean is not above "
        f"its start of training), so there is no scale to pool envs on; IQM, aggregate scores and their figures are "
        f"left out (give `--target-scores`). The PoI, the tests and the verdicts do not depend on normalisation."
    )


def left_out_section(left_out: list[LeftOut], short: list[LeftOut], window: int, missing: list[MissingSeed]) -> str:
    if not left_out and not short and not missing:
        return ""
    lines = ["## Runs left out or flagged", ""]
    lines += [f"- left out: `{describe(item.run)}` {item.reason}" for item in left_out]
    lines += [f"- left out of the test across envs: {cell(item.text())}" for item in missing]
    lines += [f"- flagged: `{describe(item.run)}` {item.reason}: its score averages all of them" for item in short]
    return "\n".join(lines)


FIGURE_CAPTIONS = {
    "profile": (
        "Performance profile",
        "Performance profile: for every normalised score τ, the share of runs scoring above it (every env weighing the "
        "same); a curve above another is better at every threshold. Band: stratified-bootstrap interval.",
    ),
    "aggregates": ("Aggregate scores", "Aggregate scores with their intervals (the table above)."),
    "iqm_steps": (
        "IQM over training",
        "IQM over training: at each point, the IQM of the runs' normalised `{metric}` (each run smoothed by a rolling "
        "mean over {smooth} values), with a stratified-bootstrap band.",
    ),
    "curves": (
        "Learning curves",
        "Learning curves: `{metric}` against global step per env, mean across seeds, band ± one std (population); "
        "each run smoothed by a rolling mean over {smooth} values.",
    ),
}


def figures_section(images: dict[str, Path], markdown_path: Path, metric: str, smooth: int) -> str:
    lines = ["## Figures"]
    for name, path in images.items():
        title, caption = FIGURE_CAPTIONS[name]
        link = Path(os.path.relpath(path, markdown_path.parent)).as_posix()
        lines += ["", f"![{title}]({link})", "", caption.format(metric=metric, smooth=smooth)]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def load_runs(args: Args, exp_names: dict[str, set[str]]) -> tuple[list[Run], list[LeftOut]]:
    """The runs found and those left out before any check (W&B runs that have not finished)."""
    if not args.wandb_project_name:
        return local_runs([Path(folder) for folder in args.runs_dir or ["runs"]]), []
    try:
        import wandb

        api = wandb.Api()
    except Exception as e:  # no key, no network, or wandb itself missing
        raise RlopsError(f"cannot reach W&B: {type(e).__name__}: {' '.join(str(e).split())}") from None
    names = set().union(*exp_names.values())
    return wandb_runs(
        api,
        args.wandb_entity,
        args.wandb_project_name,
        names,
        args.metric,
        args.scan_history,
        args.metric_last_n_average_window,
    )


def normalization_targets(args: Args, env_ids: list[str]) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """{env: (score → 0, score → 1)} on the higher-is-better scale, and where each env's pair comes from."""
    given = parse_target_scores(args.target_scores, args.lower_is_better)
    stray = [env for env in given if env not in env_ids]
    if stray:
        raise RlopsError(
            f"--target-scores names {', '.join(stray)}, which is not compared (envs: {', '.join(env_ids)}): "
            "a misspelt env id would leave its env on the baseline's scale unseen"
        )
    targets, sources = {}, {}
    if args.reference_scores:
        found, missing = reference_scores(args.reference_scores, [env for env in env_ids if env not in given])
        if missing:
            raise RlopsError(f"--reference-scores {args.reference_scores} has no scores for {', '.join(missing)}")
        targets |= found
        sources |= {env: f"{args.reference_scores} reference scores" for env in found}
    targets |= given
    sources |= {env: "--target-scores" for env in given}
    for env in env_ids:
        sources.setdefault(env, "the baseline's start and end of training")
    return {
        env: (oriented(lo, args.lower_is_better), oriented(hi, args.lower_is_better)) for env, (lo, hi) in targets.items()
    }, sources


def choose_runs(args: Args) -> tuple[list[Run], list[str], list[LeftOut], list[LeftOut]]:
    """The runs compared after every check, the envs, the runs left out and the runs flagged. A left-out run whose
    tag is unknown (its event files unreadable) has the group "" and keeps every tag from passing."""
    exp_names = exp_names_per_tag(args.exp_names, args.tags)
    loaded, unfinished = load_runs(args, exp_names)
    local = not args.wandb_project_name
    lost = (
        [LeftOut(run, "holds nothing readable") for run in unreadable(loaded, set().union(*exp_names.values()))]
        if local
        else []
    )
    runs = select(loaded, args.tags, exp_names)
    env_ids = args.env_ids or sorted({run.env_id for run in runs if run.group == args.baseline})
    runs = [run for run in runs if run.env_id in env_ids]
    lost = [item for item in lost if item.run.env_id in env_ids]
    lost += select_left_out([item for item in unfinished if item.run.env_id in env_ids], args.tags, exp_names)
    check_coverage(runs, args.tags, env_ids)
    with_metric = check_metric(runs, args.metric)
    lost += [LeftOut(run, f"logged no {args.metric}") for run in runs if run not in with_metric]
    runs = with_metric
    check_finite(runs, args.metric)
    runs, left_out = check_progress(runs, env_ids, args.min_progress, args.strict)
    left_out = lost + left_out
    check_evidence(runs, args.metric)
    runs = check_speeds(runs)
    check_coverage(runs, args.tags, env_ids)  # again: dropping runs may empty a cell
    short = check_window(runs, args.metric, args.metric_last_n_average_window)
    return runs, env_ids, left_out, short


def curves_by_tag(runs: list[Run], tags: list[str], env_ids: list[str], metric: str, lower_is_better: bool) -> dict:
    return {
        tag: [
            [
                [(step, oriented(value, lower_is_better)) for step, value in r.scalars[metric]]
                for r in runs
                if r.group == tag and r.env_id == env
            ]
            for env in env_ids
        ]
        for tag in tags
    }


def output_paths(args: Args) -> tuple[Path, Path]:
    output: Path = args.output_filename
    if output.suffix in (".md", ".png", ".svg"):  # the reference's habit: --output-filename compare.png
        output = output.with_suffix("")
    return output, args.output_markdown or output.with_name(output.name + ".md")


def build(args: Args) -> tuple[str, list[Verdict], list[str]]:
    check_args(args)
    window, metric = args.metric_last_n_average_window, args.metric
    runs, env_ids, left_out, short = choose_runs(args)
    targets, sources = normalization_targets(args, env_ids)
    scores = score_table(runs, args.tags, env_ids, metric, window, args.lower_is_better)
    starts = baseline_starts(runs, args.baseline, env_ids, metric, args.lower_is_better)
    lows, highs, unscaled = normalization(scores, starts, args.baseline, env_ids, targets)
    warn_close_seeds(runs)
    seeds = seed_table(runs, args.tags, env_ids)
    missing = missing_seeds(seeds, env_ids, left_out)
    for item in missing:
        warn(f"{item.text()}: left out of the test across envs, and the gate cannot pass without it")
    unknown = sum(item.run.group not in args.tags for item in left_out)
    dropped = {
        tag: sum(item.run.group == tag for item in left_out)
        + sum(item.tag == tag for item in missing)
        + unknown * (tag != args.baseline)
        for tag in args.tags
    }
    verdicts = compare(scores, args.baseline, args.bootstrap_samples, args.confidence, args.seed, seeds, dropped)

    rng = np.random.default_rng(args.seed + 1)
    output, markdown_path = output_paths(args)
    reps, level = args.bootstrap_samples, args.confidence
    figures, estimates = {}, {}
    if unscaled:
        warn(unscaled_note(unscaled, args.baseline).replace("`", ""))
        note = unscaled_note(unscaled, args.baseline)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            normalized = {tag: rlstats.normalize(per_env, lows, highs) for tag, per_env in scores.items()}
        overflow = [env for i, env in enumerate(env_ids) if not all(np.isfinite(n[i]).all() for n in normalized.values())]
        if overflow:
            raise RlopsError(
                f"normalised scores on {', '.join(overflow)} overflow: the scale's LOW and HIGH "
                f"({', '.join(f'{lows[env_ids.index(e)]:g}, {highs[env_ids.index(e)]:g}' for e in overflow)}) are too "
                "close for these scores; give wider --target-scores"
            )
        estimates = rlfigures.aggregate_estimates(normalized, reps, level, rng)
        curves = curves_by_tag(runs, args.tags, env_ids, metric, args.lower_is_better)
        figures = {
            "profile": rlfigures.performance_profile(normalized, reps, level, rng),
            "aggregates": rlfigures.aggregate_figure(estimates, level),
            "iqm_steps": rlfigures.iqm_over_steps(curves, lows, highs, args.smooth, reps, level, rng),
        }
        note = normalization_note(env_ids, lows, highs, sources, args.lower_is_better)
    column_of: Callable[[Run], str] = lambda run: cell(run.group)  # noqa: E731 - one column per tag
    figures["curves"] = plot_learning_curves(runs, metric, env_ids, args.tags, args.smooth, "std", column_of)
    images = {
        name: rlfigures.save(figure, output if name == "curves" else output.with_name(f"{output.name}_{name}"))[0]
        for name, figure in figures.items()
    }
    sections = [
        report_tables(runs, env_ids, [cell(tag) for tag in args.tags], metric, window, column_of),
        left_out_section(left_out, short, window, missing),
        verdict_section(verdicts, estimates, args.baseline, env_ids, args.confidence, reps, note, metric, window),
        aggregates_section(estimates, args.confidence) if estimates else "",
        figures_section(images, markdown_path, metric, args.smooth),
    ]
    markdown = "\n\n".join(section for section in sections if section)
    write_text(markdown_path, markdown + "\n")
    return markdown, verdicts, env_ids


def exit_code(verdicts: list[Verdict], fail_on_regression: bool) -> int:
    if not fail_on_regression:
        return 0
    if any(v.gate == "regression" for v in verdicts):
        return EXIT_REGRESSION
    if any(v.gate == "inconclusive" for v in verdicts):
        return EXIT_INCONCLUSIVE
    return 0


def numbers(test: Test) -> str:
    return f"PoI {interval(test.improvement)}, p={test.p_value:.3g}, Holm p={test.adjusted:.3g}"


def summary_line(verdict: Verdict, baseline: str, env_ids: list[str], alpha: float, tags: int) -> str:
    """The console's last word on a tag: the gate's outcome first, the verdict across envs beside it."""
    overall, envs = verdict.overall, len(env_ids)
    across = f"across envs: {overall.label} ({numbers(overall)})"
    head = f"rlops: {verdict.tag} vs {baseline}:"
    if verdict.gate == "inconclusive":
        return f"{head} inconclusive ({why_inconclusive(verdict, alpha, tags, envs)})" + (
            f"; {across}" if envs > 1 and overall.reachable else ""
        )
    if envs == 1:
        return f"{head} {overall.label} ({numbers(overall)})"
    if verdict.gate == "regression":
        worse = [(env, test) for env, test in zip(env_ids, verdict.per_env) if test.label == "regression"]
        if not worse:
            return f"{head} regression across envs ({numbers(overall)})"
        where = "; ".join(f"{env} ({numbers(test)})" for env, test in worse)
        return f"{head} regression on {where}; {across}"
    return f"{head} {overall.label} across envs ({numbers(overall)}); no env regressed"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    hint = openrlbenchmark_equivalent(argv)
    if hint:
        print(f"rlops: error: {hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parse_args(Args, argv, prog=PROG)
    try:
        markdown, verdicts, env_ids = build(args)
    except (RlopsError, OSError) as e:
        print(f"rlops: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("rlops: error: out of memory: fewer --bootstrap-samples or fewer runs", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(markdown)
    print()
    for verdict in verdicts:
        print(summary_line(verdict, args.baseline, env_ids, 1 - args.confidence, len(verdicts)))
    return exit_code(verdicts, args.fail_on_regression)


if __name__ == "__main__":
    sys.exit(main())
