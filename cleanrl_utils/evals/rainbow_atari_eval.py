"""Evaluate a saved `rainbow_atari.py` model on whole games: noisy layers off (their means only), nearly greedy.

Noise is how the network explores in training; evaluation plays the mean network, with a random
action at a small rate `epsilon` so that a deterministic policy cannot stall a game.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_env, on_numpy, whole_game_returns
from cleanrl_utils.evals.torch_models import load_distributional


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    epsilon: float = 0.001,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = load_distributional(model_path, env, Model, device, "rainbow_atari.py")  # in eval mode: no noise
    return whole_game_returns(env, on_numpy(model, device), epsilon, eval_episodes, seed)
