"""What ppo_continuous_action.py's environment stack costs on MuJoCo, and the speed-up it caps.

    python -m benchmark.studies.ppo_continuous_env_cost [--env-id Hopper-v4] [--steps 16384] [--rounds 3]

Each round runs `cleanrl/ppo_continuous_action.py` on one thread (its default) and reads its last SPS,
then, in this process, steps the same random actions through two stacks: the file's own vector env
(`make_vector_env`: SyncVectorEnv, RecordEpisodeStatistics, ClipAction, observation and reward
normalisation and clipping) and the bare `gym.make(env_id)`. The difference is what Gymnasium's
vector env and wrappers add per step; the bare env is the simulator itself.

The ceiling is the speed-up the file would get if that difference cost nothing: what replacing
Gymnasium's wrappers with hand-written ones could win at most, with the network and the simulator
left as they are.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from benchmark.harness import markdown_table, measured_at, one_thread_sps, positive_int, this_command
from cleanrl.ppo_continuous_action import Args, make_vector_env
from cleanrl_utils.runtime import atomic

REPO = Path(__file__).resolve().parents[2]


def seconds_per_step(env_id: str, steps: int) -> tuple[float, float]:
    """Seconds per step of the file's vector env with its wrappers, and of the bare env, on the same random actions."""
    envs = make_vector_env(env_id, 1, False, "env-cost", Args.gamma)
    envs.action_space.seed(1)
    actions = [envs.action_space.sample() for _ in range(steps)]
    envs.reset(seed=1)
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    wrapped = (time.perf_counter() - start) / steps
    envs.close()

    env = gym.make(env_id)
    env.reset(seed=1)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(np.clip(action[0], env.action_space.low, env.action_space.high))
        if terminated or truncated:
            env.reset()
    bare = (time.perf_counter() - start) / steps
    env.close()
    return wrapped, bare


def report(env_id: str, steps: int, sps: list[float], wrapped: list[float], bare: list[float]) -> str:
    step = 1 / statistics.median(sps)  # seconds per step of the whole file
    wrapped_s, bare_s = statistics.median(wrapped), statistics.median(bare)
    wrappers = wrapped_s - bare_s

    def each(values: list[float], scale: float, unit: str) -> str:
        median = f"{statistics.median(values) * scale:.0f}" + (f" {unit}" if unit else "")
        return f"{median} ({', '.join(f'{v * scale:.0f}' for v in values)})"

    rows = [
        ("the file's SPS (each round)", each(sps, 1, "")),
        ("one step of the whole file", f"{step * 1e6:.0f} µs"),
        ("one step of its vector env and wrappers", each(wrapped, 1e6, "µs")),
        ("one step of the bare env (the simulator)", each(bare, 1e6, "µs")),
        ("Gymnasium's vector env and wrappers: share of a step", f"{wrappers / step:.0%}"),
        ("the simulator: share of a step", f"{bare_s / step:.0%}"),
        ("the rest (network, update, the loop): share of a step", f"{1 - wrapped_s / step:.0%}"),
        ("ceiling if the vector env and wrappers cost nothing", f"{step / (step - wrappers):.2f}×"),
    ]
    lines = [f"# ppo_continuous_action.py on {env_id}: its environment stack's cost", "", measured_at(this_command()), ""]
    lines += [f"{steps} steps per run and per stack, one torch thread, medians of {len(sps)} rounds.", ""]
    lines += [markdown_table(("measure", "value"), rows)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="Hopper-v4", help="a MuJoCo env id")
    parser.add_argument("--steps", type=positive_int, default=16_384, help="each run's budget and each stack's steps")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds; medians are reported")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark" / "results" / "ppo_continuous_env_cost.md")
    options = parser.parse_args()
    if options.steps < Args.num_steps:
        parser.error(f"--steps must be at least one rollout ({Args.num_steps} steps)")
    sps, wrapped, bare = [], [], []
    for round_ in range(options.rounds):
        sps.append(
            one_thread_sps("ppo_continuous_action", ["--env-id", options.env_id, "--total-timesteps", str(options.steps)])
        )
        stack, simulator = seconds_per_step(options.env_id, options.steps)
        wrapped.append(stack)
        bare.append(simulator)
        print(
            f"round {round_ + 1}: {sps[-1]:.0f} SPS; {stack * 1e6:.0f} µs wrapped, {simulator * 1e6:.0f} µs bare", flush=True
        )
    text = report(options.env_id, options.steps, sps, wrapped, bare)
    atomic.write_text(options.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
