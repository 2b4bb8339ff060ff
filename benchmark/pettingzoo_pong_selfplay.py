"""Does self-play learn? ppo_pettingzoo_ma_atari.py on PettingZoo's Pong, read by its episode lengths.

    OMP_NUM_THREADS=1 python benchmark/pettingzoo_pong_selfplay.py run [--total-timesteps 500000] [--seed 1] [-- SCRIPT FLAGS]
    python benchmark/pettingzoo_pong_selfplay.py report RUN_DIR [--bins 5]

One policy plays both paddles, so each player's return stays near 0 however well it plays. What
changes is the length of the games: a random pair misses the ball quickly and a game is short;
players that return the ball make rallies, and games grow longer. `report` splits the run's
finished games (both players' episodes, by the step they ended at) into equal step ranges and
prints the mean episode length in each, then the first range against the last.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmark.benchlib import newest_run_dir, one_thread_env  # noqa: E402
from cleanrl_utils.tensorboard_reader import read_scalars  # noqa: E402

LENGTH_TAGS = ("charts/episodic_length-player0", "charts/episodic_length-player1")


def episode_lengths(run_dir: Path) -> list[tuple[int, float]]:
    """(global step at the end, length in agent steps) of every finished episode of both players, by step."""
    scalars = read_scalars(run_dir)
    return sorted(point for tag in LENGTH_TAGS for point in scalars.get(tag, []))


def length_curve(points: list[tuple[int, float]], total_steps: int, bins: int) -> list[tuple[int, int, int, float]]:
    """(first step, last step, episodes, mean length) for `bins` equal step ranges of the run; empty ranges are left out."""
    edges = [round(total_steps * i / bins) for i in range(bins + 1)]
    curve = []
    for lo, hi in zip(edges, edges[1:]):
        lengths = [length for step, length in points if lo < step <= hi]
        if lengths:
            curve.append((lo, hi, len(lengths), statistics.fmean(lengths)))
    return curve


def report(run_dir: Path, bins: int) -> str:
    points = episode_lengths(run_dir)
    if not points:
        raise SystemExit(f"pettingzoo_pong_selfplay.py: error: {run_dir} has no finished episodes to report")
    total_steps = max(step for tag_points in read_scalars(run_dir).values() for step, _ in tag_points)
    curve = length_curve(points, total_steps, bins)
    lines = ["| agent steps | episodes ended | mean episode length |", "|---|---|---|"]
    lines += [f"| {lo:,}–{hi:,} | {n} | {mean:.0f} |" for lo, hi, n, mean in curve]
    (_, _, _, start), (_, _, _, end) = curve[0], curve[-1]
    lines += ["", f"start {start:.0f} → end {end:.0f} agent steps per game ({end / start:.2f}×)"]
    return "\n".join(lines)


def run(total_timesteps: int, seed: int, out: Path, script_args: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(REPO / "cleanrl" / "ppo_pettingzoo_ma_atari.py"), "--env-id", "pong_v3"]
    command += ["--total-timesteps", str(total_timesteps), "--seed", str(seed), *script_args]
    subprocess.run(command, cwd=out, env=one_thread_env(), check=True, stdout=subprocess.DEVNULL)
    return newest_run_dir(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train, then report")
    run_parser.add_argument("--total-timesteps", type=int, default=500_000, help="agent steps (both players)")
    run_parser.add_argument("--seed", type=int, default=1)
    run_parser.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "pettingzoo_pong_selfplay")
    run_parser.add_argument("script_args", nargs="*", help="more flags for the script, after --")
    report_parser = commands.add_parser("report", help="the episode-length curve of a finished run")
    report_parser.add_argument("run_dir", type=Path)
    for sub in (run_parser, report_parser):
        sub.add_argument("--bins", type=int, default=5, help="equal step ranges of the curve")
    args = parser.parse_args()
    if args.command == "run":
        run_dir = run(args.total_timesteps, args.seed, args.out, args.script_args)
        print(f"run: {run_dir}")
    else:
        run_dir = args.run_dir
    print(report(run_dir, args.bins))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
