"""The Atari files on this machine: learning on small budgets beside SB3 and a random policy, and speed.

    python -m benchmark.compare.atari_vs_sb3 random                # the random policy's whole-game score in each game
    python -m benchmark.compare.atari_vs_sb3 run --workers 2       # the learning runs not done yet, 2 at a time
    python -m benchmark.compare.atari_vs_sb3 speed --rounds 2      # steps per second, one process at a time
    python -m benchmark.compare.atari_vs_sb3 report                # the Markdown tables for the docs

These CPUs do a few hundred Atari steps per second, so the budgets are far below the published
10M-step runs: the point is to catch an implementation that does not learn, not to reproduce the
published scores. The checks:

- `ppo_atari.py` against Stable-Baselines3's PPO with the same hyperparameters and wrappers
  (benchmark/compare/sb3_baselines.py), BreakoutNoFrameskip-v4, 300k steps, 2 seeds each: our mean of the
  last 20 episodes is at least 0.8 x SB3's, and both are at least 3 x the random policy's.
- `dqn_atari.py`, `c51_atari.py`, `rainbow_atari.py` on Breakout, 200k steps, learning from step 20k,
  epsilon annealed over the first 100k (Rainbow explores with noisy nets), 1 seed; `sac_atari.py`
  likewise on its default game, and on Seaquest for 100k steps; the JAX twins `dqn_atari_jax.py` and `c51_atari_jax.py` with their
  twins' settings: the mean of the last 20 episodes is at least 2 x random.
- `ppo_atari_multigpu.py` as 2 processes of 4 envs (torchrun), Breakout 300k, 2 seeds: within noise of
  `ppo_atari.py`'s check (at least its mean minus one standard deviation over seeds) and 3 x random;
  `ppo_atari_lstm.py` on Breakout, 500k steps: at least 3 x random.
- Speed: `ppo_atari.py` against SB3 (8 iterations of 8 x 128 steps, alternating), and
  `ppo_atari_multigpu.py` as 2 processes (one per core, 4 envs each) against `ppo_atari.py` with the
  same global batch (8 envs) in one process with 1 and with 2 torch threads.

`sac_atari.py` takes longer than a working session here, so its run writes a checkpoint every 10k
steps; `run` started again after a stop goes on from its newest checkpoint (`--resume`).

Returns are whole games' scores (all lives), on both sides. The runs go through the project's runner
(benchmark/harness.py's queue), each with one torch/XLA thread, so two at a time share a 2-core machine;
their logged speeds are not used (the runs share the CPUs).
"""

import os
import statistics
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import (
    SB3_BASELINES,
    CommandLine,
    QueuedRun,
    SpeedRun,
    markdown_table,
    queue_command,
    random_policy_means,
    record_random_policy,
    recorded_speeds,
    report_command,
    result_last_mean,
    script,
    speed_cells,
    speed_rounds,
    summarize_run,
    torch_threads_env,
)
from cleanrl_utils.report import mean_std

REPO = Path(__file__).resolve().parents[2]

LAST_EPISODES = 20
RANDOM_GAMES = 30
BREAKOUT = "BreakoutNoFrameskip-v4"


@dataclass(frozen=True)
class Check:
    script: str  # our file in cleanrl/
    env_id: str
    total_timesteps: int
    seeds: tuple[int, ...]
    times_random: float  # our mean must reach this multiple of the random policy's return
    args: tuple[str, ...] = ()
    sb3_algo: str | None = None  # compared with this model of benchmark/compare/sb3_baselines.py
    of_sb3: float = 0.0  # ... and must reach this share of its mean
    variant: str = ""  # names a run whose args change a default beyond the budget, beside the default one
    checkpoint_every: int = 0  # the script's --checkpoint-frequency (steps, or iterations for PPO); 0: none
    of_ours: str | None = None  # must reach, within noise (its mean - 1 sd over seeds), this check of ours
    processes: int = 0  # started under torchrun with this many processes (ppo_atari_multigpu.py)

    @property
    def label(self) -> str:
        return f"{self.script} ({self.variant})" if self.variant else self.script

    def result_name(self, impl: str, seed: int) -> str:
        name = self.script if impl == "ours" else self.sb3_algo
        variant = f"__{self.variant}" if self.variant else ""
        return f"{impl}__{name}{variant}__{self.env_id}__{self.total_timesteps}__{seed}.json"


# learning from step 20k, epsilon from 1 down over the first 100k of 200k steps
EPSILON_SCHEDULE = ("--learning-starts", "20000", "--exploration-fraction", "0.5")
# the same with the target network refreshed every 1k steps (the C51 variants below)
TARGET_1K = (*EPSILON_SCHEDULE, "--target-network-frequency", "1000")
CHECKS = [
    Check("ppo_atari", BREAKOUT, 300_000, (1, 2), 3.0, sb3_algo="ppo_atari", of_sb3=0.8),
    Check("dqn_atari", BREAKOUT, 200_000, (1,), 2.0, EPSILON_SCHEDULE),
    Check("c51_atari", BREAKOUT, 200_000, (1,), 2.0, EPSILON_SCHEDULE),
    # C51's published target refresh (every 10k steps) gives 18 refreshes in this budget, and its return
    # distributions narrow by only gamma per refresh; dqn_atari.py's default refresh (1k) shows the learning
    Check("c51_atari", BREAKOUT, 200_000, (1,), 2.0, TARGET_1K, variant="target1k"),
    # two processes of 4 envs each: the 8 envs and the 300k steps of ppo_atari.py's check
    Check("ppo_atari_multigpu", BREAKOUT, 300_000, (1, 2), 3.0, ("--local-num-envs", "4"), of_ours="ppo_atari", processes=2),
    # the LSTM variant learns more slowly per step than the frame stack; ~90 steps/s on one core: ~90 min, so a
    # checkpoint every 50 iterations of 8 x 128 steps (~10 min)
    Check("ppo_atari_lstm", BREAKOUT, 500_000, (1,), 3.0, checkpoint_every=50),
    Check("rainbow_atari", BREAKOUT, 200_000, (1,), 2.0, ("--learning-starts", "20000")),
    # the JAX twins of dqn_atari.py and c51_atari.py: the same checks (their logged SPS sits beside the twin's)
    Check("dqn_atari_jax", BREAKOUT, 200_000, (1,), 2.0, EPSILON_SCHEDULE),
    Check("c51_atari_jax", BREAKOUT, 200_000, (1,), 2.0, TARGET_1K, variant="target1k"),
    # ~15 steps/s on one core here: 200k steps take longer than a session, so the run checkpoints
    Check("sac_atari", "BeamRiderNoFrameskip-v4", 200_000, (1,), 2.0, ("--learning-starts", "20000"), checkpoint_every=10_000),
    # BeamRider's sparse rewards left the policy near uniform at 200k. Seaquest, from the published set of
    # 100k-step games (SAC for discrete actions, Christodoulou 2019: 211.6 against random 68.4), pays often and
    # its random score is not 0 (Road Runner's was, over 30 games here: "2x random" would then mean any point)
    Check("sac_atari", "SeaquestNoFrameskip-v4", 100_000, (1,), 2.0, ("--learning-starts", "20000"), checkpoint_every=10_000),
]


def random_policy_games(env_id: str, games: int) -> list[tuple[float, int]]:
    """(whole-game score, lives lost) of uniformly random actions, through the training scripts' own Atari wrappers."""
    from cleanrl.dqn_atari import make_env  # the benchmark may import algorithm files; they never import it

    env = make_env(env_id, 0, False, "random")()
    env.action_space.seed(0)
    played: list[tuple[float, int]] = []
    env.reset(seed=0)
    lives_lost = 0
    while len(played) < games:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            lives_lost += 1  # the episodic-life wrapper ends an episode at each lost life
            if "episode" in info:  # the game is over, not just a life
                played.append((float(info["episode"]["r"]), lives_lost))
                lives_lost = 0
            env.reset()
    env.close()
    return played


def ours(name: str, args: tuple[str, ...], result: Path, env_id: str = BREAKOUT, seed: int = 1, **kwargs) -> QueuedRun:
    """A run of cleanrl/<name>.py (or of `program`, e.g. under torchrun), summarised from its events."""
    program = kwargs.pop("program", script(name))
    summarize = partial(summarize_run, result=result, impl="ours", algo=name)
    return QueuedRun(result, program, args, env_id, seed, summarize=summarize, **kwargs)


def sb3(algo: str, env_id: str, total_timesteps: int, seed: int, result: Path) -> QueuedRun:
    """A run of benchmark/compare/sb3_baselines.py, which writes its summary itself."""
    args = ("--total-timesteps", str(total_timesteps), "--threads", "1", "--json", str(result))
    return QueuedRun(result, (str(SB3_BASELINES), algo), args, env_id, seed)


def learning_runs(out: Path, only: list[str] | None) -> list[QueuedRun]:
    """Every learning run, check by check, seed by seed, ours before SB3."""
    runs = []
    for check in CHECKS:
        if only and not {check.script, check.env_id} & set(only):
            continue
        for seed in check.seeds:
            args = ("--total-timesteps", str(check.total_timesteps), *check.args)
            result = out / check.result_name("ours", seed)
            program = (*torchrun(check.processes), *script(check.script)) if check.processes else script(check.script)
            runs.append(
                ours(check.script, args, result, check.env_id, seed, checkpoint_every=check.checkpoint_every, program=program)
            )
            if check.sb3_algo:
                runs.append(
                    sb3(check.sb3_algo, check.env_id, check.total_timesteps, seed, out / check.result_name("sb3", seed))
                )
    return runs


# speed runs: (name -> (the run, torch threads)) on 8 iterations of 8 x 128 steps
SPEED_STEPS = 8 * 8 * 128
SPEED_ARGS = ("--total-timesteps", str(SPEED_STEPS))


def torchrun(processes: int) -> tuple[str, ...]:
    return ("-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}")


SPEED_RUNS = {
    "ppo_atari": lambda result: (ours("ppo_atari", SPEED_ARGS, result), 1),
    "sb3_ppo_atari": lambda result: (sb3("ppo_atari", BREAKOUT, SPEED_STEPS, 1, result), 1),
    "ppo_atari_2_threads": lambda result: (ours("ppo_atari", SPEED_ARGS, result), 2),
    "ppo_atari_multigpu_2_processes": lambda result: (
        ours(
            "ppo_atari_multigpu",
            ("--local-num-envs", "4", *SPEED_ARGS),
            result,
            program=(*torchrun(2), *script("ppo_atari_multigpu")),
        ),
        1,
    ),
}


def speed_run(name: str) -> SpeedRun:
    """SPEED_RUNS[name] with its torch threads as an environment."""

    def make(result: Path) -> tuple[QueuedRun, dict[str, str]]:
        run, threads = SPEED_RUNS[name](result)
        return run, torch_threads_env(threads)

    return make


def report(out: Path) -> str:
    random_means = random_policy_means(out)
    rows = []
    for check in CHECKS:
        ours = [result_last_mean(p, LAST_EPISODES) for s in check.seeds if (p := out / check.result_name("ours", s)).exists()]
        if not ours or check.env_id not in random_means:
            continue
        ours_mean, random_mean = statistics.fmean(ours), random_means[check.env_id]
        passes = ours_mean >= check.times_random * random_mean
        sb3_cell = "—"
        if check.sb3_algo:
            sb3 = [
                result_last_mean(p, LAST_EPISODES) for s in check.seeds if (p := out / check.result_name("sb3", s)).exists()
            ]
            if not sb3:
                continue
            sb3_mean, sb3_cell = statistics.fmean(sb3), mean_std(sb3, 1)
            passes = passes and ours_mean >= check.of_sb3 * sb3_mean and sb3_mean >= check.times_random * random_mean
        if check.of_ours:
            twin = next(c for c in CHECKS if c.script == check.of_ours and not c.variant)
            theirs = [
                result_last_mean(p, LAST_EPISODES) for s in twin.seeds if (p := out / twin.result_name("ours", s)).exists()
            ]
            if not theirs:
                continue
            noise = statistics.pstdev(theirs)  # the spread the table shows beside the mean
            sb3_cell = f"{check.of_ours}: {mean_std(theirs, 1)}"
            passes = passes and ours_mean >= statistics.fmean(theirs) - noise
        rows.append(
            [check.label, check.env_id, f"{check.total_timesteps // 1000}k", len(ours), mean_std(ours, 1), sb3_cell]
            + [f"{random_mean:.2f}", f"{ours_mean / random_mean:.1f}×", "yes" if passes else "**no**"]
        )
    header = ["algorithm", "game", "steps", "seeds", f"ours: last-{LAST_EPISODES} return", "SB3", "random policy"]
    speed_header = ["speed run (Breakout, 8 iterations of 8 × 128 steps)", "SPS, median", "rounds"]
    speed_rows = [[name, *speed_cells(rates)] for name in SPEED_RUNS if (rates := recorded_speeds(out, name))]
    return "\n\n".join([markdown_table([*header, "ours / random", "passes"], rows), markdown_table(speed_header, speed_rows)])


def main() -> None:
    cli = CommandLine(
        __doc__,
        "atari_vs_sb3",
        {
            "random": lambda args: record_random_policy(
                args.out, sorted({check.env_id for check in CHECKS}), args.games, random_policy_games
            ),
            "run": queue_command(lambda args: learning_runs(args.out, args.only)),
            "speed": lambda args: speed_rounds(
                args.out, args.rounds, {name: speed_run(name) for name in SPEED_RUNS}, args.only, "atari_vs_sb3.py"
            ),
            "report": report_command(report),
        },
        only_help="run: only these scripts or env ids; speed: only these speed runs",
    )
    cli.count("--games", RANDOM_GAMES, "random: games per Atari game")
    cli.count("--rounds", 2, "speed: rounds of every speed run")
    cli.count("--workers", 2, "run: learning runs at a time (one torch thread each)")
    cli.run(cli.parse({"run": [name for check in CHECKS for name in (check.script, check.env_id)], "speed": SPEED_RUNS}))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
