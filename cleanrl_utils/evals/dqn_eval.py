"""Evaluate a saved `dqn.py` model with epsilon-greedy actions."""

import random
from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import make_eval_envs, run_episodes


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
    envs = make_eval_envs(make_env, env_id, run_name, capture_video)
    envs.single_action_space.seed(seed)
    model = Model(envs).to(device)
    model.load_state_dict(torch.load(model_path, map_location=device, weights_only=True))
    model.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        if random.random() < epsilon:
            return np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
        with torch.inference_mode():
            q_values = model(torch.as_tensor(obs, dtype=torch.float32, device=device))
        return q_values.argmax(dim=1).cpu().numpy()

    return run_episodes(envs, act, eval_episodes, seed)
