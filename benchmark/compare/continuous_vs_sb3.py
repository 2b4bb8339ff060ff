"""Our continuous-control scripts against Stable-Baselines3, side by side: same machine, same budget,
same hyperparameters where the two share them (see benchmark/compare/sb3_baselines.py), 3 seeds each.

    python -m benchmark.compare.continuous_vs_sb3 run --workers 2    # the runs not done yet: ours then SB3, per comparison and seed
    python -m benchmark.compare.continuous_vs_sb3 speed --rounds 2   # steps per second, on an otherwise idle machine
    python -m benchmark.compare.continuous_vs_sb3 report             # the Markdown table for the docs

Every run uses one torch thread (`OMP_NUM_THREADS=1`): on a 2-core machine, two at a time. The runs
go through the project's runner (benchmark/harness.py's queue, logs under `--out`/logs). A run's
result is a JSON file in `--out` (returns of every finished training episode, steps per second);
`run` skips the runs whose result exists, so a stopped benchmark continues where it stopped. Our
runs also keep their TensorBoard folders there.

The table scores each (algorithm, env) with the mean over seeds of each seed's last 10 training
episodes, and passes it when ours is at least SB3's mean minus one standard deviation (over
seeds). Ours' SPS is the last `charts/SPS` the script logged (steps over training-loop time);
SB3's is steps over the time `learn()` took. The learning runs share the machine, so their
speeds depend on what else ran at the time; `speed` measures it apart: short runs of the same
configuration (1000 random steps, then 3000 learning steps; PPO: 8 iterations), ours and SB3
alternating, one process at a time. The table's speed columns come from those runs when present.
"""

import json
import statistics
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import (
    SB3_BASELINES,
    CommandLine,
    QueuedRun,
    markdown_table,
    one_thread_env,
    queue_command,
    report_command,
    run_queue,
    script,
    summarize_run,
)
from cleanrl_utils.report import mean_std

REPO = Path(__file__).resolve().parents[2]

SEEDS = (1, 2, 3)
LAST_EPISODES = 10


@dataclass(frozen=True)
class Comparison:
    script: str  # our file in cleanrl/
    sb3_algo: str  # the model of benchmark/compare/sb3_baselines.py it is compared with
    env_id: str
    total_timesteps: int
    learning_starts: int | None = None  # given to both sides; None keeps each one's default (the same)

    @property
    def budget_args(self) -> tuple[str, ...]:
        """What both sides get besides the env and seed."""
        starts = ("--learning-starts", str(self.learning_starts)) if self.learning_starts is not None else ()
        return ("--total-timesteps", str(self.total_timesteps), *starts)

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


def queued(comparison: Comparison, impl: str, seed: int, result: Path) -> QueuedRun:
    """Our script's run (summarised from its events) or SB3's (benchmark/compare/sb3_baselines.py writes its summary)."""
    if impl == "ours":
        summarize = partial(
            summarize_run, result=result, impl="ours", algo=comparison.script, env_id=comparison.env_id, seed=seed
        )
        return QueuedRun(
            result, script(comparison.script), comparison.budget_args, comparison.env_id, seed, summarize=summarize
        )
    program = (str(SB3_BASELINES), comparison.sb3_algo)
    args = (*comparison.budget_args, "--threads", "1", "--json", str(result))
    return QueuedRun(result, program, args, comparison.env_id, seed)


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
                    if run_queue([queued(short, impl, 1, result)], 1, one_thread_env(), out / "logs"):
                        raise SystemExit(f"continuous_vs_sb3.py: error: a speed run failed (logs under {out / 'logs'})")


def load_speeds(out: Path, comparison: Comparison, impl: str) -> list[float]:
    short = speed_comparison(comparison)
    name = short.result_name(impl, 0).removesuffix("__0.json")
    return [json.loads(p.read_text())["sps"] for p in sorted(out.glob(f"speed__{name}__*.json"))]


def learning_runs(impls: list[str], out: Path, only: list[str] | None) -> list[QueuedRun]:
    """Every learning run, in order: comparison, seed, then ours before SB3 (with both sides)."""
    runs = []
    for comparison in COMPARISONS:
        if only and not {comparison.script, comparison.sb3_algo, comparison.env_id} & set(only):
            continue
        runs += [queued(comparison, impl, seed, out / comparison.result_name(impl, seed)) for seed in SEEDS for impl in impls]
    return runs


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
    rows = []
    for comparison in COMPARISONS:
        (ours, ours_sps), (sb3, sb3_sps) = load(out, comparison, "ours"), load(out, comparison, "sb3")
        if not ours or not sb3:
            continue
        ours_mean, sb3_mean, sb3_sd = statistics.fmean(ours), statistics.fmean(sb3), statistics.pstdev(sb3)
        quiet_ours, quiet_sb3 = load_speeds(out, comparison, "ours"), load_speeds(out, comparison, "sb3")
        if quiet_ours and quiet_sb3:
            ours_sps, sb3_sps = quiet_ours, quiet_sb3
        ours_median, sb3_median = statistics.median(ours_sps), statistics.median(sb3_sps)
        rows.append(
            [comparison.script, comparison.env_id, f"{comparison.total_timesteps // 1000}k"]
            + [f"{mean_std(ours, 1)} ({len(ours)} seeds)", f"{mean_std(sb3, 1)} ({len(sb3)} seeds)"]
            + ["yes" if ours_mean >= sb3_mean - sb3_sd else "**no**", f"{ours_median:.0f}", f"{sb3_median:.0f}"]
            + [f"{ours_median / sb3_median:.2f}×"]
        )
    header = ["algorithm", "env", "steps", f"ours: last-{LAST_EPISODES} return", "SB3", "ours ≥ SB3 − 1 sd"]
    return markdown_table([*header, "ours: median SPS", "SB3", "speed-up"], rows)


def main() -> None:
    cli = CommandLine(
        __doc__,
        "continuous_vs_sb3",
        {
            "run": queue_command(
                lambda args: learning_runs(["ours", "sb3"] if args.impl == "both" else [args.impl], args.out, args.only)
            ),
            "speed": lambda args: run_speed(args.out, args.rounds, args.only),
            "report": report_command(report),
        },
        only_help="only these scripts, SB3 algorithms or env ids (e.g. sac_continuous_action td3 Hopper-v4)",
    )
    cli.count("--rounds", 2, "speed: alternating rounds per comparison")
    cli.count("--workers", 2, "run: learning runs at a time (one torch thread each)")
    cli.parser.add_argument("--impl", choices=["ours", "sb3", "both"], default="both", help="run: which side's runs to do")
    names = [name for c in COMPARISONS for name in (c.script, c.sb3_algo, c.env_id)]
    cli.run(cli.parse(dict.fromkeys(cli.commands, names)))


if __name__ == "__main__":
    main()
