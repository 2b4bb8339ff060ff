"""Steps per second of our ppo.py / dqn.py against Stable-Baselines3 with the same hyperparameters.

    python benchmark/speed_vs_sb3.py --total-timesteps 500000

Runs every script in turn (never two at once, so they do not share the CPU), on CartPole-v1,
and prints a Markdown table: each one's steps per second and our speed-up over SB3. Ours is
the final `charts/SPS` the run logged; SB3's is total steps over the time `learn()` took.
Both leave out interpreter start-up and imports. A shared or virtual machine drifts by 10%
and more over minutes, so the runs alternate (ours, SB3, ours, SB3, ...) for `--rounds`
rounds and the table gives the median of each, with every round's value beside it.
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cleanrl_utils.tensorboard_reader import read_scalars  # noqa: E402


def run(command: list[str], cwd: Path) -> str:
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"speed_vs_sb3: {' '.join(command)} failed with exit code {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout


def ours_sps(algo: str, total_timesteps: int, seed: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run(
            [
                sys.executable,
                str(REPO / "cleanrl" / f"{algo}.py"),
                "--total-timesteps",
                str(total_timesteps),
                "--seed",
                str(seed),
            ],
            Path(tmp),
        )
        (run_dir,) = (Path(tmp) / "runs").iterdir()
        sps = read_scalars(run_dir).get("charts/SPS")
        if not sps:
            raise SystemExit(
                f"speed_vs_sb3: {algo}.py logged no charts/SPS in {total_timesteps} steps (too few to start learning?)"
            )
        return sps[-1][1]


def sb3_sps(algo: str, total_timesteps: int, seed: int, threads: int) -> float:
    out = run(
        [sys.executable, str(REPO / "benchmark" / "sb3_baselines.py"), algo]
        + ["--total-timesteps", str(total_timesteps), "--seed", str(seed), "--threads", str(threads)],
        REPO,
    )
    return float(re.search(r"SPS: (\d+)", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", choices=["ppo", "dqn"], default=["ppo", "dqn"])
    parser.add_argument("--total-timesteps", type=int, default=500000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per pair; medians are reported")
    parser.add_argument("--sb3-one-thread", action="store_true", help="also time SB3 with torch limited to one thread")
    args = parser.parse_args()
    if args.rounds <= 0 or args.total_timesteps <= 0:
        parser.error("--rounds and --total-timesteps must be positive")

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.0f} ({', '.join(f'{v:.0f}' for v in values)})"

    print("| algorithm | ours: median SPS (each round) | SB3: median SPS (each round) | speed-up of the medians |")
    print("|---|---|---|---|")
    variants = [(0, "default threads")] + ([(1, "1 thread")] if args.sb3_one_thread else [])
    for algo in args.algos:
        ours: list[float] = []
        theirs: dict[int, list[float]] = {threads: [] for threads, _ in variants}
        for _ in range(args.rounds):  # ours, then each SB3 variant, round after round
            ours.append(ours_sps(algo, args.total_timesteps, args.seed))
            for threads, _ in variants:
                theirs[threads].append(sb3_sps(algo, args.total_timesteps, args.seed, threads))
        for threads, label in variants:
            ratio = statistics.median(ours) / statistics.median(theirs[threads])
            row = f"| {algo} ({args.total_timesteps} steps, SB3 {label}) | {cell(ours)} | {cell(theirs[threads])} | {ratio:.2f}x |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
