"""Evaluate a saved `c51.py` model with epsilon-greedy actions on its Q-values (the means of its distributions).

The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import epsilon_greedy, make_eval_env, single_env_returns
from cleanrl_utils.evals.torch_models import load_distributional


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
    model = load_distributional(model_path, env, Model, device, "c51.py")
    return single_env_returns(env, epsilon_greedy(model, env.action_space, epsilon, device), eval_episodes, seed)
