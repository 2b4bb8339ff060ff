"""Results tables and learning curves, in Markdown, from the TensorBoard runs of many scripts, envs and seeds.

    python -m cleanrl_utils.report --runs-dir runs --metric-last-n-average-window 100 --plot-dir plots

finds every run under the given folders, groups the runs by env id (rows) and exp name
(columns) and prints three tables, each cell the mean ± std across seeds: the mean of each
run's last N values of a metric, the wall-clock runtime, and the median SPS. `--plot-dir`
also saves the learning curves: one panel per env id, one line per exp name.
`--split-by-dir` keeps each given folder apart as a group of its own (its folder name), the
way W&B tags tell runs of two code versions apart. `--per-run` adds each run's own line (its
last-N mean, its best mean over any window of steps, its final SPS), and `--curve-table-steps N`
each run's learning curve as a table of mean values per N steps.
"""

import itertools
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import tyro
from matplotlib.figure import Figure

from cleanrl_utils.runtime import atomic
from cleanrl_utils.runtime.command_line import parse_args
from cleanrl_utils.tensorboard_reader import Series, read_run

EVENT_FILE_GLOB = "events.out.tfevents.*"
SPS_TAG = "charts/SPS"
GRID_POINTS = 200
FIGURE_NAME = "learning_curves"
STD_NOTE = "std is the population standard deviation (ddof=0)"


class ReportError(Exception):
    """Bad input: reported as one line on stderr with exit code 2."""


@dataclass(frozen=True)
class Run:
    path: Path
    env_id: str
    exp_name: str
    seed: str
    group: str  # the --split-by-dir label; "" when all runs are pooled
    scalars: dict[str, Series]
    runtime_minutes: float | None
    tags: tuple[str, ...] = ()  # WANDB_TAGS of the run (the runner's --auto-tag sets them), as the script logged them
    num_envs: int | None = None  # its hyperparameter num_envs, when it logged one (RLops checks seed spacing with it)

    @property
    def column(self) -> str:
        return column_label(self.exp_name, self.group)


def column_label(exp_name: str, group: str) -> str:
    return f"{exp_name} ({group})" if group else exp_name


def by_column(run: Run) -> str:
    """Where a run goes in the tables and plots of this report (rlops passes its own: the run's tag)."""
    return run.column


def parse_tags(text: str) -> tuple[str, ...]:
    """The tags of a comma-separated `WANDB_TAGS` value, blanks dropped."""
    return tuple(tag.strip() for tag in text.split(",") if tag.strip())


@dataclass(frozen=True)
class Curve:
    steps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def warn(message: str) -> None:
    print(f"report: warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------- statistics of one series


def last_mean(series: Series, last: int) -> float:
    """Mean of the last `last` values (all of them when there are fewer)."""
    if not series:
        raise ValueError("no values were logged")
    values = [v for _, v in series[-last:]]
    return sum(values) / len(values)


def best_window_mean(series: Series, window: int) -> tuple[float, int]:
    """Highest mean over the values logged within `window` consecutive steps, and the step where it starts.

    Windows start at a logged step and must fit inside the logged range, so a window near the
    end is never judged on a handful of values. A run shorter than one window is one window.
    """
    if not series:
        raise ValueError("no values were logged")
    last_step = series[-1][0]
    if series[0][0] + window > last_step + 1:
        return sum(v for _, v in series) / len(series), series[0][0]
    best, best_start, hi, total = float("-inf"), series[0][0], 0, 0.0
    for lo, (start, _) in enumerate(series):
        if start + window > last_step + 1:
            break
        while hi < len(series) and series[hi][0] < start + window:
            total += series[hi][1]
            hi += 1
        mean = total / (hi - lo)
        if mean > best:
            best, best_start = mean, start
        total -= series[lo][1]
    return best, best_start


def curve_by_steps(series: Series, bucket: int) -> dict[int, float]:
    """Mean value per `bucket` steps, keyed by the bucket's end step (buckets with no value are left out)."""
    sums: dict[int, list[float]] = {}
    for step, value in series:
        sums.setdefault((step // bucket + 1) * bucket, []).append(value)
    return {end: sum(values) / len(values) for end, values in sorted(sums.items())}


def mean_std(values: Sequence[float], digits: int = 2) -> str:
    """`mean ± std` of `values`, std being the population standard deviation (0 for a single value)."""
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {std:.{digits}f}"


# ---------------------------------------------------------------- finding and reading runs


def find_run_dirs(runs_dir: Path) -> list[Path]:
    """Folders under `runs_dir` (itself included) holding event files; a folder inside a run is part of that run."""
    if not runs_dir.is_dir():
        raise ReportError(f"no such folder: {runs_dir}")
    run_dirs: list[Path] = []
    # Sorted, a folder comes before the folders inside it.
    for folder in sorted({f.parent for f in runs_dir.rglob(EVENT_FILE_GLOB)}):
        if not set(folder.parents) & set(run_dirs):
            run_dirs.append(folder)
    return run_dirs


def parse_hyperparameters(table: str) -> dict[str, str]:
    """{param: value} from the `|param|value|` Markdown table the scripts log as `hyperparameters`."""
    params = {}
    for line in table.splitlines():
        line = line.strip()
        if len(line) < 2 or not (line.startswith("|") and line.endswith("|")):
            continue
        key, _, value = line[1:-1].partition("|")
        key = key.strip()
        if key != "param" and not set(key) <= set("-: "):  # skip the header and separator rows
            params[key] = value.strip()
    return params


def parse_run_name(name: str) -> dict[str, str]:
    """env_id, exp_name and seed from a `{env_id}__{exp_name}__{seed}__{time}` run name; {} if it is not one."""
    parts = name.split("__")
    if len(parts) < 4:
        return {}
    return {"env_id": parts[0], "exp_name": "__".join(parts[1:-2]), "seed": parts[-2]}


def load_run(run_dir: Path, name: str, group: str) -> Run | None:
    """The run in `run_dir`, named by its hyperparameters table or else by `name`; None (with a warning) if neither says."""
    events = read_run(run_dir)
    hyperparameters = parse_hyperparameters(events.texts.get("hyperparameters", ""))
    info = parse_run_name(name) | {k: v for k, v in hyperparameters.items() if k in ("env_id", "exp_name", "seed")}
    if "env_id" not in info or "exp_name" not in info:
        warn(f"skipping {run_dir}: no hyperparameters table and its name is not env_id__exp_name__seed__time")
        return None
    runtime = None
    if events.first_wall_time is not None and events.last_wall_time is not None:
        runtime = (events.last_wall_time - events.first_wall_time) / 60
    tags = parse_tags(events.texts.get("tags", ""))
    num_envs = count_or_none(hyperparameters.get("num_envs"))
    return Run(
        run_dir, info["env_id"], info["exp_name"], info.get("seed", "?"), group, events.scalars, runtime, tags, num_envs
    )


def count_or_none(value: object) -> int | None:
    """A positive whole number from a logged hyperparameter (`4`, `"4"`, `4.0`), else None: absent or not a count."""
    try:
        number = float(str(value))  # W&B and JSON configs may give 4.0
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number.is_integer() and number > 0 else None


def group_labels(runs_dirs: list[Path], split_by_dir: bool) -> list[str]:
    if not split_by_dir:
        return [""] * len(runs_dirs)
    labels = [d.resolve().name for d in runs_dirs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ReportError(f"--split-by-dir needs folders with different names; given twice: {', '.join(repeated)}")
    return labels


def collect_runs(runs_dirs: list[Path], split_by_dir: bool) -> list[Run]:
    """Every run under `runs_dirs`, each read once even when two folders reach it."""
    runs: list[Run] = []
    seen: set[Path] = set()
    for runs_dir, label in zip(runs_dirs, group_labels(runs_dirs, split_by_dir)):
        found = find_run_dirs(runs_dir)
        if not found:
            raise ReportError(f"no TensorBoard runs found under {runs_dir}")
        for run_dir in found:
            if run_dir.resolve() in seen:
                continue
            seen.add(run_dir.resolve())
            # The path below the runs folder is the run name, "/" of env ids like ALE/Pong-v5 included.
            name = run_dir.relative_to(runs_dir).as_posix()
            run = load_run(run_dir, run_dir.name if name == "." else name, label)
            if run is not None:
                runs.append(run)
    return runs


def select_runs(
    runs: list[Run], exp_names: list[str] | None, env_ids: list[str] | None, groups: list[str] | None
) -> list[Run]:
    """The runs that pass every given filter (a filter left out lets every run through)."""

    def keep(value: str, wanted: list[str] | None) -> bool:
        return wanted is None or value in wanted

    return [r for r in runs if keep(r.exp_name, exp_names) and keep(r.env_id, env_ids) and keep(r.group, groups)]


def ordered(found: Iterable[str], wanted: list[str] | None) -> list[str]:
    """The names that have runs: in the order the user asked for them, else sorted."""
    names = set(found)
    return [name for name in wanted if name in names] if wanted else sorted(names)


def table_columns(runs: list[Run], exp_names: list[str] | None, groups: list[str]) -> list[str]:
    """Column labels: exp names in order, each followed by its groups in the order the folders were given."""
    present = {r.column for r in runs}
    columns = []
    for exp_name in ordered((r.exp_name for r in runs), exp_names):
        for group in groups:
            column = column_label(exp_name, group)
            if column in present and column not in columns:
                columns.append(column)
    return columns


# ---------------------------------------------------------------- tables


def median_sps(run: Run) -> float | None:
    values = [v for _, v in run.scalars.get(SPS_TAG, [])]
    return statistics.median(values) if values else None


def table_section(
    title: str,
    description: str,
    runs: list[Run],
    rows: list[str],
    columns: list[str],
    value: Callable[[Run], float | None],
    digits: int,
    column_of: Callable[[Run], str] = by_column,
) -> str:
    """A Markdown section: heading, caption, and an env id × column table of `value` as mean ± std across seeds."""
    cells: dict[tuple[str, str], list[float]] = {(row, column): [] for row in rows for column in columns}
    for run in runs:
        run_value = value(run)
        if run_value is not None and (run.env_id, column_of(run)) in cells:
            cells[run.env_id, column_of(run)].append(run_value)
    counts = {len(values) for values in cells.values() if values}
    # The seed count goes into every cell only when cells differ; otherwise the caption says it once.
    show_counts = len(counts) > 1
    seeds_note = f"{counts.pop()} seeds per cell" if len(counts) == 1 else "n = number of seeds in the cell"

    def cell(values: list[float]) -> str:
        if not values:
            return "—"
        text = mean_std(values, digits)
        return f"{text} (n={len(values)})" if show_counts else text

    lines = [
        f"## {title}",
        "",
        f"{description} Each cell: mean ± std across seeds; {STD_NOTE}; {seeds_note}.",
        "",
        "| env id | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    lines += [f"| {row} | " + " | ".join(cell(cells[row, column]) for column in columns) + " |" for row in rows]
    return "\n".join(lines)


def report_tables(
    runs: list[Run], rows: list[str], columns: list[str], metric: str, last: int, column_of: Callable[[Run], str] = by_column
) -> str:
    def metric_mean(run: Run) -> float | None:
        series = run.scalars.get(metric)
        return last_mean(series, last) if series else None

    sections = [
        table_section(
            "Results",
            f"`{metric}`: each run's mean of its last {last} values.",
            runs,
            rows,
            columns,
            metric_mean,
            digits=2,
            column_of=column_of,
        ),
        table_section(
            "Runtime (minutes)",
            "Wall-clock minutes from each run's first logged value to its last.",
            runs,
            rows,
            columns,
            lambda run: run.runtime_minutes,
            digits=2,
            column_of=column_of,
        ),
        table_section(
            "Median SPS",
            f"Each run's median of its `{SPS_TAG}` values (environment steps per second).",
            runs,
            rows,
            columns,
            median_sps,
            digits=0,
            column_of=column_of,
        ),
    ]
    return "\n\n".join(sections)


def load_published(path: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """Published results, `{exp_name: {env_id: [mean, std]}}` in a JSON file."""
    try:
        data = json.loads(path.read_text())
        return {exp: {env: (float(m), float(sd)) for env, (m, sd) in envs.items()} for exp, envs in data.items()}
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
        raise ReportError(f"{path}: expected {{exp_name: {{env_id: [mean, std]}}}} in JSON ({e})") from e


def published_section(runs: list[Run], rows: list[str], columns: list[str], metric: str, last: int, published: dict) -> str:
    """Our mean ± std beside the published one, and whether ours reaches the published mean minus two published std."""
    lines = [
        "## Against published results",
        "",
        f"`{metric}`, each run's mean of its last {last} values, then mean ± std across seeds ({STD_NOTE})."
        " *Reached* means our mean is at least the published mean minus two published standard deviations.",
        "",
        "| env id | exp name | ours | published | reached |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        for column in columns:
            exp_name = next((run.exp_name for run in runs if run.column == column), column)
            reference = published.get(exp_name, {}).get(row)
            values = [
                last_mean(run.scalars[metric], last)
                for run in runs
                if run.env_id == row and run.column == column and run.scalars.get(metric)
            ]
            if reference is None or not values:
                continue
            mean, std = reference
            reached = "yes" if statistics.fmean(values) >= mean - 2 * std else "**no**"
            lines.append(f"| {row} | {column} | {mean_std(values, 2)} | {mean:.2f} ± {std:.2f} | {reached} |")
    return "\n".join(lines)


def seed_order(seed: str) -> tuple[int, str]:
    return (int(seed), "") if seed.isdecimal() else (sys.maxsize, seed)


def runs_in_table_order(runs: list[Run], rows: list[str], columns: list[str]) -> list[Run]:
    """The runs of the tables' cells, row by row, column by column, seed by seed."""
    placed = [run for run in runs if run.env_id in rows and run.column in columns]
    return sorted(placed, key=lambda r: (rows.index(r.env_id), columns.index(r.column), seed_order(r.seed), r.path.name))


def per_run_section(runs: list[Run], metric: str, last: int, window: int) -> str:
    """One line per run: how many values it logged, the mean of its last `last`, its best `window`-step mean."""
    lines = [
        "## Per run",
        "",
        f"`{metric}`: the number of values each run logged, the mean of its last {last}, and its best mean over the "
        f"values logged within any {window} consecutive steps (with the step where that window starts); then the "
        f"run's last `{SPS_TAG}` value.",
        "",
        f"| run | values | last-{last} mean | best {window}-step window mean (from step) | final SPS |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        series = run.scalars.get(metric)
        if not series:
            continue
        best, start = best_window_mean(series, window)
        sps = run.scalars.get(SPS_TAG)
        final_sps = f"{sps[-1][1]:.0f}" if sps else "—"
        lines.append(
            f"| {run.path.name} | {len(series)} | {last_mean(series, last):.2f} | {best:.2f} ({start}) | {final_sps} |"
        )
    return "\n".join(lines)


def curve_table_section(runs: list[Run], metric: str, bucket: int) -> str:
    """Each run's learning curve as numbers: the mean of the values logged in each `bucket` steps, one column a run."""
    runs = [run for run in runs if run.scalars.get(metric)]
    curves = [curve_by_steps(run.scalars[metric], bucket) for run in runs]
    ends = sorted(set().union(*curves))
    lines = [
        "## Learning curve by steps",
        "",
        f"`{metric}`: each run's mean of the values logged in each {bucket} steps, by the step that ends them "
        "(— where a run logged none).",
        "",
        "| steps up to | " + " | ".join(run.path.name for run in runs) + " |",
        "|---" * (len(runs) + 1) + "|",
    ]
    lines += [f"| {end} | " + " | ".join(f"{c[end]:.1f}" if end in c else "—" for c in curves) + " |" for end in ends]
    return "\n".join(lines)


# ---------------------------------------------------------------- learning curves


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last `window` values (over fewer at the start, so nothing is dropped)."""
    sums = np.concatenate(([0.0], np.cumsum(values)))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def common_grid(series_list: list[Series], points: int = GRID_POINTS) -> np.ndarray:
    """Evenly spaced steps from the latest first step to the earliest last step, where every seed has data.

    Seeds whose logged ranges do not overlap get the whole span instead; each step then averages
    only the seeds that cover it.
    """
    firsts = [series[0][0] for series in series_list]
    lasts = [series[-1][0] for series in series_list]
    start, stop = max(firsts), min(lasts)
    if start > stop:
        start, stop = min(firsts), max(lasts)
    return np.linspace(start, stop, points)


def on_grid(series: Series, grid: np.ndarray, smooth: int) -> np.ndarray:
    """The run's (smoothed) values linearly interpolated at `grid`; NaN outside the steps it logged."""
    steps = np.array([step for step, _ in series], dtype=float)
    order = np.argsort(steps, kind="stable")  # a resumed run may log steps out of order
    values = rolling_mean(np.array([value for _, value in series], dtype=float)[order], smooth)
    return np.interp(grid, steps[order], values, left=np.nan, right=np.nan)


def seed_curve(series_list: list[Series], smooth: int, band: str) -> Curve:
    """Mean across seeds on a common grid of steps, with a ± one-std or a min–max band."""
    grid = common_grid(series_list)
    curves = np.array([on_grid(series, grid, smooth) for series in series_list])
    count = np.sum(~np.isnan(curves), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):  # steps no seed covers stay NaN
        mean = np.nansum(curves, axis=0) / count
        if band == "minmax":
            return Curve(grid, mean, np.fmin.reduce(curves, axis=0), np.fmax.reduce(curves, axis=0))
        std = np.sqrt(np.nansum((curves - mean) ** 2, axis=0) / count)  # population std, as in the tables
    return Curve(grid, mean, mean - std, mean + std)


def plot_learning_curves(
    runs: list[Run],
    metric: str,
    rows: list[str],
    columns: list[str],
    smooth: int,
    band: str,
    column_of: Callable[[Run], str] = by_column,
) -> Figure:
    """One panel per env id (up to 3 per row), one line per column with its band across seeds."""
    ncols = min(3, len(rows))
    nrows = math.ceil(len(rows) / ncols)
    figure = Figure(figsize=(5 * ncols, 3.6 * nrows), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False).flatten()
    for ax, env_id in zip(axes, rows):
        for index, column in enumerate(columns):
            series_list = [
                r.scalars[metric] for r in runs if r.env_id == env_id and column_of(r) == column and r.scalars.get(metric)
            ]
            if not series_list:
                continue
            curve = seed_curve(series_list, smooth, band)
            color = f"C{index % 10}"  # the same column has the same colour in every panel
            ax.plot(curve.steps, curve.mean, color=color, label=column)
            ax.fill_between(curve.steps, curve.low, curve.high, color=color, alpha=0.2, linewidth=0)
        ax.set_title(env_id)
        ax.set_xlabel("global step")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(rows) :]:
        figure.delaxes(ax)
    return figure


def save_figure(figure: Figure, stem: Path, formats: list[str]) -> list[Path]:
    """`figure` as `stem.png`, `stem.svg`...: one file per format, folders made as needed, each written whole or not
    at all (an earlier figure stays as it was until the new one is complete)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(f"{stem.name}.{fmt}") for fmt in dict.fromkeys(formats)]
    for path in paths:
        with atomic.atomic_path(path) as tmp:
            figure.savefig(tmp, format=path.suffix[1:])
    return paths


def curves_section(image: Path, output: Path | None, metric: str, smooth: int, band: str) -> str:
    # The link must work from where the Markdown is written.
    link = Path(os.path.relpath(image, output.parent)) if output else image
    band_text = "± one std (population)" if band == "std" else "min to max"
    return "\n".join(
        [
            "## Learning curves",
            "",
            f"![Learning curves]({link.as_posix()})",
            "",
            f"`{metric}` against global step: mean across seeds, band {band_text} across seeds. Each run is "
            f"smoothed by a rolling mean over {smooth} values, then interpolated onto {GRID_POINTS} steps "
            "from the latest first step to the earliest last step among the seeds.",
        ]
    )


# ---------------------------------------------------------------- command line


@dataclass
class Args:
    """Results tables and learning curves, in Markdown, from the TensorBoard runs of many scripts, envs and seeds."""

    runs_dir: Annotated[list[Path], tyro.conf.arg(metavar="DIR [DIR ...]")] = field(default_factory=lambda: [Path("runs")])
    """folders searched for runs; a run's own folder counts too (folders given before any flag count as these)"""
    metric: str = "charts/episodic_return"
    """scalar tag of the results table, the curves and the per-run lines"""
    metric_last_n_average_window: Annotated[int, tyro.conf.arg(aliases=("--last",))] = 100
    """values of the metric averaged per run: its last N"""
    exp_names: Annotated[list[str] | None, tyro.conf.arg(metavar="NAME [NAME ...]")] = None
    """only these exp names, as columns in this order"""
    env_ids: Annotated[list[str] | None, tyro.conf.arg(metavar="ENV_ID [ENV_ID ...]")] = None
    """only these env ids, as rows in this order"""
    split_by_dir: bool = False
    """each runs folder is a group of its own: columns 'exp (folder)'"""
    groups: Annotated[list[str] | None, tyro.conf.arg(metavar="FOLDER [FOLDER ...]")] = None
    """with --split-by-dir: only these groups (folder names), in this order"""
    plot_dir: Annotated[Path | None, tyro.conf.arg(metavar="DIR")] = None
    """save the learning curves here (no plots without it)"""
    formats: Annotated[list[Literal["png", "svg"]], tyro.conf.arg(name="format")] = field(
        default_factory=lambda: ["png", "svg"]
    )
    """image files to save"""
    band: Literal["std", "minmax"] = "std"
    """band around the mean curve: one std across seeds, or their min to max"""
    smooth: int = 5
    """curves: rolling mean over this many values per run (1: none)"""
    output: Annotated[Path | None, tyro.conf.arg(metavar="FILE")] = None
    """also write the Markdown to this file"""
    published: Annotated[Path | None, tyro.conf.arg(metavar="FILE")] = None
    """JSON of published results {exp_name: {env_id: [mean, std]}} to compare against"""
    per_run: bool = False
    """add each run's own line: values logged, last-N mean, best window mean, final SPS"""
    best_window_steps: int = 50000
    """--per-run: steps in the best-window mean"""
    curve_table_steps: int = 0
    """add each run's learning curve as a table of mean values per this many steps (0: no table)"""


def runs_dirs_given_first(argv: Sequence[str]) -> list[str]:
    """`argv` with folders named before any flag (the earlier spelling, `report runs --last 10`) as --runs-dir's."""
    leading = list(itertools.takewhile(lambda word: not word.startswith("-"), argv))
    return ["--runs-dir", *leading, *argv[len(leading) :]] if leading else list(argv)


def parse_report_args(argv: Sequence[str] | None) -> Args:
    argv = sys.argv[1:] if argv is None else argv
    return parse_args(Args, runs_dirs_given_first(argv), prog="python -m cleanrl_utils.report")


def check_args(args: Args) -> None:
    if args.metric_last_n_average_window < 1 or args.smooth < 1:
        raise ReportError("--metric-last-n-average-window and --smooth must be at least 1")
    if args.best_window_steps < 1 or args.curve_table_steps < 0:
        raise ReportError("--best-window-steps must be at least 1 and --curve-table-steps at least 0")
    if not args.runs_dir:
        raise ReportError("--runs-dir needs at least one folder")
    if args.groups and not args.split_by_dir:
        raise ReportError("--groups selects folders of --split-by-dir; add --split-by-dir")


def check_metric(runs: list[Run], metric: str) -> None:
    """Fail if no run logged `metric`; warn about the runs that did not."""
    missing = [run for run in runs if not run.scalars.get(metric)]
    if len(missing) == len(runs):
        tags = sorted({tag for run in runs for tag in run.scalars})
        raise ReportError(f"no run has {metric!r} values; tags found: {', '.join(tags) or 'none'}")
    if missing:
        warn(f"{len(missing)} run(s) have no {metric!r} values and are left out of results and curves: {missing[0].path} …")


def build_report(args: Args) -> str:
    check_args(args)
    last = args.metric_last_n_average_window
    groups = group_labels(args.runs_dir, args.split_by_dir)
    runs = select_runs(collect_runs(args.runs_dir, args.split_by_dir), args.exp_names, args.env_ids, args.groups)
    if not runs:
        raise ReportError("no runs match the given --exp-names / --env-ids / --groups")
    check_metric(runs, args.metric)
    rows = ordered((r.env_id for r in runs), args.env_ids)
    columns = table_columns(runs, args.exp_names, ordered(groups, args.groups) if args.groups else groups)
    markdown = report_tables(runs, rows, columns, args.metric, last)
    if args.published:
        published = load_published(args.published)
        markdown += "\n\n" + published_section(runs, rows, columns, args.metric, last, published)
    if args.per_run:
        in_order = runs_in_table_order(runs, rows, columns)
        markdown += "\n\n" + per_run_section(in_order, args.metric, last, args.best_window_steps)
    if args.curve_table_steps:
        markdown += "\n\n" + curve_table_section(runs_in_table_order(runs, rows, columns), args.metric, args.curve_table_steps)
    if args.plot_dir:
        figure = plot_learning_curves(runs, args.metric, rows, columns, args.smooth, args.band)
        paths = save_figure(figure, args.plot_dir / FIGURE_NAME, args.formats)
        markdown += "\n\n" + curves_section(paths[0], args.output, args.metric, args.smooth, args.band)
    return markdown


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_report_args(argv)
    try:
        markdown = build_report(args)
        if args.output:  # replaced whole: a report stopped mid-write leaves the previous one
            atomic.write_text(args.output, markdown + "\n")
    except (ReportError, OSError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
