"""Our continuous-control scripts against Stable-Baselines3, side by side: same machine, same budget,
same hyperparameters where the two share them (see benchmark/sb3_baselines.py), 3 seeds each.

    python benchmark/continuous_vs_sb3.py run                # a queue: ours then SB3, per comparison and seed
    python benchmark/continuous_vs_sb3.py run                # a second queue (another shell) shares the work
    python benchmark/continuous_vs_sb3.py speed --rounds 2   # steps per second, on an otherwise idle machine
    python benchmark/continuous_vs_sb3.py report             # the Markdown table for the docs

Every run uses one torch thread (`OMP_NUM_THREADS=1`): on a 2-core machine, run two queues. A
run's result is a JSON file in `--out` (returns of every finished training episode, steps per
second); a queue skips the runs that are done or that another queue has taken (its `.running`
file), so queues share the work and a stopped benchmark continues where it stopped. Our runs also
keep their TensorBoard folders there.

The table scores each (algorithm, env) with the mean over seeds of each seed's last 10 training
episodes, and passes it when ours is at least SB3's mean minus one standard deviation (over
seeds). Ours' SPS is the last `charts/SPS` the script logged (steps over training-loop time);
SB3's is steps over the time `learn()` took. The learning runs share the machine, so their
speeds depend on what else ran at the time; `speed` measures it apart: short runs of the same
configuration (1000 random steps, then 3000 learning steps; PPO: 8 iterations), ours and SB3
alternating, one process at a time. The table's speed columns come from those runs when present.
"""

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmark.benchlib import claim, one_thread_env, summarize_run  # noqa: E402
from cleanrl_utils.summarize import mean_std  # noqa: E402

SEEDS = (1, 2, 3)
LAST_EPISODES = 10


@dataclass(frozen=True)
class Comparison:
    script: str  # our file in cleanrl/
    sb3_algo: str  # the model of benchmark/sb3_baselines.py it is compared with
    env_id: str
    total_timesteps: int
    learning_starts: int | None = None  # given to both sides; None keeps each one's default (the same)

    @property
    def ours_args(self) -> list[str]:
        args = ["--env-id", self.env_id, "--total-timesteps", str(self.total_timesteps)]
        return args + (["--learning-starts", str(self.learning_starts)] if self.learning_starts is not None else [])

    def result_name(self, impl: str, seed: int) -> str:
        name = self.script if impl == "ours" else self.sb3_algo
        return f"{impl}__{name}__{self.env_id}__{self.total_timesteps}__{seed}.json"


# Cheapest first: Pendulum-v1, PPO, then the long Hopper-v4 runs (SAC's two critics and an actor update
# every step make it the costliest). 20k Pendulum steps leave no room for the default 25k (TD3/DDPG) or
# 5k (SAC) random steps: both sides start learning after 1k there.
COMPARISONS = [
    Comparison("sac_continuous_action", "sac", "Pendulum-v1", 20_000, learning_starts=1000),
    Comparison("td3_continuous_action", "td3", "Pendulum-v1", 20_000, learning_starts=1000),
    Comparison("ddpg_continuous_action", "ddpg", "Pendulum-v1", 20_000, learning_starts=1000),
    Comparison("ppo_continuous_action", "ppo_continuous", "Hopper-v4", 200_000),
    Comparison("rpo_continuous_action", "ppo_continuous", "Hopper-v4", 200_000),
    # the alternative env for PPO/RPO (both reach the 1000-step cap there), run beside Hopper
    Comparison("ppo_continuous_action", "ppo_continuous", "InvertedPendulum-v4", 200_000),
    Comparison("rpo_continuous_action", "ppo_continuous", "InvertedPendulum-v4", 200_000),
    Comparison("ddpg_continuous_action", "ddpg", "Hopper-v4", 100_000),
    Comparison("td3_continuous_action", "td3", "Hopper-v4", 100_000),
    Comparison("sac_continuous_action", "sac", "Hopper-v4", 100_000),
]


def run_sb3(comparison: Comparison, seed: int, result: Path) -> None:
    command = [sys.executable, str(REPO / "benchmark" / "sb3_baselines.py"), comparison.sb3_algo]
    command += ["--env-id", comparison.env_id, "--total-timesteps", str(comparison.total_timesteps)]
    command += ["--seed", str(seed), "--threads", "1", "--json", str(result)]
    if comparison.learning_starts is not None:
        command += ["--learning-starts", str(comparison.learning_starts)]
    subprocess.run(command, env=one_thread_env(), check=True, stdout=subprocess.DEVNULL)


def run_ours(comparison: Comparison, seed: int, result: Path) -> None:
    workdir = result.with_suffix("")
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(REPO / "cleanrl" / f"{comparison.script}.py"), *comparison.ours_args, "--seed", str(seed)]
    subprocess.run(command, cwd=workdir, env=one_thread_env(), check=True, stdout=subprocess.DEVNULL)
    summarize_ours(comparison, seed, result)


def summarize_ours(comparison: Comparison, seed: int, result: Path) -> None:
    """The result file of one of our runs, from the TensorBoard events it wrote."""
    (run_dir,) = sorted((result.with_suffix("") / "runs").iterdir())[-1:]
    summarize_run(run_dir, result, impl="ours", algo=comparison.script, env_id=comparison.env_id, seed=seed)


def speed_comparison(comparison: Comparison) -> Comparison:
    """The same algorithm and env on a short budget that is mostly learning steps."""
    if comparison.sb3_algo == "ppo_continuous":
        return Comparison(comparison.script, comparison.sb3_algo, comparison.env_id, 8 * 2048)
    return Comparison(comparison.script, comparison.sb3_algo, comparison.env_id, 4000, learning_starts=1000)


def run_speed(out: Path, rounds: int, only: list[str] | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for comparison in COMPARISONS:
        if only and not {comparison.script, comparison.sb3_algo, comparison.env_id} & set(only):
            continue
        short = speed_comparison(comparison)
        for round_ in range(1, rounds + 1):
            for impl in ("ours", "sb3"):  # alternating: a drift of the machine's speed hits both
                result = out / f"speed__{short.result_name(impl, round_)}"
                if not result.exists():
                    print(f"speed {impl}: {short.script if impl == 'ours' else short.sb3_algo} {short.env_id} round {round_}")
                    (run_ours if impl == "ours" else run_sb3)(short, 1, result)


def load_speeds(out: Path, comparison: Comparison, impl: str) -> list[float]:
    short = speed_comparison(comparison)
    name = short.result_name(impl, 0).removesuffix("__0.json")
    return [json.loads(p.read_text())["sps"] for p in sorted(out.glob(f"speed__{name}__*.json"))]


def run_queue(impls: list[str], out: Path, only: list[str] | None) -> None:
    """Every run not done or taken yet, in order: comparison, seed, then ours before SB3 (with both sides)."""
    out.mkdir(parents=True, exist_ok=True)
    for comparison in COMPARISONS:
        if only and not {comparison.script, comparison.sb3_algo, comparison.env_id} & set(only):
            continue
        for seed in SEEDS:
            for impl in impls:
                result = out / comparison.result_name(impl, seed)
                if not claim(result):
                    continue
                name = comparison.script if impl == "ours" else comparison.sb3_algo
                print(f"{impl}: {name} {comparison.env_id} seed {seed}", flush=True)
                (run_ours if impl == "ours" else run_sb3)(comparison, seed, result)


def load(out: Path, comparison: Comparison, impl: str) -> tuple[list[float], list[float]]:
    """(each seed's mean of its last 10 episodes, each seed's SPS) of the finished runs."""
    scores, speeds = [], []
    for seed in SEEDS:
        path = out / comparison.result_name(impl, seed)
        if path.exists():
            result = json.loads(path.read_text())
            scores.append(statistics.fmean(result["episodic_returns"][-LAST_EPISODES:]))
            speeds.append(result["sps"])
    return scores, speeds


def report(out: Path) -> str:
    lines = [
        f"| algorithm | env | steps | ours: last-{LAST_EPISODES} return | SB3 | ours ≥ SB3 − 1 sd | ours: median SPS | SB3 | speed-up |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for comparison in COMPARISONS:
        (ours, ours_sps), (sb3, sb3_sps) = load(out, comparison, "ours"), load(out, comparison, "sb3")
        if not ours or not sb3:
            continue
        ours_mean, sb3_mean, sb3_sd = statistics.fmean(ours), statistics.fmean(sb3), statistics.pstdev(sb3)
        quiet_ours, quiet_sb3 = load_speeds(out, comparison, "ours"), load_speeds(out, comparison, "sb3")
        if quiet_ours and quiet_sb3:
            ours_sps, sb3_sps = quiet_ours, quiet_sb3
        learns = "yes" if ours_mean >= sb3_mean - sb3_sd else "**no**"
        speed_up = statistics.median(ours_sps) / statistics.median(sb3_sps)
        lines.append(
            f"| {comparison.script} | {comparison.env_id} | {comparison.total_timesteps // 1000}k "
            f"| {mean_std(ours, 1)} ({len(ours)} seeds) | {mean_std(sb3, 1)} ({len(sb3)} seeds) "
            f"| {learns} | {statistics.median(ours_sps):.0f} | {statistics.median(sb3_sps):.0f} | {speed_up:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "speed", "report"])
    parser.add_argument("--rounds", type=int, default=2, help="speed: alternating rounds per comparison")
    parser.add_argument("--impl", choices=["ours", "sb3", "both"], default="both", help="run: which side's runs to do")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "continuous_vs_sb3")
    parser.add_argument(
        "--only", nargs="+", help="only these scripts, SB3 algorithms or env ids (e.g. sac_continuous_action td3 Hopper-v4)"
    )
    args = parser.parse_args()
    if args.command == "run":
        run_queue(["ours", "sb3"] if args.impl == "both" else [args.impl], args.out, args.only)
    elif args.command == "speed":
        run_speed(args.out, args.rounds, args.only)
    else:
        print(report(args.out))


if __name__ == "__main__":
    main()
