"""The envpool and Procgen files on this machine: learning on 1M steps against a random policy, and speed.

    python -m benchmark.checks.envpool_procgen random                 # the random policy's whole-game score in each game
    python -m benchmark.checks.envpool_procgen run --workers 2        # the learning runs not done yet, 2 at a time
    python -m benchmark.checks.envpool_procgen run --workers 1 --threads 2   # one run alone on the machine: 2 torch threads
    python -m benchmark.checks.envpool_procgen speed --rounds 2       # steps per second, one process at a time
    python -m benchmark.checks.envpool_procgen report                 # the Markdown tables for the docs

The checks (1 seed each, 1M steps, far below the published 10M/25M: the point is to catch a file
that does not learn, not to reproduce the published scores): `ppo_atari_envpool.py` and
`pqn_atari_envpool.py` on envpool's Breakout-v5, `ppo_procgen.py` on Procgen's starpilot (easy
levels); likewise `pqn_atari_envpool_lstm.py` and the two XLA-JAX PPO files on Breakout-v5 (on 500k
steps: a run must fit a working session, and the XLA files cannot checkpoint), and `ppg_procgen.py` on
starpilot (3 phases of 32 policy iterations with 16 envs, 393k steps, ~2 h: its auxiliary phases are ~75%
of the time on a CPU). Each passes when the mean of its last 20 games is at least 3 x the
random policy's (for the XLA files, which log the mean of every env's last game once per iteration,
the mean of the last 20 of those).
ppo_procgen's 1M steps take ~65 min alone on 2 cores (`--threads 2`): its run writes a checkpoint
every 2 iterations, and `run` started again resumes it. envpool cannot save its games, so the
resumed run plays new ones. The runs go through the project's runner (harness's queue, logs under
`--out`/logs). Every run gets
glibc's large-block setting (`keep_large_allocations`): it halves the Procgen CNN's update time.

The random policy plays through the same envpool env and is scored by the same `EpisodeStatistics`
class as the script it is compared with, so both sides count whole games (all lives) and raw scores.

Speed: `ppo_atari_envpool.py` (Breakout-v5) against `ppo_atari.py` (BreakoutNoFrameskip-v4), both with
8 envs x 128 steps and one torch thread, alternating, one process at a time. The rate is the steady one
between the end of the first iteration and the last (the TensorBoard events carry the wall-clock time
of each `charts/SPS` log); envpool steps its games in threads of its own. The bar: 1.5x. The two XLA
files run the same speed run, reported beside `ppo_atari_envpool.py` (same games, same envpool).
Beside them, each file's env pipeline alone (its own env-making function, 8 envs, random actions):
how much of ppo_atari.py's time its games take bounds what any faster env can gain (Amdahl).
"""

import importlib
import os
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from benchmark import harness
from benchmark.harness import (
    CommandLine,
    QueuedRun,
    SpeedRun,
    keep_large_allocations,
    queue_command,
    random_policy_means,
    record_random_policy,
    recorded_speeds,
    report_command,
    result_last_mean,
    speed_rounds,
    summarize_run,
    summarize_speed,
    torch_threads_env,
    write_result,
)

REPO = Path(__file__).resolve().parents[2]

LAST_EPISODES = 20
RANDOM_GAMES = 30
TIMES_RANDOM = 3.0
SPEED_BAR = 1.5


@dataclass(frozen=True)
class Check:
    script: str  # our file in cleanrl/
    env_id: str  # its --env-id
    total_timesteps: int = 1_000_000
    seeds: tuple[int, ...] = (1,)
    args: tuple[str, ...] = ()
    checkpoint_every: int = 0  # iterations; a run longer than a working session goes on from its checkpoint
    # the XLA files log charts/avg_episodic_return once per iteration (the mean of every env's last game):
    # their "last 20" is the mean of the last 20 of those averages
    return_tag: str = "charts/episodic_return"

    def result_name(self, seed: int) -> str:
        return f"ours__{self.script}__{self.env_id}__{self.total_timesteps}__{seed}.json"


CHECKS = [
    Check("ppo_atari_envpool", "Breakout-v5"),
    Check("pqn_atari_envpool", "Breakout-v5"),
    # ~45 steps/s on one core: 1M steps take about 6 h, so the run is resumable (a checkpoint per 2 iterations, ~12 min)
    Check("ppo_procgen", "starpilot", checkpoint_every=2),
    # issue 23: the files without a learning result of their own, with the same bar
    # ~104 steps/s alone on 2 cores (measured over 30k steps at 150k): 500k steps take ~80 min, 1M would not fit a
    # session; a 1M run was already at 4.5x random (6.35) at 175k. Resumable: a checkpoint per 40 iterations
    Check("pqn_atari_envpool_lstm", "Breakout-v5", 500_000, checkpoint_every=40),
    # the XLA files cannot checkpoint (envpool's games cannot be saved): 500k steps (~2 h at 70-90 steps/s) fit a
    # session, and ppo_atari_envpool.py was already at 7x random between 200k and 400k
    Check("ppo_atari_envpool_xla_jax", "Breakout-v5", 500_000, return_tag="charts/avg_episodic_return"),
    Check("ppo_atari_envpool_xla_jax_scan", "Breakout-v5", 500_000, return_tag="charts/avg_episodic_return"),
    # PPG's auxiliary phase (6 epochs over every stored frame through the IMPALA CNN) is most of its cost on a CPU:
    # 16 envs keep the published 32 policy iterations per phase in a 131k-step phase; 3 phases, 393k steps. Measured
    # 2026-12-02 alone on 2 cores: ~6 min per policy phase, 24-26 min per auxiliary phase, 2 h 01 min in all (envpool's
    # games cannot be saved, so the run cannot be resumed)
    Check("ppg_procgen", "starpilot", 393_216, args=("--num-envs", "16")),
]


@dataclass(frozen=True)
class RandomGame:
    script: str  # whose EpisodeStatistics scores the games
    envpool_id: str
    make_kwargs: dict = field(default_factory=dict)  # the script's own envpool settings


# keyed by the checks' --env-id; Procgen's starpilot is envpool's StarpilotEasy-v0 (all levels, easy)
RANDOM = {
    "Breakout-v5": RandomGame("ppo_atari_envpool", "Breakout-v5", {"episodic_life": True, "reward_clip": True}),
    "starpilot": RandomGame("ppo_procgen", "StarpilotEasy-v0"),
}


def random_policy_games(env_id: str, games: int, seed: int = 0) -> list[tuple[float, int]]:
    """(whole-game score, length) of uniformly random actions, one env, scored as the training script scores them."""
    import envpool
    import numpy as np

    from cleanrl_utils.runtime import procgen_runtime

    setup = RANDOM[env_id]
    if setup.script == "ppo_procgen":
        procgen_runtime.load()  # the Qt 5 that envpool's Procgen links (and Atari does not: no libGL needed there)
    stats = importlib.import_module(f"cleanrl.{setup.script}").EpisodeStatistics(1)
    env = envpool.make(setup.envpool_id, env_type="gymnasium", num_envs=1, seed=seed, **setup.make_kwargs)
    rng = np.random.default_rng(seed)
    env.reset()
    played: list[tuple[float, int]] = []
    while len(played) < games:
        _, rewards, terminations, truncations, infos = env.step(rng.integers(0, env.action_space.n, 1))
        _, returns, lengths = stats.update(rewards, terminations, truncations, infos)
        played += zip(np.asarray(returns, dtype=float).tolist(), np.asarray(lengths).tolist())
    env.close()
    return played[:games]


def queued(name: str, args: tuple[str, ...], env_id: str, seed: int, result: Path, **kwargs) -> QueuedRun:
    """A run of cleanrl/<name>.py, summarised from its events (`tag`: the return it logs)."""
    tag = kwargs.pop("tag", "charts/episodic_return")
    summarize = partial(summarize_run, result=result, tag=tag, impl="ours", algo=name, env_id=env_id)
    return QueuedRun(result, harness.script(name), args, env_id, seed, summarize=summarize, **kwargs)


def run_env(threads: int) -> dict[str, str]:
    """One XLA thread, `threads` torch threads, and glibc's large-block setting (`keep_large_allocations`)."""
    return keep_large_allocations(torch_threads_env(threads))


def learning_runs(out: Path, only: list[str] | None) -> list[QueuedRun]:
    runs = []
    for check in CHECKS:
        if only and not {check.script, check.env_id} & set(only):
            continue
        for seed in check.seeds:
            args = ("--total-timesteps", str(check.total_timesteps), *check.args)
            result = out / check.result_name(seed)
            runs.append(
                queued(
                    check.script,
                    args,
                    check.env_id,
                    seed,
                    result,
                    tag=check.return_tag,
                    checkpoint_every=check.checkpoint_every,
                )
            )
    return runs


# speed: (script, env id), the same 8 envs x 128 steps, SPEED_ITERATIONS iterations each
SPEED_RUNS = {
    "ppo_atari_envpool": "Breakout-v5",
    "ppo_atari": "BreakoutNoFrameskip-v4",
    "ppo_atari_envpool_xla_jax": "Breakout-v5",
    "ppo_atari_envpool_xla_jax_scan": "Breakout-v5",
}
XLA_SCRIPTS = ("ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan")  # timed beside ppo_atari_envpool
ENV_ONLY_SCRIPTS = ("ppo_atari_envpool", "ppo_atari")  # whose env pipelines are timed alone
SPEED_ITERATIONS = 6
SPEED_ARGS = ("--num-envs", "8", "--num-steps", "128", "--total-timesteps", str(SPEED_ITERATIONS * 8 * 128))


def speed_run(name: str) -> SpeedRun:
    """A speed run of cleanrl/<name>.py (SPEED_ARGS, one thread), its steady rate written when it ends."""

    def make(result: Path) -> tuple[QueuedRun, dict[str, str]]:
        summarize = partial(summarize_speed, result=result, script=name)
        return QueuedRun(result, harness.script(name), SPEED_ARGS, SPEED_RUNS[name], 1, summarize=summarize), run_env(1)

    return make


ENV_ONLY_STEPS = 256  # per env: 2048 agent steps, random actions


def env_only_rate(script: str, steps: int = ENV_ONLY_STEPS) -> float:
    """Agent steps per second of `script`'s own env pipeline (8 envs, random actions, no network)."""
    import numpy as np

    if script == "ppo_atari":
        from cleanrl.ppo_atari import make_vector_env

        envs = make_vector_env(SPEED_RUNS[script], 8, False, "env-only")
        envs.reset(seed=1)
    else:
        from cleanrl.ppo_atari_envpool import make_env

        envs = make_env(SPEED_RUNS[script], 8, seed=1)
        envs.reset()
    actions = np.random.default_rng(0).integers(0, envs.single_action_space.n, (steps, 8))
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    rate = steps * 8 / (time.perf_counter() - start)
    envs.close()
    return rate


def run_env_only(out: Path, rounds: int) -> None:
    for round_ in range(1, rounds + 1):
        for script in ENV_ONLY_SCRIPTS:
            result = out / f"envonly__{script}__{round_}.json"
            if not result.exists():
                rate = env_only_rate(script)
                write_result(result, {"script": script, "sps": rate})
                print(f"env only: {script} round {round_}: {rate:.0f} steps/s", flush=True)


def report(out: Path) -> str:
    random_means = random_policy_means(out)
    lines = [
        f"| algorithm | env | steps | seed | last-{LAST_EPISODES} return | random policy | ours / random | passes (≥ {TIMES_RANDOM:g}×) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for check in CHECKS:
        if check.env_id not in random_means:
            continue
        random_mean = random_means[check.env_id]
        for seed in check.seeds:
            if not (result := out / check.result_name(seed)).exists():
                continue  # not run: no row rather than a made-up one
            ours = result_last_mean(result, LAST_EPISODES)
            passes = ours >= TIMES_RANDOM * random_mean
            lines.append(
                f"| {check.script} | {check.env_id} | {check.total_timesteps // 1000}k | {seed} | {ours:.1f} | {random_mean:.2f} "
                f"| {ours / random_mean:.1f}× | {'yes' if passes else '**no**'} |"
            )
    if random_means:
        scored = ", ".join(f"{env_id} {mean:.2f}" for env_id, mean in sorted(random_means.items()))
        lines += ["", f"Random policy, mean whole-game score: {scored}."]
    lines += [
        "",
        "| speed run (8 envs × 128 steps, one torch thread) | env | steady SPS, median | rounds |",
        "|---|---|---|---|",
    ]
    medians = {}
    for script, env_id in SPEED_RUNS.items():
        if rates := recorded_speeds(out, script):
            medians[script] = statistics.median(rates)
            lines.append(f"| {script} | {env_id} | {medians[script]:.0f} | {', '.join(f'{r:.0f}' for r in rates)} |")
    if "ppo_atari_envpool" in medians and "ppo_atari" in medians:
        ratio = medians["ppo_atari_envpool"] / medians["ppo_atari"]
        lines += [
            "",
            f"ppo_atari_envpool / ppo_atari: {ratio:.2f}× (bar {SPEED_BAR:g}×: {'yes' if ratio >= SPEED_BAR else '**no**'})",
        ]
    if "ppo_atari_envpool" in medians:
        lines += [
            f"{script} / ppo_atari_envpool: {medians[script] / medians['ppo_atari_envpool']:.2f}×"
            for script in XLA_SCRIPTS
            if script in medians
        ]
    env_rates = {script: rates for script in ENV_ONLY_SCRIPTS if (rates := recorded_speeds(out, script, "envonly"))}
    env_medians = {script: statistics.median(rates) for script, rates in env_rates.items()}
    if len(env_medians) == 2:
        lines += ["", "| env pipeline alone (8 envs, random actions) | steps/s, median | rounds |", "|---|---|---|"]
        for script, rates in env_rates.items():
            rounds = ", ".join(f"{r:.0f}" for r in rates)
            lines.append(f"| {script} ({SPEED_RUNS[script]}) | {env_medians[script]:.0f} | {rounds} |")
        if "ppo_atari" in medians:
            lines += ["", amdahl_line(medians["ppo_atari"], env_medians["ppo_atari"], env_medians["ppo_atari_envpool"])]
    return "\n".join(lines)


def amdahl_line(ppo_atari_sps: float, gym_env_sps: float, envpool_env_sps: float) -> str:
    """What ppo_atari.py would reach with envpool's env cost, and with games that cost nothing."""
    env_share = ppo_atari_sps / gym_env_sps  # the fraction of each ppo_atari.py step spent in its games
    with_envpool = 1 / (1 / ppo_atari_sps - 1 / gym_env_sps + 1 / envpool_env_sps)
    free_games = 1 / (1 / ppo_atari_sps - 1 / gym_env_sps)
    return (
        f"The games take {env_share:.0%} of ppo_atari.py's time; with envpool's env cost it would run at "
        f"{with_envpool:.0f} steps/s ({with_envpool / ppo_atari_sps:.2f}×), and with games that cost nothing at "
        f"{free_games:.0f} ({free_games / ppo_atari_sps:.2f}×)."
    )


def speed(out: Path, rounds: int, only: list[str] | None) -> None:
    """The speed runs, then each file's env pipeline alone."""
    speed_rounds(out, rounds, {name: speed_run(name) for name in SPEED_RUNS}, only, "envpool_procgen.py")
    run_env_only(out, rounds)


def main() -> None:
    cli = CommandLine(
        __doc__,
        "envpool_procgen",
        {
            "random": lambda args: record_random_policy(args.out, RANDOM, args.games, random_policy_games),
            "run": queue_command(lambda args: learning_runs(args.out, args.only), lambda args: run_env(args.threads)),
            "speed": lambda args: speed(args.out, args.rounds, args.only),
            "report": report_command(report),
        },
        only_help="run: only these scripts or env ids; speed: only these scripts",
    )
    cli.count("--games", RANDOM_GAMES, "random: games per env")
    cli.count("--rounds", 2, "speed: rounds of every speed run")
    cli.count("--workers", 2, "run: learning runs at a time")
    cli.count("--threads", 1, "run: torch threads per run (2 for one run alone: --workers 1)")
    cli.run(cli.parse({"run": [name for check in CHECKS for name in (check.script, check.env_id)], "speed": SPEED_RUNS}))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
