"""Does ppo_trxl.py's Transformer-XL memory matter? Each memory task, with the memory and without it.

    python -m benchmark.checks.trxl_memory run --only MiniGrid-MemoryS9-v0 --workers 2 --threads 1   # the 2M check
    python -m benchmark.checks.trxl_memory run --only ProofofMemory-v0                               # the small one
    python -m benchmark.checks.trxl_memory report                          # the Markdown table for docs/rl-algorithms/ppo-trxl.md
    python -m benchmark.checks.trxl_memory cue CHECKPOINT --episodes 500    # a MiniGrid agent's success, split by the cue seen

Each check trains ppo_trxl.py on a task that cannot be solved without remembering an early cue, with
the memory of its published settings and with a memory of length 1 (no memory: the original's window,
the script's default, attends to the steps before the current one only, so a window of 1 holds nothing),
same steps and seeds:

- `ProofofMemory-v0` (the reference's hyperparameters for it, 25k steps, seeds 1-3): a cue at the start
  says which end of a corridor pays; the best return is 1.0, a guess averages about -0.3.
- `ProofofMemory-v0+self`: the same with `--trxl-attend-self` (each step attends to its own fresh state too,
  the script's default until 2026-12-05; with memory length 1 it attends to itself only).
- `MiniGrid-MemoryS9-v0` (the reference's hyperparameters and its published budget, 2,048,000 steps, seeds 1
  and 2): an object shown in the first room must be matched at the corridor's end (MiniGrid pays
  1 - 0.9 x steps / 405 for the right one, 0 otherwise; the script cuts episodes at 96 steps); a guess succeeds
  half the time. This is the check the README row reports.
- History, not queued (their summaries are committed): `MiniGrid-MemoryS9-v0+self` (500k steps, seed 1) and
  `MiniGrid-MemoryS9-v0+self+ent0.01` (the same with a 100x larger entropy bonus), both with
  `--trxl-attend-self`, measured in 2026-12 before the default changed.

The score of a run is over its last `LAST_EPISODES` episodes: the mean return and the success rate
(the share of episodes with a positive return). A task passes when every seed with memory succeeds in
at least `SUCCESS_BAR` of its episodes and every seed without memory at least `ABLATION_GAP` less.

`cue` asks what a MiniGrid Memory agent does with its memory: it plays episodes with the policy of a
run's checkpoint (actions sampled, as in training) and splits the success rate by whether the cue object
was in the agent's view at its first step, later in the episode, or never. An agent that remembers what
it saw succeeds almost always once it has seen the cue; one that does not, half the time either way.

The runs go through the project's runner (harness's queue, logs under `--out`/logs). A MiniGrid run writes a
checkpoint every 4 iterations (16,384 steps) and `run` started again goes on from the newest one; a
ProofofMemory run (~2 min) starts over. Cost of the 2M check, from the 500k runs (one torch thread each, two side
by side): the memory run ~80-97 steps/s (~6.5 h), the memory-1 run ~220 (~2.6 h); 2 seeds: ~18 core-hours. The
summaries (`*.json` under `--out`) are committed under benchmark/results/trxl_memory/.
"""

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import (
    CommandLine,
    QueuedRun,
    queue_command,
    report_command,
    summarize_run,
    torch_threads_env,
)

REPO = Path(__file__).resolve().parents[2]

LAST_EPISODES = 100
SUCCESS_BAR = 0.9
ABLATION_GAP = 0.15
PROGRAM = (str(REPO / "cleanrl" / "ppo_trxl" / "ppo_trxl.py"),)


@dataclass(frozen=True)
class Check:
    env_id: str
    flags: tuple[str, ...]  # the task's hyperparameters, but its memory length
    memory_length: int  # the full memory; the ablation runs with 1
    total_timesteps: int
    seeds: tuple[int, ...]
    checkpoint_every: int = 0  # iterations between checkpoints (0: none; a stopped run starts over)
    variant: str = ""  # names a check whose flags depart from the published ones (its own --only name and files)

    @property
    def name(self) -> str:
        return f"{self.env_id}+{self.variant}" if self.variant else self.env_id

    def result(self, out: Path, memory_length: int, seed: int) -> Path:
        return out / f"ppo_trxl__{self.name}__memory{memory_length}__{self.total_timesteps}__{seed}.json"


# the reference's hyperparameters for MiniGrid-MemoryS9-v0 (published budget 2,048,000 steps), for every MiniGrid check;
# its docs' command lacks the line continuation before --clip_coef 0.2, so a literal copy runs with the default 0.1: we
# pass 0.2, as the command was written
MINIGRID_FLAGS = (
    "--num-envs", "16", "--num-steps", "256", "--trxl-num-layers", "2", "--trxl-num-heads", "4", "--trxl-dim", "256",
    "--max-grad-norm", "0.25", "--anneal-steps", "4096000", "--clip-coef", "0.2",
)  # fmt: skip

# the reference's hyperparameters for ProofofMemory-v0
PROOF_OF_MEMORY_FLAGS = (
    "--num-envs", "16", "--num-steps", "128", "--num-minibatches", "8", "--update-epochs", "4",
    "--trxl-num-layers", "4", "--trxl-num-heads", "1", "--trxl-dim", "64", "--trxl-positional-encoding", "none",
    "--vf-coef", "0.1", "--max-grad-norm", "0.5", "--init-lr", "3.0e-4", "--init-ent-coef", "0.001",
    "--clip-coef", "0.2",
)  # fmt: skip

CHECKS = [
    # the original's window (the default): each step attends to the earlier steps of its window
    Check("ProofofMemory-v0", PROOF_OF_MEMORY_FLAGS, 16, 25_000, (1, 2, 3)),
    # the same, each step attending to its own fresh state too
    Check("ProofofMemory-v0", (*PROOF_OF_MEMORY_FLAGS, "--trxl-attend-self"), 16, 25_000, (1, 2, 3), variant="self"),
    # MiniGrid-MemoryS9-v0 at its published budget (2,048,000 steps, lr and entropy annealed over 4,096,000)
    Check("MiniGrid-MemoryS9-v0", MINIGRID_FLAGS, 64, 2_048_000, (1, 2), checkpoint_every=4),
    # history: a quarter of the budget with the window that held the step itself, and the same with a 100x larger
    # entropy bonus (0.01 for 1e-4, annealed the same way): is the plateau one of too little exploration?
    Check(
        "MiniGrid-MemoryS9-v0", (*MINIGRID_FLAGS, "--trxl-attend-self"), 64, 500_000, (1,), checkpoint_every=4, variant="self"
    ),
    Check(
        "MiniGrid-MemoryS9-v0",
        (*MINIGRID_FLAGS, "--trxl-attend-self", "--init-ent-coef", "0.01"),
        64, 500_000, (1,), checkpoint_every=4, variant="self+ent0.01",
    ),
]  # fmt: skip


def learning_runs(out: Path, only: list[str] | None) -> list[QueuedRun]:
    runs = []
    for check in CHECKS:
        if only and check.name not in only:
            continue
        for seed in check.seeds:
            for memory_length in (check.memory_length, 1):
                result = check.result(out, memory_length, seed)
                args = (*check.flags, "--trxl-memory-length", str(memory_length))
                args += ("--total-timesteps", str(check.total_timesteps), "--cuda", "False")
                summarize = partial(summarize_run, result=result, env_id=check.env_id, memory_length=memory_length)
                run = QueuedRun(result, PROGRAM, args, check.env_id, seed, check.checkpoint_every, summarize)
                runs.append(run)
    return runs


def scores(result: Path) -> tuple[float, float, int]:
    """(mean return, success rate, episodes) over the run's last LAST_EPISODES episodes."""
    returns = json.loads(result.read_text())["episodic_returns"][-LAST_EPISODES:]
    return statistics.fmean(returns), sum(r > 0 for r in returns) / len(returns), len(returns)


def report(out: Path) -> str:
    lines = [
        f"| env | steps | memory length | seed | mean return, last {LAST_EPISODES} episodes | success rate | SPS |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for check in CHECKS:
        success: dict[int, list[float]] = {check.memory_length: [], 1: []}
        for memory_length in (check.memory_length, 1):
            for seed in check.seeds:
                if not (result := check.result(out, memory_length, seed)).exists():
                    continue  # not run: no row rather than a made-up one
                mean_return, rate, episodes = scores(result)
                success[memory_length].append(rate)
                sps = json.loads(result.read_text())["sps"]
                lines.append(
                    f"| {check.name} | {check.total_timesteps // 1000}k | {memory_length} | {seed} | {mean_return:.2f} "
                    f"| {rate:.2f} ({episodes} episodes) | {sps:.0f} |"
                )
        if len(success[check.memory_length]) == len(success[1]) == len(check.seeds):
            solved = min(success[check.memory_length]) >= SUCCESS_BAR
            gap = min(success[check.memory_length]) - max(success[1]) >= ABLATION_GAP
            verdict = "passes" if solved and gap else "**fails**"
            verdicts.append(
                f"{check.name}, {check.total_timesteps // 1000}k steps: {verdict} (with memory every seed ≥ {SUCCESS_BAR:g}: {'yes' if solved else 'no'}; "
                f"without memory at least {ABLATION_GAP:g} below: {'yes' if gap else 'no'})."
            )
    return "\n".join(lines + ([""] + verdicts if verdicts else []))


@dataclass(frozen=True)
class CueEpisode:
    seen_at_start: bool  # the cue object was in the agent's view at its first step
    seen: bool  # ... at any step of the episode
    success: bool


def cue_episodes(env, act, episodes: int, seed: int) -> list[CueEpisode]:
    """Play `episodes` episodes of a MiniGrid Memory env with `act(obs, episode_start) -> action`."""
    memory_env = env.unwrapped
    played = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        cue = (1, memory_env.height // 2 - 1)  # where MiniGrid's MemoryEnv puts the object to remember
        seen_at_start = seen = bool(memory_env.agent_sees(*cue))
        episode_start, done = True, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs, episode_start))
            episode_start, done = False, terminated or truncated
            seen = seen or bool(memory_env.agent_sees(*cue))
        played.append(CueEpisode(seen_at_start, seen, reward > 0))
    return played


def cue_report(played: list[CueEpisode]) -> str:
    groups = [
        ("cue in view at the first step", [e for e in played if e.seen_at_start]),
        ("cue seen later in the episode", [e for e in played if e.seen and not e.seen_at_start]),
        ("cue never seen", [e for e in played if not e.seen]),
        ("all", played),
    ]
    lines = ["| episodes | count | success rate |", "|---|---|---|"]
    for label, group in groups:
        rate = f"{sum(e.success for e in group) / len(group):.2f}" if group else "–"
        lines.append(f"| {label} | {len(group)} | {rate} |")
    return "\n".join(lines)


def saved_policy(saved: dict, env):
    """`act(obs, episode_start)` for one env: the policy of a ppo_trxl.py checkpoint or model file, its memory emptied
    per episode."""
    import numpy as np

    from cleanrl.ppo_trxl.ppo_trxl import Agent
    from cleanrl_utils.runtime.evals.common import with_weights
    from cleanrl_utils.runtime.evals.special import memory_policy

    agent = Agent(argparse.Namespace(**saved["args"]), env.observation_space, env.action_space, env.spec.max_episode_steps)
    act = memory_policy(with_weights(agent, saved["agent"] if "agent" in saved else saved["model_weights"], "cpu"), "cpu")
    return lambda obs, episode_start: int(act(obs[None], np.array([episode_start]))[0])


class CueError(Exception):
    """A file `cue` cannot play: one `trxl_memory.py: error: cue:` line and exit code 2."""


def read_saved(path: Path) -> dict:
    """A ppo_trxl.py checkpoint (plain data, as --resume reads it) or model file (a torch.save file of tensors, as
    the evaluators read it): told apart by their first bytes, read without running anything from the file."""
    from cleanrl_utils.runtime import model_files, plain_data

    with plain_data.open_regular(path) as file:
        is_checkpoint = file.read(len(plain_data.MAGIC)) == plain_data.MAGIC
    return plain_data.read(path) if is_checkpoint else model_files.read_torch(path)


def cue(path: Path, episodes: int, seed: int) -> str:
    import torch

    from cleanrl.ppo_trxl.ppo_trxl import make_env

    try:
        saved = read_saved(path)
        env_id = saved["args"]["env_id"]
        if not isinstance(env_id, str):
            raise TypeError("its env id is not a string")
    except Exception as e:  # any unreadable file: one line, not a traceback
        reason = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        raise CueError(f"{path} is not a ppo_trxl.py checkpoint or model file ({reason})") from None
    if not isinstance(saved.get("agent", saved.get("model_weights")), dict):
        raise CueError(f"{path} holds no weights (neither 'agent' nor 'model_weights')")
    if not env_id.startswith("MiniGrid-Memory") or ":" in env_id:
        raise CueError(f"{path} is a run of {env_id}, not of a MiniGrid Memory env")
    env = make_env(env_id, 0, False, "")()
    try:  # the network is built from the file's arguments and weights: ones that do not fit are one line too
        policy = saved_policy(saved, env)
    except (TypeError, ValueError, KeyError, AttributeError, RuntimeError, OverflowError, MemoryError) as e:
        reason = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        raise CueError(f"{path} holds no ppo_trxl.py network this tool can build ({reason})") from None
    torch.manual_seed(seed)  # the sampled actions: the same command gives the same table
    return cue_report(cue_episodes(env, policy, episodes, seed))


def cue_command(checkpoint: Path | None, episodes: int, seed: int) -> int | None:
    """`cue`'s table for a run's checkpoint or model file; exit code 2 for a file it cannot play."""
    if checkpoint is None or not checkpoint.is_file():
        print(f"trxl_memory.py: error: cue needs a run's checkpoint or model file, got {checkpoint}", file=sys.stderr)
        return 2
    try:
        print(cue(checkpoint, episodes, seed))
    except CueError as e:
        print(f"trxl_memory.py: error: cue: {e}", file=sys.stderr)
        return 2
    return None


def main() -> None:
    cli = CommandLine(
        __doc__,
        "trxl_memory",
        {
            "run": queue_command(
                lambda args: learning_runs(args.out, args.only), lambda args: torch_threads_env(args.threads)
            ),
            "report": report_command(report),
            "cue": lambda args: cue_command(args.checkpoint, args.episodes, args.seed),
        },
        only_help="run: only these checks (env ids; env+variant for a variant)",
    )
    cli.parser.add_argument("checkpoint", nargs="?", type=Path, help="cue: a MiniGrid run's checkpoint or saved model")
    cli.count("--episodes", 500, "cue: episodes to play")
    cli.parser.add_argument("--seed", type=int, default=0, help="cue: seed of the first episode's reset (then +1 each)")
    cli.count("--workers", 1, "run: learning runs at a time")
    cli.count("--threads", 2, "run: torch threads per run")
    cli.run(cli.parse(dict.fromkeys(cli.commands, [check.name for check in CHECKS])))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
