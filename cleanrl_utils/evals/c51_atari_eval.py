"""Evaluate a saved `c51_atari.py` model on whole games, epsilon-greedy on its Q-values (the means of its distributions).

The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them.
Games are played and scored as in `dqn_atari_eval` (a return is a whole game's raw score);
`rainbow_atari_eval` plays the same way, with its own network.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_env, on_numpy, whole_game_returns
from cleanrl_utils.evals.torch_models import load_distributional

__all__ = ["evaluate", "load_distributional"]  # load_distributional: where the tests have imported it from


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    epsilon: float = 0.01,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = load_distributional(model_path, env, Model, device, "c51_atari.py")
    return whole_game_returns(env, on_numpy(model, device), epsilon, eval_episodes, seed)
