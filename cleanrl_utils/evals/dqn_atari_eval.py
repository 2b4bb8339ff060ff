"""Evaluate a saved `dqn_atari.py` model on whole games, with epsilon-greedy actions.

The script's env factory ends an episode at each lost life (for learning) and keeps the raw score of
the whole game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is
counted only when a game ends, and it is the game's score, not one life's clipped rewards.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_env, on_numpy, whole_game_returns
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = with_weights(Model(env), read_model_file(model_path, device), device)
    return whole_game_returns(env, on_numpy(model, device), epsilon, eval_episodes, seed)
