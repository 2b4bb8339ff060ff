"""Summarise the episodic returns of finished runs, read back from their TensorBoard events.

    python -m cleanrl_utils.summarize runs/CartPole-v1__dqn__* --last 100 --window 50000

prints, per run, the mean of the last N episodes and the best mean over any window of W
steps, then the mean ± std of each across the runs (seeds). `--curve 100000` adds the
learning curve as a table: the mean return of the episodes that ended in each 100k steps.
"""

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.tensorboard_reader import Series, read_scalars


@dataclass(frozen=True)
class RunSummary:
    run: str
    episodes: int
    last_mean: float
    best_window_mean: float
    best_window_start: int
    sps: float | None


def last_mean(series: Series, last: int) -> float:
    """Mean of the last `last` values (all of them when there are fewer)."""
    if not series:
        raise ValueError("no episodes were logged")
    values = [v for _, v in series[-last:]]
    return sum(values) / len(values)


def best_window_mean(series: Series, window: int) -> tuple[float, int]:
    """Highest mean over the episodes that end within `window` consecutive steps, and where it starts.

    Windows start at a logged step and must fit inside the logged range, so a window near the
    end is never judged on a handful of episodes. A run shorter than one window is one window.
    """
    if not series:
        raise ValueError("no episodes were logged")
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


def curve(series: Series, bucket: int) -> dict[int, float]:
    """Mean value per `bucket` steps, keyed by the bucket's end step (buckets with no episode are left out)."""
    sums: dict[int, list[float]] = {}
    for step, value in series:
        sums.setdefault((step // bucket + 1) * bucket, []).append(value)
    return {end: sum(values) / len(values) for end, values in sorted(sums.items())}


def summarize_run(run_dir: Path, last: int, window: int, tag: str = "charts/episodic_return") -> RunSummary:
    scalars = read_scalars(run_dir)
    if tag not in scalars:
        raise ValueError(f"{run_dir} has no {tag!r} scalars")
    series = scalars[tag]
    window_mean, window_start = best_window_mean(series, window)
    sps = scalars.get("charts/SPS")
    return RunSummary(
        run_dir.name, len(series), last_mean(series, last), window_mean, window_start, sps[-1][1] if sps else None
    )


def mean_std(values: list[float], digits: int = 2) -> str:
    """`mean ± std` of `values`, std being the population standard deviation (0 for a single value)."""
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {std:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cleanrl_utils.summarize", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="TensorBoard run folders (runs/<run_name>)")
    parser.add_argument("--last", type=int, default=100, help="episodes in the final mean (default 100)")
    parser.add_argument("--window", type=int, default=50000, help="steps in the best-window mean (default 50000)")
    parser.add_argument("--tag", default="charts/episodic_return", help="scalar to summarise")
    parser.add_argument("--curve", type=int, default=0, help="also print mean returns per this many steps (0: no curve)")
    args = parser.parse_args(argv)
    if args.last <= 0 or args.window <= 0 or args.curve < 0:
        parser.error("--last and --window must be positive, --curve non-negative")
    try:
        summaries = [summarize_run(d, args.last, args.window, args.tag) for d in args.run_dirs]
    except (FileNotFoundError, ValueError) as e:
        print(f"summarize: error: {e}", file=sys.stderr)
        return 2
    print(f"| run | episodes | last-{args.last} mean | best {args.window}-step window mean (from step) | final SPS |")
    print("|---|---|---|---|---|")
    for s in summaries:
        sps = f"{s.sps:.0f}" if s.sps is not None else "-"
        print(f"| {s.run} | {s.episodes} | {s.last_mean:.2f} | {s.best_window_mean:.2f} ({s.best_window_start}) | {sps} |")
    print(
        f"| **{len(summaries)} runs** | | **{mean_std([s.last_mean for s in summaries])}** "
        f"| {mean_std([s.best_window_mean for s in summaries])} | |"
    )
    if args.curve:
        curves = [curve(read_scalars(d)[args.tag], args.curve) for d in args.run_dirs]
        ends = sorted(set().union(*curves))
        print(f"\n| steps up to | {' | '.join(s.run for s in summaries)} |")
        print("|---" * (len(summaries) + 1) + "|")
        for end in ends:
            cells = " | ".join(f"{c[end]:.1f}" if end in c else "-" for c in curves)
            print(f"| {end} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
