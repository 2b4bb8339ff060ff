"""The command line of RLops (`python -m cleanrl_utils.rlops`): its flags and the checks that need no runs.

Only the standard library, tyro and the reference-score names are imported here, so that a bad flag is refused with
one line at once: `rlops.py` calls `refuse_bad_flags` before its imports of numpy, matplotlib and TensorBoard.
"""

import math
import shlex
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import parse_qs

import tyro

from cleanrl_utils.reference_scores import TABLES
from cleanrl_utils.runtime.command_line import parse_args

UNTAGGED = "untagged"  # the group of runs started without WANDB_TAGS
EXIT_BAD_INPUT = 2
PROG = "python -m cleanrl_utils.rlops"


class RlopsError(Exception):
    """Bad input: one `rlops: error:` line on stderr and exit code 2."""


def openrlbenchmark_equivalent(argv: list[str]) -> str | None:
    """For `python -m openrlbenchmark.rlops --filters ...` arguments, the one line that says what to type here."""
    if not any(arg == "--filters" or arg.startswith("--filters=") for arg in argv):
        return None
    values: dict[str, list[str]] = {}
    key = None
    for arg in argv:
        if arg.startswith("--"):
            key, _, inline = arg.partition("=")
            values.setdefault(key, [])
            if inline:
                values[key].append(inline)
        elif key:
            values[key].append(arg)
    query: dict[str, str] = {}
    groups: list[tuple[str, str]] = []  # (exp name, tag)
    for item in values.get("--filters", []):
        name, _, qs = item.partition("?")
        fields = {k: v[-1] for k, v in parse_qs(qs).items()}
        if not name:
            query.update(fields)
        else:
            groups.append((name, fields.get("tag", UNTAGGED)))
    ours = ["python -m cleanrl_utils.rlops"]
    if "we" in query:
        ours += ["--wandb-entity", query["we"]]
    ours += ["--wandb-project-name", query.get("wpn", "PROJECT")]
    if "metric" in query:
        ours += ["--metric", query["metric"]]
    names = list(dict.fromkeys(name for name, _ in groups)) or ["EXP_NAME"]
    if len(names) == 1:
        ours += ["--exp-name", names[0]]
    else:
        for name, _ in groups:
            ours += ["--exp-name", name]
    tags = [tag for _, tag in groups] or ["TAG"]
    ours += ["--tags", *tags, "--baseline", tags[-1]]
    for flag in ("--env-ids", "--output-filename", "--metric-last-n-average-window"):
        if values.get(flag):
            ours += [flag, *values[flag]]
    if "--scan-history" in values:
        ours.append("--scan-history")
    notes = []
    if query.get("ceik", "env_id") != "env_id" or query.get("cen", "exp_name") != "exp_name":
        notes.append("runs must keep the env id and exp name in the config keys env_id and exp_name")
    if "--report" in values:
        notes.append("--report (a W&B report) has no counterpart")
    note = f" ({'; '.join(notes)})" if notes else ""
    return (
        "--filters is openrlbenchmark's form; here the same comparison is: "
        + " ".join(shlex.quote(part) if i else part for i, part in enumerate(ours))
        + note
        + " (docs/get-started/rlops.md shows both side by side)"
    )


def parse_target_scores(items: list[str], lower_is_better: bool) -> dict[str, tuple[float, float]]:
    """{env: (score mapped to 0, score mapped to 1)}; the first must be the worse one, or comparisons would flip."""
    targets = {}
    for item in items:
        env_id, _, bounds = item.partition("=")
        try:
            low, high = (float(v) for v in bounds.split(","))
        except ValueError:
            raise RlopsError(f"--target-scores takes ENV=LOW,HIGH, got {item!r}") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise RlopsError(f"--target-scores {item}: LOW and HIGH must be finite numbers")
        if lower_is_better and not low > high:
            raise RlopsError(
                f"--target-scores {item}: with --lower-is-better the score mapped to 0 ({low:g}) must be above the one "
                f"mapped to 1 ({high:g})"
            )
        if not lower_is_better and not low < high:
            raise RlopsError(
                f"--target-scores {item}: LOW ({low:g}) must be below HIGH ({high:g}), or the normalised scores would "
                "turn a regression into an improvement; if lower scores are better, pass --lower-is-better"
            )
        scale = 1.0 / (high - low) if high != low else math.inf  # Python's floats give inf here, never an error
        if not (math.isfinite(high - low) and math.isfinite(scale)):
            raise RlopsError(f"--target-scores {item}: HIGH - LOW must be a finite number whose inverse is finite too")
        if env_id in targets:
            raise RlopsError(f"--target-scores gives {env_id} twice: give one LOW,HIGH per env")
        targets[env_id] = (low, high)
    return targets


ReferenceTable = Literal[tuple(sorted(TABLES))]  # the published score tables --reference-scores can name


@dataclass
class Args:
    """RLops: did a change make an algorithm worse? Compare tagged groups of runs against a baseline tag."""

    tags: Annotated[list[str], tyro.conf.arg(metavar="TAG [TAG ...]")]
    """groups of runs to compare, by the tags they carry ('untagged': runs without tags)"""
    exp_names: Annotated[
        tyro.conf.UseAppendAction[list[list[str]]], tyro.conf.arg(name="exp-name", metavar="NAME [NAME ...]")
    ] = field(default_factory=list)
    """exp names of the runs; once for every tag, or once per tag (in --tags order); required"""
    baseline: Annotated[str | None, tyro.conf.arg(metavar="TAG", help_behavior_hint="(default: the last of --tags)")] = None
    """the tag the others are compared with; with one tag, only its tables and figures"""
    env_ids: Annotated[
        list[str] | None, tyro.conf.arg(metavar="ENV_ID [ENV_ID ...]", help_behavior_hint="(default: the baseline's)")
    ] = None
    """envs to compare"""
    metric: str = "charts/episodic_return"
    """scalar tag compared"""
    lower_is_better: bool = False
    """the metric is better when lower (a loss, a time): tests turn around"""
    metric_last_n_average_window: Annotated[int, tyro.conf.arg(metavar="N")] = 100
    """each run's score: the mean of its last N values of the metric"""
    output_filename: Annotated[Path, tyro.conf.arg(metavar="PATH")] = Path("compare")
    """writes PATH.md, PATH.png/.svg (learning curves) and PATH_profile, PATH_aggregates, PATH_iqm_steps .png/.svg"""
    output_markdown: Annotated[Path | None, tyro.conf.arg(metavar="FILE", help_behavior_hint="")] = None
    """write the Markdown here instead of PATH.md"""
    runs_dir: Annotated[list[str] | None, tyro.conf.arg(metavar="DIR [DIR ...]", help_behavior_hint="(default: runs)")] = None
    """folders of TensorBoard runs (kept as text: Path('') would read the current folder)"""
    wandb_project_name: Annotated[str | None, tyro.conf.arg(metavar="PROJECT", help_behavior_hint="")] = None
    """read the finished runs of this W&B project instead of local folders"""
    wandb_entity: Annotated[str | None, tyro.conf.arg(metavar="ENTITY", help_behavior_hint="(default: your own)")] = None
    """W&B entity of the project"""
    scan_history: bool = False
    """W&B: read every logged value; without it the curves use 500 sampled rows and the scores the last N values
    read whole (local runs are always read whole)"""
    target_scores: Annotated[list[str], tyro.conf.arg(metavar="ENV=LOW,HIGH [ENV=LOW,HIGH ...]")] = field(default_factory=list)
    """normalise ENV's scores so that LOW → 0 and HIGH → 1 (e.g. random and expert returns)"""
    reference_scores: Annotated[ReferenceTable | None, tyro.conf.arg(help_behavior_hint="")] = None  # type: ignore[valid-type]
    """normalise by published scores: atari-human maps each game's random score to 0 and human score to 1"""
    min_progress: Annotated[float, tyro.conf.arg(metavar="SHARE")] = 0.95
    """leave out runs whose last step is below SHARE of the furthest run on their env"""
    strict: bool = False
    """a run that stopped early is an error, not left out"""
    confidence: float = 0.95
    """level of the intervals; the tests' alpha is 1 minus it"""
    bootstrap_samples: Annotated[int, tyro.conf.arg(metavar="N")] = 5000
    """bootstrap draws of the intervals, at most 1,000,000 (the test takes none)"""
    seed: int = 0
    """seed of the bootstrap draws"""
    smooth: int = 5
    """curves: rolling mean over this many values per run"""
    fail_on_regression: bool = False
    """exit 1 when a tag regressed (across envs or on any env), else 3 when a test of the gate is inconclusive or runs
    were left out"""


MAX_BOOTSTRAP_SAMPLES = 1_000_000  # each draw holds every run's score: more would not fit in memory on many runs


def control_characters(text: str) -> bool:
    """Whether `text` holds a newline, tab or other control character: it would split table rows and summary lines."""
    return any(unicodedata.category(char) == "Cc" for char in text)


def empty_flag(args: Args) -> str | None:
    """The first list flag given without a value or with an empty entry: an unset `$DIRS` would otherwise read ./runs
    (no value) or the whole current folder ('')."""
    given = [("--tags", args.tags), ("--runs-dir", args.runs_dir), ("--env-ids", args.env_ids)]
    given += [("--exp-name", names) for names in args.exp_names]
    return next((flag for flag, values in given if values is not None and (not values or "" in values)), None)


def repeated(values: list[str]) -> list[str]:
    return sorted({value for value in values if values.count(value) > 1})


def check_args(args: Args) -> None:
    if not args.exp_names or not args.tags:
        raise RlopsError("--exp-name and --tags are needed: the runs to compare and the tags that group them")
    empty = empty_flag(args)
    if empty:
        raise RlopsError(
            f"{empty} is given no value or an empty one (an unset shell variable?): name what it stands for, or leave "
            "the flag out"
        )
    odd = [tag for tag in [*args.tags, args.baseline or ""] if control_characters(tag)]
    if odd:
        raise RlopsError(f"tag {odd[0]!r} holds a control character (a newline, tab, ...): tags name table rows")
    if repeated(args.tags):
        raise RlopsError(f"--tags repeats {', '.join(map(repr, repeated(args.tags)))}: each group counts once")
    if args.env_ids and repeated(args.env_ids):
        raise RlopsError(
            f"--env-ids repeats {', '.join(repeated(args.env_ids))}: an env's runs count once, or the same seeds would "
            "count as more evidence"
        )
    if len(args.tags) == 1 and (args.baseline is not None or args.fail_on_regression):
        given = "--baseline" if args.baseline is not None else "--fail-on-regression"
        raise RlopsError(
            f"{given} with the one tag {args.tags[0]!r} compares nothing: give the tags to compare with it "
            "(one tag alone, without these flags, gives its tables and figures)"
        )
    if args.baseline is None:
        args.baseline = args.tags[-1]
    if args.baseline not in args.tags:
        raise RlopsError(f"--baseline {args.baseline!r} is not one of --tags")
    if args.metric_last_n_average_window < 1 or args.bootstrap_samples < 1 or args.smooth < 1:
        raise RlopsError("--metric-last-n-average-window, --bootstrap-samples and --smooth must be at least 1")
    if args.bootstrap_samples > MAX_BOOTSTRAP_SAMPLES:
        raise RlopsError(
            f"--bootstrap-samples {args.bootstrap_samples} is more than {MAX_BOOTSTRAP_SAMPLES:,}: the draws would not "
            "fit in memory (5,000 gives intervals to about 0.01)"
        )
    if not args.output_filename.name or not (args.output_markdown is None or args.output_markdown.name):
        flag = "--output-filename" if not args.output_filename.name else "--output-markdown"
        raise RlopsError(
            f"{flag} needs a file name, got {str(args.output_filename if flag == '--output-filename' else args.output_markdown)!r}"
        )
    if not 0 < args.confidence < 1:
        raise RlopsError(f"--confidence must lie between 0 and 1, got {args.confidence}")
    if not 0 <= args.min_progress <= 1:
        raise RlopsError(f"--min-progress must lie between 0 and 1, got {args.min_progress}")
    if args.runs_dir and args.wandb_project_name:
        raise RlopsError("--runs-dir and --wandb-project-name are two sources of runs: give one")
    if args.wandb_entity and not args.wandb_project_name:
        raise RlopsError("--wandb-entity needs --wandb-project-name")
    if args.reference_scores and args.lower_is_better:
        raise RlopsError("--reference-scores are returns, higher is better: they do not go with --lower-is-better")


def refuse_bad_flags(argv: list[str]) -> None:
    """End the program with one `rlops: error:` line and exit code 2 when the flags alone are bad: openrlbenchmark's
    `--filters` form, what the parser refuses, what `check_args` refuses, malformed `--target-scores`."""
    hint = openrlbenchmark_equivalent(argv)
    if hint:
        print(f"rlops: error: {hint}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    args = parse_args(Args, argv, prog=PROG, warn=False)  # main parses again and shows tyro's warnings, once
    try:
        check_args(args)
        parse_target_scores(args.target_scores, args.lower_is_better)
    except RlopsError as e:
        print(f"rlops: error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
