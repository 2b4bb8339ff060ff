"""Evaluate a saved `ppo.py` model: the policy samples its actions, as in training."""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, on_numpy, vector_env_returns
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


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
    agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    return vector_env_returns(envs, on_numpy(agent.act, device, torch.float32), eval_episodes, seed)
