"""Evaluate a saved `ppo_pettingzoo_ma_atari.py` model: its shared self-play policy against a random player.

In self-play one policy holds both paddles, so the training returns stay near 0 however well it plays.
Here the policy holds one side of each game and the other side presses uniformly random buttons; the
policy takes side 0 (`first_0`) in even-numbered games and side 1 (`second_0`) in odd ones, so that
neither seat's advantage decides the result. A game's score is the number of points the policy's side
won: the steps at which its reward was positive. The script's wrappers clip rewards to ±1, so in Pong
a +1 is one point; points lost and Pong's penalty for serving late (both -1) do not count. The same
count for a random player on the policy's side (`act=None`) is the baseline a trained policy should beat.

The games run on the script's own env stack (`make_vector_env` with 2 player envs: one game copy, its
players as envs 0 and 1), so both players' episodes end together, when the game is over or cut by
`max_cycles`. The random actions come from a NumPy Generator seeded with `seed`, and the emulator is
reset with `seed` too: the same seed and policy play the same games.
"""

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import Act, _collect, closed_on_error, on_numpy
from cleanrl_utils.evals.torch_models import read_model_file, with_weights

MAX_CYCLES = 100_000
"""Emulator frames after which a game is cut: the script's default `--max-cycles` (PettingZoo's own)."""


def make_game(
    make_env: Callable, env_id: str, max_cycles: int = MAX_CYCLES, capture_video: bool = False
) -> gym.vector.VectorEnv:
    """One copy of the game from the script's `make_vector_env`, its two players as envs 0 and 1.

    The single-env spaces are set as the script sets them, so the script's `Agent(envs)` can be built on it.
    """
    envs = make_env(env_id, 2, max_cycles, capture_video)
    envs.single_observation_space, envs.single_action_space = envs.observation_space, envs.action_space
    return envs


def play_against_random(
    envs: gym.vector.VectorEnv, act: Act | None, games: int, seed: int = 0, video: Any = None
) -> list[float]:
    """Points of the policy's side in each of `games` games against a uniformly random opponent; `envs` is closed after.

    `envs` is one game copy (`make_game`). The policy's side is player `game % 2`. `act` maps a batch of
    observations (here one) to a batch of actions (as `on_numpy` makes of a network); None puts a random
    player on the policy's side as well. `video`, the script's `VideoRecorder` on `envs`, is told of each step.
    """
    rng = np.random.default_rng(seed)
    num_actions = envs.single_action_space.n
    game, points = 0, 0.0

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        nonlocal game, points
        side = game % 2
        actions = rng.integers(num_actions, size=2)  # drawn for both sides, so the opponent's draws do not depend on act
        if act is not None:
            actions[side] = np.asarray(act(obs[side : side + 1])).reshape(-1)[0]
        obs, rewards, terminations, truncations, _ = envs.step(actions)
        points += float(rewards[side] > 0)
        game_over = bool((terminations | truncations).all())  # the game copy resets only when both players are done
        if video is not None:
            video.step(game_ended=game_over)
        if not game_over:
            return obs, []
        finished, points, game = points, 0.0, game + 1
        return obs, [finished]

    try:
        return _collect(envs, step, games, seed)
    finally:
        if video is not None:
            video.close()


def points_against_random(
    make_env: Callable, env_id: str, act: Act | None, games: int, seed: int = 0, max_cycles: int = MAX_CYCLES
) -> list[float]:
    """Points per game of `act` (None: a random player) against a random opponent, sides alternating by game.

    For benchmarks: the random-vs-random baseline of Pong is `points_against_random(make_vector_env, "pong_v3",
    None, games)`, with the script's `make_vector_env` (e.g. from `cleanrl_utils.zoo`'s entry).
    """
    return play_against_random(make_game(make_env, env_id, max_cycles), act, games, seed)


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
    *,
    VideoRecorder: type | None = None,
    max_cycles: int = MAX_CYCLES,
) -> list[float]:
    """Points per game of the saved policy (sampling its actions, as in training) against a random opponent.

    With `capture_video`, the script's `VideoRecorder` films games 0, 1, 8, ... into `videos/{run_name}`.
    """
    if capture_video and VideoRecorder is None:
        raise TypeError("capture_video needs the script's VideoRecorder")
    envs = make_game(make_env, env_id, max_cycles, capture_video)
    with closed_on_error(envs):
        agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    video = VideoRecorder(envs, f"videos/{run_name}") if capture_video else None
    return play_against_random(envs, on_numpy(lambda x: agent.act(x)[0], device), eval_episodes, seed, video)
