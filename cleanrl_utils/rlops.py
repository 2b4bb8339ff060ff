"""RLops: did a change make an algorithm worse? Compare tagged groups of runs against a baseline tag.

    python -m cleanrl_utils.rlops --exp-name ppo --tags v2-base my-change --baseline v2-base \\
        --env-ids CartPole-v1 Acrobot-v1 --output-filename compare

Runs are found in local TensorBoard folders (`--runs-dir`, default `runs`; a run's tags are the
`WANDB_TAGS` it was started with) or in a Weights & Biases project (`--wandb-project-name`). Per env,
it prints each tag's mean ± std over seeds of every run's last-N average, runtime and median SPS; across
envs, the IQM of normalised scores and each tag's probability of improvement over the baseline, with
95% stratified-bootstrap confidence intervals; and a verdict per tag. `--fail-on-regression` exits 1
when a tag is a regression. The Markdown and the learning curves go to `<output>.md/.png/.svg`.
"""

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cleanrl_utils import rlstats
from cleanrl_utils.report import (
    SPS_TAG,
    ReportError,
    Run,
    collect_runs,
    curves_section,
    plot_learning_curves,
    report_tables,
    save_figure,
)
from cleanrl_utils.summarize import last_mean

UNTAGGED = "untagged"  # the group of runs started without WANDB_TAGS
STEP_KEY = "global_step"  # the step of W&B runs synced from TensorBoard
SAMPLED_HISTORY_ROWS = 500  # W&B history rows read per run without --scan-history


class RlopsError(Exception):
    """Bad input: one `rlops: error:` line on stderr and exit code 2."""


@dataclass(frozen=True)
class Verdict:
    tag: str
    iqm: rlstats.Estimate
    improvement: rlstats.Estimate | None  # None for the baseline itself
    p_value: float | None
    label: str
    per_env: list[float] | None = None  # the probability of improvement on each env, in --env-ids order


# ---------------------------------------------------------------- where runs come from


def local_runs(runs_dirs: list[Path]) -> list[Run]:
    try:
        return collect_runs(runs_dirs, split_by_dir=False)
    except ReportError as e:
        raise RlopsError(str(e)) from None


def wandb_runs(api, entity: str | None, project: str, exp_names: set[str], metric: str, scan_history: bool) -> list[Run]:
    """The runs of a W&B project, as the local reader gives them: `api` is a `wandb.Api()`."""
    path = f"{entity}/{project}" if entity else project
    runs = []
    try:
        for remote in api.runs(path, filters={"config.exp_name": {"$in": sorted(exp_names)}}):
            config = remote.config
            if config.get("exp_name") not in exp_names or "env_id" not in config:
                continue
            scalars = {}
            for tag in (metric, SPS_TAG):
                keys = [STEP_KEY, tag]
                rows = (
                    remote.scan_history(keys=keys)
                    if scan_history
                    else remote.history(keys=keys, samples=SAMPLED_HISTORY_ROWS, pandas=False)
                )
                series = [(int(row[STEP_KEY]), float(row[tag])) for row in rows if row.get(tag) is not None]
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
                )
            )
    except Exception as e:  # the network boundary: wandb raises its own, requests' and HTTP errors
        raise RlopsError(f"cannot read W&B project {path}: {type(e).__name__}: {' '.join(str(e).split())}") from None
    if not runs:
        raise RlopsError(f"W&B project {path} has no runs with exp_name {', '.join(sorted(exp_names))}")
    return runs


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
    """One copy of each matching run per tag, its `group` set to that tag (a run can carry several tags)."""
    chosen = [replace(run, group=tag) for tag in tags for run in runs if has_tag(run, tag) and run.exp_name in exp_names[tag]]
    for tag in tags:
        if not any(run.group == tag for run in chosen):
            seen = sorted({t for run in runs for t in run.tags} | ({UNTAGGED} if any(not r.tags for r in runs) else set()))
            raise RlopsError(
                f"no runs of exp name {', '.join(sorted(exp_names[tag]))} carry tag {tag!r}; tags found: {', '.join(seen) or 'none'}"
            )
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
    """The runs that logged `metric`; the others are left out with a warning."""
    kept = [run for run in runs if run.scalars.get(metric)]
    if not kept:
        tags = sorted({tag for run in runs for tag in run.scalars})
        raise RlopsError(f"no selected run has {metric!r} values; tags found: {', '.join(tags) or 'none'}")
    for run in runs:
        if not run.scalars.get(metric):
            print(f"rlops: warning: {run.path} has no {metric!r} values: left out", file=sys.stderr)
    return kept


# ---------------------------------------------------------------- scores and verdicts


def parse_target_scores(items: list[str]) -> dict[str, tuple[float, float]]:
    targets = {}
    for item in items:
        env_id, _, bounds = item.partition("=")
        try:
            low, high = (float(v) for v in bounds.split(","))
        except ValueError:
            raise RlopsError(f"--target-scores takes ENV=LOW,HIGH, got {item!r}") from None
        if high == low:
            raise RlopsError(f"--target-scores {item}: LOW and HIGH must differ")
        targets[env_id] = (low, high)
    return targets


def score_table(runs: list[Run], tags: list[str], env_ids: list[str], metric: str, window: int) -> dict[str, list[np.ndarray]]:
    """{tag: [each env's array of per-run last-`window` averages]} in `env_ids` order."""
    return {
        tag: [
            np.array([last_mean(r.scalars[metric], window) for r in runs if r.group == tag and r.env_id == env_id])
            for env_id in env_ids
        ]
        for tag in tags
    }


def normalization(
    scores: dict[str, list[np.ndarray]], baseline: str, env_ids: list[str], targets: dict[str, tuple[float, float]]
) -> tuple[list[float], list[float]]:
    """(low, high) per env: the target scores when given, else the worst observed score and the baseline's mean.

    When the baseline's mean is the worst score too, the best observed score is the high end; when every
    score is the same, each maps to 1.
    """
    lows, highs = [], []
    for index, env_id in enumerate(env_ids):
        if env_id in targets:
            low, high = targets[env_id]
        else:
            every = np.concatenate([per_env[index] for per_env in scores.values()])
            low, high = float(every.min()), float(scores[baseline][index].mean())
            if high <= low:
                high = float(every.max())
            if high <= low:
                low = high - 1.0
        lows.append(low)
        highs.append(high)
    return lows, highs


def verdict_label(improvement: rlstats.Estimate, p_value: float, alpha: float) -> str:
    """Regression / improvement only when the interval lies wholly on one side of 0.5 and the permutation test agrees."""
    if not improvement.defined:
        return "no detectable difference (interval undefined: a task has a single seed)"
    if improvement.high < 0.5 and p_value < alpha:
        return "regression"
    if improvement.low > 0.5 and p_value < alpha:
        return "improvement"
    return "no detectable difference"


def compare(
    scores: dict[str, list[np.ndarray]],
    baseline: str,
    lows: list[float],
    highs: list[float],
    reps: int,
    confidence: float,
    seed: int,
) -> list[Verdict]:
    rng = np.random.default_rng(seed)
    normalized = {tag: rlstats.normalize(per_env, lows, highs) for tag, per_env in scores.items()}
    verdicts = []
    for tag, per_env in normalized.items():
        estimate = rlstats.iqm_estimate(per_env, reps, confidence, rng)
        if tag == baseline:
            verdicts.append(Verdict(tag, estimate, None, None, "baseline"))
            continue
        improvement = rlstats.improvement_estimate(per_env, normalized[baseline], reps, confidence, rng)
        p_value = rlstats.permutation_p_value(per_env, normalized[baseline], reps, rng)
        label = verdict_label(improvement, p_value, 1 - confidence)
        per_env_poi = [float(rlstats.probability_of_improvement(a, b)) for a, b in zip(per_env, normalized[baseline])]
        verdicts.append(Verdict(tag, estimate, improvement, p_value, label, per_env_poi))
    return verdicts


# ---------------------------------------------------------------- Markdown


def interval(estimate: rlstats.Estimate) -> str:
    bounds = f"[{estimate.low:.2f}, {estimate.high:.2f}]" if estimate.defined else "[undefined: one seed]"
    return f"{estimate.value:.2f} {bounds}"


def normalization_note(env_ids: list[str], lows: list[float], highs: list[float], targets: dict) -> str:
    parts = [f"{env} {low:.4g} → 0, {high:.4g} → 1" for env, low, high in zip(env_ids, lows, highs)]
    source = (
        "`--target-scores`"
        if all(env in targets for env in env_ids)
        else "the worst score observed on the env (→ 0) and the baseline's mean (→ 1), unless given by `--target-scores`"
    )
    return f"Scores are normalised per env by {source}: {'; '.join(parts)}."


def aggregate_section(
    verdicts: list[Verdict],
    baseline: str,
    env_ids: list[str],
    confidence: float,
    reps: int,
    note: str,
    metric: str,
    window: int,
) -> str:
    level = f"{confidence:.0%}"
    lines = [
        "## Across envs",
        "",
        f"Each run's score is the mean of its last {window} `{metric}` values. {note} "
        f"IQM: the mean of the middle half of all normalised run scores. PoI: the probability that a run of the tag "
        f"beats a run of the baseline `{baseline}` on the same env, averaged over envs. Brackets: {level} confidence "
        f"intervals from {reps} stratified-bootstrap draws (runs resampled within each env); p: a two-sided "
        f"permutation test of the PoI (tag labels shuffled within each env). A tag is a **regression** when its "
        f"PoI interval lies wholly below 0.5 and p < {1 - confidence:.2g}, an **improvement** when it lies wholly "
        f"above 0.5 and p < {1 - confidence:.2g}, and otherwise shows **no detectable difference**.",
        "",
        "| tag | IQM (normalised) | PoI over baseline | p | verdict |",
        "|---|---|---|---|---|",
    ]
    for v in verdicts:
        poi = interval(v.improvement) if v.improvement else "—"
        p = f"{v.p_value:.3g}" if v.p_value is not None else "—"
        lines.append(f"| {v.tag} | {interval(v.iqm)} | {poi} | {p} | {v.label} |")
    compared = [v for v in verdicts if v.per_env is not None]
    if compared and len(env_ids) > 1:  # where the aggregate comes from
        lines += [
            "",
            f"The PoI over `{baseline}` on each env (the aggregate is their mean):",
            "",
            "| tag | " + " | ".join(env_ids) + " |",
            "|---" * (len(env_ids) + 1) + "|",
        ]
        lines += [f"| {v.tag} | " + " | ".join(f"{poi:.2f}" for poi in v.per_env) + " |" for v in compared]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cleanrl_utils.rlops", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--exp-name",
        action="append",
        nargs="+",
        required=True,
        metavar="NAME",
        dest="exp_names",
        help="exp names of the runs; once for every tag, or once per tag (in --tags order)",
    )
    parser.add_argument(
        "--tags",
        nargs="+",
        required=True,
        metavar="TAG",
        help=f"groups of runs to compare, by the tags they carry ({UNTAGGED!r}: runs without tags)",
    )
    parser.add_argument(
        "--baseline",
        metavar="TAG",
        help="the tag the others are compared with (default: the last of --tags); with one tag, only its tables and curves",
    )
    parser.add_argument("--env-ids", nargs="+", metavar="ENV_ID", help="envs to compare (default: every env of the baseline)")
    parser.add_argument("--metric", default="charts/episodic_return", help="scalar tag compared (default: %(default)s)")
    parser.add_argument(
        "--metric-last-n-average-window",
        type=int,
        default=100,
        metavar="N",
        help="each run's score: the mean of its last N values of the metric (default: %(default)s)",
    )
    parser.add_argument(
        "--output-filename",
        type=Path,
        default=Path("compare"),
        metavar="PATH",
        help="writes PATH.md, PATH.png and PATH.svg (default: %(default)s)",
    )
    parser.add_argument("--runs-dir", nargs="+", type=Path, metavar="DIR", help="folders of TensorBoard runs (default: runs)")
    parser.add_argument("--wandb-project-name", help="read the runs from this W&B project instead of local folders")
    parser.add_argument("--wandb-entity", help="W&B entity of the project (default: your own)")
    parser.add_argument(
        "--scan-history",
        action="store_true",
        help=f"W&B: read every logged value, not a sample of {SAMPLED_HISTORY_ROWS} (local runs are always read whole)",
    )
    parser.add_argument(
        "--target-scores",
        nargs="+",
        default=[],
        metavar="ENV=LOW,HIGH",
        help="normalise ENV's scores so that LOW → 0 and HIGH → 1 (e.g. random and expert returns)",
    )
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="confidence level of the intervals (default: %(default)s)"
    )
    parser.add_argument("--bootstrap-samples", type=int, default=5000, metavar="N", help="bootstrap and permutation draws")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation draws")
    parser.add_argument("--smooth", type=int, default=5, help="learning curves: rolling mean over this many values per run")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any tag is a regression")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    if len(set(args.tags)) != len(args.tags):
        raise RlopsError("--tags repeats a tag")
    args.baseline = args.baseline or args.tags[-1]
    if args.baseline not in args.tags:
        raise RlopsError(f"--baseline {args.baseline!r} is not one of --tags")
    if args.metric_last_n_average_window < 1 or args.bootstrap_samples < 1 or args.smooth < 1:
        raise RlopsError("--metric-last-n-average-window, --bootstrap-samples and --smooth must be at least 1")
    if not 0 < args.confidence < 1:
        raise RlopsError(f"--confidence must lie between 0 and 1, got {args.confidence}")
    if args.runs_dir and args.wandb_project_name:
        raise RlopsError("--runs-dir and --wandb-project-name are two sources of runs: give one")
    if args.wandb_entity and not args.wandb_project_name:
        raise RlopsError("--wandb-entity needs --wandb-project-name")


def load_runs(args: argparse.Namespace, exp_names: dict[str, set[str]]) -> list[Run]:
    if not args.wandb_project_name:
        return local_runs(args.runs_dir or [Path("runs")])
    try:
        import wandb

        api = wandb.Api()
    except Exception as e:  # no key, no network, or wandb itself missing
        raise RlopsError(f"cannot reach W&B: {type(e).__name__}: {' '.join(str(e).split())}") from None
    names = set().union(*exp_names.values())
    return wandb_runs(api, args.wandb_entity, args.wandb_project_name, names, args.metric, args.scan_history)


def build(args: argparse.Namespace) -> tuple[str, list[Verdict]]:
    check_args(args)
    targets = parse_target_scores(args.target_scores)
    exp_names = exp_names_per_tag(args.exp_names, args.tags)
    runs = select(load_runs(args, exp_names), args.tags, exp_names)
    env_ids = args.env_ids or sorted({run.env_id for run in runs if run.group == args.baseline})
    runs = [run for run in runs if run.env_id in env_ids]
    check_coverage(runs, args.tags, env_ids)
    runs = check_metric(runs, args.metric)
    check_coverage(runs, args.tags, env_ids)  # again: dropping runs without the metric may empty a cell
    window = args.metric_last_n_average_window
    scores = score_table(runs, args.tags, env_ids, args.metric, window)
    lows, highs = normalization(scores, args.baseline, env_ids, targets)
    verdicts = compare(scores, args.baseline, lows, highs, args.bootstrap_samples, args.confidence, args.seed)

    column_of: Callable[[Run], str] = lambda run: run.group  # noqa: E731 - one column per tag
    note = normalization_note(env_ids, lows, highs, targets)
    markdown = "\n\n".join(
        [
            report_tables(runs, env_ids, args.tags, args.metric, window, column_of),
            aggregate_section(
                verdicts, args.baseline, env_ids, args.confidence, args.bootstrap_samples, note, args.metric, window
            ),
        ]
    )
    figure = plot_learning_curves(runs, args.metric, env_ids, args.tags, args.smooth, "std", column_of)
    output: Path = args.output_filename
    if output.suffix in (".md", ".png", ".svg"):  # the reference's habit: --output-filename compare.png
        output = output.with_suffix("")
    images = save_figure(figure, output, ["png", "svg"])
    markdown += "\n\n" + curves_section(images[0], output.with_name(output.name + ".md"), args.metric, args.smooth, "std")
    output.with_name(output.name + ".md").write_text(markdown + "\n")
    return markdown, verdicts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        markdown, verdicts = build(args)
    except (RlopsError, OSError) as e:
        print(f"rlops: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(markdown)
    print()
    for v in verdicts:
        if v.improvement is not None:
            print(f"rlops: {v.tag} vs {args.baseline}: {v.label} (PoI {interval(v.improvement)}, p={v.p_value:.3g})")
    regressions = [v.tag for v in verdicts if v.label == "regression"]
    return 1 if regressions and args.fail_on_regression else 0


if __name__ == "__main__":
    sys.exit(main())
