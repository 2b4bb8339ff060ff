"""Steps per second of our ppo.py / dqn.py against Stable-Baselines3 with the same hyperparameters.

    python benchmark/speed_vs_sb3.py --total-timesteps 500000

Runs every script in turn (never two at once, so they do not share the CPU), on CartPole-v1,
and prints a Markdown table: each one's steps per second and our speed-up over SB3. Ours is
the final `charts/SPS` the run logged; SB3's is total steps over the time `learn()` took.
Both leave out interpreter start-up and imports.
"""

import argparse
import re
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
    parser.add_argument("--sb3-one-thread", action="store_true", help="also time SB3 with torch limited to one thread")
    args = parser.parse_args()

    print("| algorithm | ours (SPS) | SB3 (SPS) | speed-up |")
    print("|---|---|---|---|")
    for algo in args.algos:
        ours = ours_sps(algo, args.total_timesteps, args.seed)
        for threads, label in [(0, "default threads")] + ([(1, "1 thread")] if args.sb3_one_thread else []):
            theirs = sb3_sps(algo, args.total_timesteps, args.seed, threads)
            print(
                f"| {algo} ({args.total_timesteps} steps, SB3 {label}) | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
