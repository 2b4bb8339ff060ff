"""The JAX files beside their PyTorch twins: speed on the same runs, and the JAX DQN/C51 learning checks.

    python -m benchmark.compare.jax_vs_torch speed --rounds 2     # one run at a time, JAX and PyTorch alternating
    python -m benchmark.compare.jax_vs_torch learn --workers 2    # the learning runs not done yet, 2 at a time
    python -m benchmark.compare.jax_vs_torch report               # the Markdown tables for the docs

Speed compares the learning phase only. Both sides log `charts/SPS` every 100 steps; the TensorBoard
events carry the wall-clock time of each, so the steady rate is the steps over the seconds between the
end of the logging interval in which the first gradient update ran and the last log. JIT compilation
happens before the JAX files start their clock (they print how long it took, which is reported on its
own) or else in that first interval, which is left out of the rate either way. For the PyTorch twin the
table gives the first update's warm-up: the extra time of that interval over a steady one.

Learning: dqn_jax.py and c51_jax.py on CartPole-v1, 500k steps, seeds 1-3: each seed needs a 50k-step
window whose mean return is at least 475; the mean of the last 100 episodes is reported beside the
published results. Every run uses one CPU thread (torch and XLA), so two at a time share a 2-core
machine; the runs go through the project's runner (benchmark/harness.py's queue).
"""

import json
import os
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import (
    CommandLine,
    QueuedRun,
    markdown_table,
    one_thread_env,
    queue_command,
    report_command,
    run_queue,
    script,
    summarize_speed,
    write_result,
)
from cleanrl_utils.report import best_window_mean, last_mean, mean_std
from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SpeedPair:
    jax: str
    torch: str
    env_id: str
    total_timesteps: int
    learning_starts: int  # the first gradient update happens at this step on both sides


SPEED_PAIRS = [
    SpeedPair("dqn_jax", "dqn", "CartPole-v1", 30_000, 10_000),
    SpeedPair("td3_continuous_action_jax", "td3_continuous_action", "Hopper-v4", 30_000, 25_000),
    SpeedPair("ddpg_continuous_action_jax", "ddpg_continuous_action", "Hopper-v4", 30_000, 25_000),
    SpeedPair("sac_continuous_action_jax", "sac_continuous_action", "Hopper-v4", 30_000, 25_000),
    # the Atari twins: 4k steps of learning (an update every 4th step) after 2k of filling the memory
    SpeedPair("dqn_atari_jax", "dqn_atari", "BreakoutNoFrameskip-v4", 6_000, 2_000),
    SpeedPair("c51_atari_jax", "c51_atari", "BreakoutNoFrameskip-v4", 6_000, 2_000),
]


@dataclass(frozen=True)
class LearningCheck:
    script: str
    published: tuple[float, float]  # the reference's last-100 mean ± std over 3 seeds


LEARNING_CHECKS = [LearningCheck("dqn_jax", (498.38, 2.29)), LearningCheck("c51_jax", (491.07, 9.70))]
LEARNING_STEPS, LEARNING_SEEDS, WINDOW, WINDOW_BAR = 500_000, (1, 2, 3), 50_000, 475.0


def run_one(name: str, env_id: str, args: tuple[str, ...], result: Path, summarize: Callable[[Path], None]) -> None:
    """One run of cleanrl/<name>.py (seed 1) through the runner, its log beside the results."""
    if run_queue(
        [QueuedRun(result, script(name), args, env_id, 1, summarize=summarize)], 1, one_thread_env(), result.parent / "logs"
    ):
        raise SystemExit(f"jax_vs_torch.py: error: {name} failed (log under {result.parent / 'logs'})")


def write_speed(run_dir: Path, result: Path, name: str, learning_starts: int) -> None:
    # JAX files compile before their clock starts and print how long it took; otherwise the
    # first update's interval holds the warm-up
    printed = re.search(r"compile time: ([\d.]+) s", (result.parent / "logs" / f"{result.stem}.log").read_text())
    summarize_speed(run_dir, result, learning_starts, float(printed.group(1)) if printed else None, script=name)


def write_returns(run_dir: Path, result: Path, name: str, seed: int) -> None:
    returns = read_scalars(run_dir)["charts/episodic_return"]
    write_result(result, {"script": name, "seed": seed, "episodic_returns": returns})


def run_speed(out: Path, rounds: int, only: list[str] | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for round_ in range(1, rounds + 1):
        for pair in SPEED_PAIRS:
            for name in (pair.jax, pair.torch):
                result = out / f"speed__{name}__{round_}.json"
                if (only and name not in only and pair.jax not in only) or result.exists():
                    continue
                print(f"speed: {name} round {round_}", flush=True)
                args = ("--total-timesteps", str(pair.total_timesteps), "--learning-starts", str(pair.learning_starts))
                summarize = partial(write_speed, result=result, name=name, learning_starts=pair.learning_starts)
                run_one(name, pair.env_id, args, result, summarize)


def learning_runs(out: Path, only: list[str] | None) -> list[QueuedRun]:
    runs = []
    for check in LEARNING_CHECKS:
        for seed in LEARNING_SEEDS:
            if only and check.script not in only:
                continue
            result = out / f"learn__{check.script}__{seed}.json"
            summarize = partial(write_returns, result=result, name=check.script, seed=seed)
            args = ("--total-timesteps", str(LEARNING_STEPS))
            runs.append(QueuedRun(result, script(check.script), args, "CartPole-v1", seed, summarize=summarize))
    return runs


def report(out: Path) -> str:
    speed_rows = []
    for pair in SPEED_PAIRS:
        jax_runs = [json.loads(p.read_text()) for p in sorted(out.glob(f"speed__{pair.jax}__*.json"))]
        torch_runs = [json.loads(p.read_text()) for p in sorted(out.glob(f"speed__{pair.torch}__*.json"))]
        if not (jax_runs and torch_runs):
            continue
        jax_sps, torch_sps = (statistics.median(r["sps"] for r in runs) for runs in (jax_runs, torch_runs))
        jax_extra, torch_extra = (
            statistics.median(r["first_update_extra_s"] for r in runs) for runs in (jax_runs, torch_runs)
        )
        speed_rows.append(
            [pair.jax, pair.torch, pair.env_id, f"{pair.total_timesteps // 1000}k", f"{jax_sps:.0f}", f"{torch_sps:.0f}"]
            + [f"{jax_sps / torch_sps:.2f}×", f"{jax_extra:.1f}", f"{torch_extra:.1f}"]
        )
    learning_rows = []
    for check in LEARNING_CHECKS:
        runs = [json.loads(p.read_text()) for p in sorted(out.glob(f"learn__{check.script}__*.json"))]
        if not runs:
            continue
        series = [[tuple(point) for point in run["episodic_returns"]] for run in runs]
        windows = [best_window_mean(s, WINDOW)[0] for s in series]
        learning_rows.append(
            [check.script, len(runs), ", ".join(f"{w:.1f}" for w in windows)]
            + ["yes" if all(w >= WINDOW_BAR for w in windows) else "**no**", mean_std([last_mean(s, 100) for s in series])]
            + [f"{check.published[0]:.2f} ± {check.published[1]:.2f}"]
        )
    speed_header = ["JAX file", "PyTorch twin", "env", "steps", "JAX SPS (median)", "PyTorch SPS", "JAX / PyTorch"]
    learning_header = ["file", "seeds", f"best {WINDOW // 1000}k-step window per seed", f"every seed ≥ {WINDOW_BAR:.0f}"]
    return "\n\n".join(
        [
            markdown_table([*speed_header, "JAX compile s", "PyTorch first-update extra s"], speed_rows),
            markdown_table([*learning_header, "last-100 mean", "published"], learning_rows),
        ]
    )


def main() -> None:
    cli = CommandLine(
        __doc__,
        "jax_vs_torch",
        {
            "speed": lambda args: run_speed(args.out, args.rounds, args.only),
            "learn": queue_command(lambda args: learning_runs(args.out, args.only)),
            "report": report_command(report),
        },
        only_help="only these scripts",
    )
    cli.count("--rounds", 2, "speed: rounds of every speed run")
    cli.count("--workers", 2, "learn: runs at a time (one torch/XLA thread each)")
    speed_names = [name for pair in SPEED_PAIRS for name in (pair.jax, pair.torch)]
    cli.run(cli.parse({"speed": speed_names, "learn": [check.script for check in LEARNING_CHECKS]}))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
