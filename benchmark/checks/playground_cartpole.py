"""MuJoCo Playground's CartpoleBalance on the CPU: the learning check of ppo_continuous_action_playground.py, and its speed.

    python -m benchmark.checks.playground_cartpole learn --workers 1 # 2 seeds, one after the other, through the runner
    python -m benchmark.checks.playground_cartpole speed --rounds 2  # steady SPS beside ppo_continuous_action.py
    python -m benchmark.checks.playground_cartpole report            # the tables, also into benchmark/results/playground_cartpole.md

The learning check (issue 24): CartpoleBalance pays at most 1 per step for 1000 steps, so its maximum
return is 1000; a seed passes when the mean return of its last wave of episodes (one per env: the time
limit ends them all together) is at least 800. Each seed's run goes through the project's runner
(benchmark/harness.py's queue) in a folder of its own under --out; it writes a checkpoint every
CHECKPOINT_EVERY iterations, and `learn` started again resumes a stopped run from its newest checkpoint
and skips seeds already summarised. Summaries: one JSON per seed under --out,
and the report in benchmark/results/playground_cartpole.md.

Speed: the steady rate (after the compiling first iteration) of ppo_continuous_action_playground.py at
each --num-envs of the speed runs, beside ppo_continuous_action.py with its published settings (1 env,
2048 steps per rollout) on the same task through Gymnasium: dm_control's `cartpole-balance` via Shimmy
(`dm_control/cartpole-balance-v0`, the `dm_control` extra). One torch thread each, one process at a
time, rounds interleaved. Beside them, each side's task alone (random actions, no learner): Playground's
jitted batch step at each batch size, and dm_control's one env through Gymnasium and Shimmy.
"""

import json
import statistics
from functools import partial
from pathlib import Path

from benchmark.harness import (
    CommandLine,
    QueuedRun,
    Scalars,
    SpeedRun,
    measured_at,
    one_thread_env,
    queue_command,
    recorded_speeds,
    script,
    speed_rounds,
    summarize_run,
    summarize_speed,
    this_command,
    write_result,
)
from cleanrl_utils.runtime import atomic
from cleanrl_utils.tensorboard_reader import read_wall_times

REPO = Path(__file__).resolve().parents[2]

SCRIPT = "ppo_continuous_action_playground"
ENV_ID = "CartpoleBalance"
TITLE = f"{SCRIPT}.py on {ENV_ID}: learning and speed"  # the results file's first line
MAX_RETURN, BAR = 1000.0, 0.8
SEEDS = (1, 2)
# CPU settings: tens of envs, smaller batches than the Isaac Gym variant's 4096 x 16 and a smaller step size for them
LEARN_ARGS = ("--num-envs", "64", "--num-steps", "32", "--num-minibatches", "4", "--learning-rate", "0.001")
TOTAL_TIMESTEPS = 1_000_000
CHECKPOINT_EVERY = 50  # iterations of 64 x 32 steps: about every 100k steps
SPEED_ITERATIONS = 8
DM_CONTROL_ID = "dm_control/cartpole-balance-v0"


def result_path(out: Path, seed: int, total: int) -> Path:
    return out / f"learn__{SCRIPT}__{ENV_ID}__{total}__{seed}.json"


def learning(run_dir: Path, scalars: Scalars) -> dict:
    """The last wave's mean return, when the waves first reached the bar, and the run's time."""
    waves: dict[int, list[float]] = {}
    for step, value in scalars.get("charts/episodic_return", []):
        waves.setdefault(step, []).append(value)
    wave_means = [(step, statistics.fmean(values)) for step, values in sorted(waves.items())]
    times = read_wall_times(run_dir, "charts/SPS")
    return {
        "last_wave_mean": wave_means[-1][1] if wave_means else None,  # None: no episode ended
        "first_step_at_bar": next((step for step, mean in wave_means if mean >= BAR * MAX_RETURN), None),
        "minutes": (times[-1][1] - times[0][1]) / 60,  # from the first iteration's log to the last (resumes included)
        "wave_means": wave_means,
    }


def summarize(run_dir: Path, result: Path, seed: int, total: int) -> dict:
    """A seed's summary: its identity, speed and learning (its waves' means; a run that ended no episode too)."""
    args = [*LEARN_ARGS, "--total-timesteps", str(total)]
    return summarize_run(run_dir, result, None, learning, script=SCRIPT, env_id=ENV_ID, seed=seed, args=args)


def learning_runs(out: Path, total: int) -> list[QueuedRun]:
    """A run per seed: started, or resumed from its checkpoint, and summarised when it ends."""
    args = (*LEARN_ARGS, "--total-timesteps", str(total), "--no-cuda")
    return [
        QueuedRun(
            result_path(out, seed, total),
            script(SCRIPT),
            args,
            ENV_ID,
            seed,
            CHECKPOINT_EVERY,
            summarize=partial(summarize, result=result_path(out, seed, total), seed=seed, total=total),
        )
        for seed in SEEDS
    ]


def speed_runs(num_envs: list[int]) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """name -> (script, env id, arguments) of each speed run."""
    runs = {}
    for n in num_envs:
        budget = str(SPEED_ITERATIONS * n * 32)
        args = ("--num-envs", str(n), "--num-steps", "32", "--num-minibatches", "4", "--total-timesteps", budget, "--no-cuda")
        runs[f"playground_{n}envs"] = (SCRIPT, ENV_ID, args)
    runs["ppo_continuous_action"] = ("ppo_continuous_action", DM_CONTROL_ID, ("--total-timesteps", "12288"))
    return runs


def speed_run(name: str, name_of_script: str, env_id: str, args: tuple[str, ...]) -> SpeedRun:
    """A speed run of cleanrl/<name_of_script>.py (one thread), its steady rate written when it ends."""

    def make(result: Path) -> tuple[QueuedRun, dict[str, str]]:
        summarize = partial(summarize_speed, result=result, name=name)
        return QueuedRun(result, script(name_of_script), args, env_id, 1, summarize=summarize), one_thread_env()

    return make


def speed(out: Path, rounds: int, num_envs: list[int]) -> None:
    """The training runs' speed, then each side's task alone."""
    runs = {name: speed_run(name, *run) for name, run in speed_runs(num_envs).items()}
    speed_rounds(out, rounds, runs, None, "playground_cartpole.py")
    env_only(out, rounds, num_envs)


ENV_ONLY_STEPS = 2000  # vector steps of random actions


def env_only_rate(name: str, num_envs: int = 1) -> float:
    """Env steps per second of the task alone, random actions: Playground batched, or dm_control one env via Shimmy."""
    import time

    import numpy as np

    rng = np.random.default_rng(0)
    if name == "ppo_continuous_action":
        import gymnasium as gym
        import shimmy

        gym.register_envs(shimmy)
        env = gym.make(DM_CONTROL_ID)
        env.reset(seed=0)
        start = time.perf_counter()
        for _ in range(ENV_ONLY_STEPS):
            if any(env.step(rng.uniform(-1, 1, 1))[2:4]):
                env.reset()
        return ENV_ONLY_STEPS / (time.perf_counter() - start)
    import importlib.util

    import jax

    spec = importlib.util.spec_from_file_location(SCRIPT, REPO / "cleanrl" / f"{SCRIPT}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    envs = module.make_env(ENV_ID, num_envs)
    state, fresh = envs.reset(jax.random.PRNGKey(0)), envs.reset(jax.random.PRNGKey(1))
    actions = jax.numpy.asarray(rng.uniform(-1, 1, (ENV_ONLY_STEPS, num_envs, envs.action_size)), dtype="float32")
    jax.block_until_ready(envs.step(state, actions[0], fresh))  # compiled before the clock starts
    start = time.perf_counter()
    for action in actions:
        state = envs.step(state, action, fresh)[0]
    jax.block_until_ready(state)
    return ENV_ONLY_STEPS * num_envs / (time.perf_counter() - start)


def env_only(out: Path, rounds: int, num_envs: list[int]) -> None:
    for round_ in range(1, rounds + 1):
        for name, n in [*((f"playground_{n}envs", n) for n in num_envs), ("ppo_continuous_action", 1)]:
            result = out / f"envonly__{name}__{round_}.json"
            if not result.exists():
                write_result(result, {"name": name, "sps": (rate := env_only_rate(name, n))})
                print(f"env only: {name} round {round_}: {rate:.0f} env steps/s", flush=True)


def rate_rows(out: Path, kind: str) -> list[str]:
    rows = []
    for name in sorted({p.name.split("__")[1] for p in out.glob(f"{kind}__*.json")}):
        rates = recorded_speeds(out, name, kind)
        label = f"ppo_continuous_action ({DM_CONTROL_ID}, 1 env)" if name == "ppo_continuous_action" else name
        rows.append(f"| {label} | {statistics.median(rates):.0f} | {', '.join(f'{r:.0f}' for r in rates)} |")
    return rows


def report(out: Path, total: int) -> str:
    lines = [
        f"| script | env | steps | seed | last wave's mean return | first step ≥ {BAR * MAX_RETURN:g} | minutes | passes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed in SEEDS:
        if not (result := result_path(out, seed, total)).exists():
            continue  # not run (or not finished): no row rather than a made-up one
        s = json.loads(result.read_text())
        mean = s["last_wave_mean"]
        passes = "yes" if mean is not None and mean >= BAR * MAX_RETURN else "**no**"
        first = f"{s['first_step_at_bar']:,}" if s["first_step_at_bar"] else "never"
        row = (
            f"| {SCRIPT} | {ENV_ID} | {total // 1000}k | {seed} | {'none ended' if mean is None else f'{mean:.1f}'} | {first} "
        )
        lines.append(row + f"| {s['minutes']:.1f} | {passes} |")
    lines += [
        "",
        "| training run (one torch thread) | steady SPS, median | rounds |",
        "|---|---|---|",
        *rate_rows(out, "speed"),
    ]
    lines += ["", "| the task alone, random actions | env steps/s, median | rounds |", "|---|---|---|"]
    return "\n".join([*lines, *rate_rows(out, "envonly")])


def write_report(out: Path, total: int, results: Path) -> None:
    """The tables, printed and written to `results` under its title and the line that says how they were made."""
    table = report(out, total)
    atomic.write_text(results, f"# {TITLE}\n\n{measured_at(this_command())}.\n\n{table}\n")
    print(table)


def main() -> None:
    cli = CommandLine(
        __doc__,
        "playground_cartpole",
        {
            "learn": queue_command(lambda args: learning_runs(args.out, args.total_timesteps)),
            "speed": lambda args: speed(args.out, args.rounds, args.num_envs),
            "report": lambda args: write_report(args.out, args.total_timesteps, args.results),
        },
    )
    cli.count("--rounds", 2, "speed: rounds of every speed run")
    cli.count("--workers", 1, "learn: seeds at a time")
    cli.parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64, 256], help="speed: batch sizes of ours")
    cli.parser.add_argument("--total-timesteps", type=int, default=TOTAL_TIMESTEPS, help="learn, report: budget per seed")
    cli.parser.add_argument("--results", type=Path, default=REPO / "benchmark" / "results" / "playground_cartpole.md")
    args = cli.parse()
    args.out.mkdir(parents=True, exist_ok=True)
    cli.run(args)


if __name__ == "__main__":
    main()
