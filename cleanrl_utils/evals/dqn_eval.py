"""Evaluate a saved `dqn.py` model with epsilon-greedy actions."""

import random
from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import single_env_returns


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
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    model = Model(env).to(device)
    model.load_state_dict(torch.load(model_path, map_location=device, weights_only=True))
    model.eval()

    def act(obs: np.ndarray) -> int:
        if random.random() < epsilon:
            return env.action_space.sample()
        with torch.inference_mode():
            return model(torch.as_tensor(obs, dtype=torch.float32, device=device)).argmax().item()

    return single_env_returns(env, act, eval_episodes, seed)
