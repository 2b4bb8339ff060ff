"""Where the Atari files take the two-frame max, and what each order costs: frames against the original's, and speed.

    python -m benchmark.studies.atari_frame_order [--games Breakout Pong ...] [--frames 300]
        [--env-steps 2000] [--env-rounds 5] [--run-steps 8192] [--run-rounds 3] [--out PATH]

The original CleanRL (Gymnasium 0.29 wrappers) takes RGB frames from the ALE, `MaxAndSkipEnv` maxes the last two
RGB frames, `ResizeObservation` resizes the RGB frame to 84x84 (OpenCV, INTER_AREA) and `GrayScaleObservation`
turns it gray (OpenCV's RGB-to-gray). Three orders of those steps:

- `original`: max on RGB, resize the RGB frame, then gray (the original's order; the Atari files' since issue 55);
- `gray_after_max`: max on RGB, gray, then resize (SB3's `WarpFrame`);
- `gray_max`: gray frames from the emulator (`obs_type="grayscale"`), max on gray, then resize (before issue 55).

Frames: each game is reset with one seed and played with one sequence of random actions through each order (the
scripts' wrappers: no-op reset, max and skip 4, episodic life, FIRE reset, reward clipping); every final 84x84
frame is compared with the original's: the largest gray-level difference and the share of pixels that differ.

Speed, in paired rounds whose order turns each round (read ratios: other work may share the machine), per second
of wall-clock time and per second of CPU time (what the measured process computed, whoever else runs):
- the wrapped env alone on the same random actions (`--env-steps` per round, per game in `--speed-games`);
- `cleanrl/ppo_atari.py` on Breakout, `--run-steps` per run, one torch thread: its last `charts/SPS`, and its steps
  per CPU second (start-up included); the file as it is with its `make_env` replaced by this module's for each
  order (`--run-steps 0` skips the runs).
"""

from __future__ import annotations

import argparse
import ast
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np
from stable_baselines3.common.atari_wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    MaxAndSkipEnv,
    NoopResetEnv,
    WarpFrame,
)

from benchmark.harness import REPO, markdown_table, measured_at, positive_int, torch_threads_env
from cleanrl_utils.runtime import atomic
from cleanrl_utils.runtime.experiment import register_atari_games
from cleanrl_utils.tensorboard_reader import read_scalars

ORDERS = ("original", "gray_after_max", "gray_max")
GAMES = ("Breakout", "Pong", "Enduro", "MsPacman", "Qbert", "BeamRider", "Seaquest", "SpaceInvaders")
FRAME = gym.spaces.Box(0, 255, (84, 84), np.uint8)


def resize_then_gray(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(cv2.resize(rgb, (84, 84), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY)


def atari_env(env_id: str, order: str) -> gym.Env:
    """The Atari files' wrappers with the frames made in `order`; the last lines are each order's own."""
    register_atari_games()
    obs_type = "grayscale" if order == "gray_max" else "rgb"
    env = gym.make(env_id, disable_env_checker=True, obs_type=obs_type)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = MaxAndSkipEnv(NoopResetEnv(env, noop_max=30), skip=4)
    env = EpisodicLifeEnv(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireResetEnv(env)
    env = ClipRewardEnv(env)
    if order == "original":
        env = gym.wrappers.TransformObservation(env, resize_then_gray, FRAME)
    elif order == "gray_after_max":
        env = gym.wrappers.ReshapeObservation(WarpFrame(env), (84, 84))
    else:
        env = gym.wrappers.ResizeObservation(env, (84, 84))
    return gym.wrappers.FrameStackObservation(env, 4)


def env_factory(order: str):
    """A stand-in for a script's `make_env(env_id, idx, capture_video, run_name)` that makes `order`'s frames."""
    return lambda env_id, idx, capture_video, run_name: lambda: atari_env(env_id, order)


def played_frames(env_id: str, order: str, steps: int, seed: int) -> np.ndarray:
    """The newest frame of each observation over `steps` random actions (generator seeded 0) from `reset(seed)`."""
    env, rng = atari_env(env_id, order), np.random.default_rng(0)
    obs, _ = env.reset(seed=seed)
    frames = [obs[-1]]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()
        frames.append(obs[-1])
    env.close()
    return np.stack(frames).astype(int)


def env_steps_per_second(env_id: str, order: str, steps: int) -> tuple[float, float]:
    """Steps per second of wall-clock time and per second of this process's CPU time, on the same random actions."""
    env, rng = atari_env(env_id, order), np.random.default_rng(0)
    actions = rng.integers(env.action_space.n, size=steps)
    env.reset(seed=1)
    start, cpu_start = time.perf_counter(), time.process_time()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    env.close()
    return steps / elapsed, steps / cpu


def script_with_order(order: str, folder: Path) -> Path:
    """cleanrl/ppo_atari.py with its `make_env` definition replaced by `env_factory(order)`, written in `folder`."""
    source = (REPO / "cleanrl" / "ppo_atari.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "make_env")
    lines = source.splitlines()
    stand_in = f"from benchmark.studies.atari_frame_order import env_factory\nmake_env = env_factory({order!r})"
    path = folder / f"ppo_atari_{order}.py"
    path.write_text("\n".join([*lines[: node.lineno - 1], stand_in, *lines[node.end_lineno :]]) + "\n")
    return path


def run_sps(script: Path, steps: int) -> tuple[float, float]:
    """The last `charts/SPS` of `script` on Breakout for `steps` steps, one torch thread, in a folder of its own, and
    its steps per CPU second (the whole process's, start-up included)."""
    cpu_start = children_cpu()
    with tempfile.TemporaryDirectory(prefix="frame-order-") as tmp:
        argv = [sys.executable, str(script), "--env-id", "BreakoutNoFrameskip-v4", "--total-timesteps", str(steps)]
        proc = subprocess.run(
            argv, cwd=tmp, env=torch_threads_env(1) | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True
        )
        if proc.returncode:
            raise SystemExit(f"atari_frame_order: error: {script.name} failed:\n{proc.stderr[-2000:]}")
        cpu = children_cpu() - cpu_start
        return next(read_scalars(d)["charts/SPS"][-1][1] for d in (Path(tmp) / "runs").iterdir()), steps / cpu


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def paired_rounds(rounds: int, measure) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """`measure(order)` (a wall-clock rate, a CPU-time rate) for every order, `rounds` times, the order of the orders
    turning each round; the wall-clock rates and the CPU-time rates of each order."""
    wall, cpu = {order: [] for order in ORDERS}, {order: [] for order in ORDERS}
    for round_ in range(rounds):
        for order in ORDERS[round_ % len(ORDERS) :] + ORDERS[: round_ % len(ORDERS)]:
            rate, cpu_rate = measure(order)
            wall[order].append(rate)
            cpu[order].append(cpu_rate)
        print(f"round {round_ + 1}: " + ", ".join(f"{o} {wall[o][-1]:.0f} ({cpu[o][-1]:.0f} per CPU s)" for o in ORDERS))
    return wall, cpu


def ratio_cells(found: dict[str, list[float]], order: str, to: str = "gray_max") -> str:
    ratios = [a / b for a, b in zip(found[order], found[to])]
    return f"{statistics.median(ratios):.2f}× ({', '.join(f'{r:.2f}' for r in ratios)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), help="games, as in <Game>NoFrameskip-v4")
    parser.add_argument("--frames", type=positive_int, default=300, help="random-action steps compared per game")
    parser.add_argument("--seed", type=int, default=3, help="the reset seed of every game")
    parser.add_argument("--speed-games", nargs="+", default=["Breakout", "MsPacman"], help="games timed alone")
    parser.add_argument("--env-steps", type=positive_int, default=2000, help="steps per timing of the env alone")
    parser.add_argument("--env-rounds", type=positive_int, default=5, help="paired rounds of the env alone")
    parser.add_argument("--run-steps", type=int, default=8192, help="ppo_atari.py's budget per run; 0: no runs")
    parser.add_argument("--run-rounds", type=positive_int, default=3, help="paired rounds of ppo_atari.py")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark" / "results" / "atari_frame_order.md")
    options = parser.parse_args()

    rows = []
    for game in options.games:
        env_id = f"{game}NoFrameskip-v4"
        original = played_frames(env_id, "original", options.frames, options.seed)
        cells = [game]
        for order in ("gray_max", "gray_after_max"):
            gap = np.abs(played_frames(env_id, order, options.frames, options.seed) - original)
            cells += [gap.max(), f"{(gap > 0).mean():.2%}", f"{(gap > 1).mean():.2%}"]
        rows.append(cells)
        print(" | ".join(map(str, cells)), flush=True)

    env_speed = {}
    for game in options.speed_games:
        env_id = f"{game}NoFrameskip-v4"
        env_speed[game] = paired_rounds(options.env_rounds, lambda o, e=env_id: env_steps_per_second(e, o, options.env_steps))
    run_speed = None
    if options.run_steps:
        with tempfile.TemporaryDirectory(prefix="frame-order-scripts-") as folder:
            scripts = {order: script_with_order(order, Path(folder)) for order in ORDERS}
            run_speed = paired_rounds(options.run_rounds, lambda o: run_sps(scripts[o], options.run_steps))

    command = shlex.join(["python", "-m", "benchmark.studies.atari_frame_order", *sys.argv[1:]])
    text = ["# Atari frames: where the two-frame max is taken, against the original's order", "", measured_at(command), ""]
    text += [
        f"Frames: {options.frames} random-action steps per game from `reset(seed={options.seed})`, the newest 84×84 frame",
        "of each observation against the original's (max on RGB, resize, gray): the largest gray-level difference,",
        "the share of pixels that differ, and the share that differ by more than one level.",
        "",
        markdown_table(
            ("game", "gray max: largest", "differing", "by > 1", "gray after max: largest", "differing", "by > 1"), rows
        ),
        "",
        "Speed: each round's ratio of steps per second, and their median; the order of the sides turns each round.",
        "Per second of wall-clock time, and per second of the measured process's CPU time (less sensitive to other",
        "work sharing the machine: it counts what the process itself computed).",
        "",
    ]
    measures = {}
    for game, (wall, cpu) in env_speed.items():
        measures[f"env alone, {game} ({options.env_steps} steps), wall clock"] = wall
        measures[f"env alone, {game} ({options.env_steps} steps), CPU time"] = cpu
    if run_speed:
        measures[f"ppo_atari.py, Breakout ({options.run_steps} steps, 1 thread), `charts/SPS`"] = run_speed[0]
        measures[f"ppo_atari.py, Breakout ({options.run_steps} steps, 1 thread), CPU time"] = run_speed[1]
    pairs = [("gray_after_max", "gray_max"), ("original", "gray_max"), ("original", "gray_after_max")]
    speed_rows = [(name, *(ratio_cells(found, order, to) for order, to in pairs)) for name, found in measures.items()]
    text += [markdown_table(("measure", *(f"{order} ÷ {to}" for order, to in pairs)), speed_rows), ""]
    text += ["Steps per second (of wall-clock or CPU time) of each round:", ""]
    text += [
        f"- {name}: " + "; ".join(f"{o} {', '.join(f'{v:.0f}' for v in found[o])}" for o in ORDERS)
        for name, found in measures.items()
    ]
    atomic.write_text(options.out, "\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
