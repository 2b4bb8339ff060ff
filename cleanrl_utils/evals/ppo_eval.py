"""Evaluate a saved `ppo.py` model: the policy samples its actions, as in training."""

from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, vector_env_returns


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
) -> list[float]:
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    agent = Model(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device, weights_only=True))
    agent.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            action = agent.act(torch.as_tensor(obs, dtype=torch.float32, device=device))
        return action.cpu().numpy()

    return vector_env_returns(envs, act, eval_episodes, seed)
