"""Does the Transformer-XL memory matter? ppo_trxl.py on ProofofMemory-v0 with memory length 16 and 1.

    OMP_NUM_THREADS=1 python benchmark/trxl_proof_of_memory.py [--seeds 1 2 3] [--total-timesteps 25000]

Runs the published ProofofMemory-v0 hyperparameters for each seed, once with the full memory (16 steps:
the whole episode) and once with memory length 1 (each step sees only itself: no memory), one run at a
time, and prints a Markdown table of the mean return of each run's last 20 episodes and its wall time.
With memory the agent can reach the cued end (return 1); without, it can only guess (mean about 0).
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[1]
# the reference's hyperparameters for ProofofMemory-v0
PUBLISHED = (
    "--env-id", "ProofofMemory-v0", "--num-envs", "16", "--num-steps", "128", "--num-minibatches", "8",
    "--update-epochs", "4", "--trxl-num-layers", "4", "--trxl-num-heads", "1", "--trxl-dim", "64",
    "--trxl-positional-encoding", "none", "--vf-coef", "0.1", "--max-grad-norm", "0.5", "--init-lr", "3.0e-4",
    "--init-ent-coef", "0.001", "--clip-coef", "0.2",
)  # fmt: skip


def run(seed: int, memory_length: int, total_timesteps: int, cwd: Path) -> tuple[float, float]:
    """(mean return of the last 20 episodes, wall seconds) of one training run."""
    cwd.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, str(REPO / "cleanrl" / "ppo_trxl" / "ppo_trxl.py"), *PUBLISHED, "--seed", str(seed),
        "--total-timesteps", str(total_timesteps), "--trxl-memory-length", str(memory_length),
    ]  # fmt: skip
    start = time.time()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.time() - start
    (run_dir,) = sorted((cwd / "runs").glob(f"ProofofMemory-v0__ppo_trxl__{seed}__*"))
    returns = [r for _, r in read_scalars(run_dir)["charts/episodic_return"]]
    return sum(returns[-20:]) / len(returns[-20:]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=25000)
    parser.add_argument("--out", type=Path, default=Path("trxl_proof_of_memory"), help="folder the runs write to")
    args = parser.parse_args()
    print("| memory length | seed | mean return, last 20 episodes | wall time (s) |")
    print("|---|---|---|---|")
    for memory_length in (16, 1):
        for seed in args.seeds:
            mean_return, wall = run(seed, memory_length, args.total_timesteps, args.out / f"memory{memory_length}")
            print(f"| {memory_length} | {seed} | {mean_return:.2f} | {wall:.0f} |", flush=True)


if __name__ == "__main__":
    main()
