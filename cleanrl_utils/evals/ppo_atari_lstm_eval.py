"""Evaluate a saved `ppo_atari_lstm.py` model on whole games, with its memory carried from step to step.

The LSTM state returned by one step is fed to the next, and zeroed after each episode end as in
training; the script's env factory ends an episode at each lost life, so that is where the memory
restarts. Returns are counted per whole game, with its raw score (see `ppo_atari_eval`).
"""

from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import final_info_returns, make_eval_vector_env, vector_env_returns_with_memory
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
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video, episode_statistics=False)
    agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    lstm_state = agent.initial_state(1, device)

    def act(obs: np.ndarray, ended: np.ndarray) -> np.ndarray:
        nonlocal lstm_state
        start = torch.tensor(ended, dtype=torch.float32, device=device)  # 1: the state is zeroed before this step
        with torch.inference_mode():
            action, _, _, lstm_state = agent.act(torch.as_tensor(obs, device=device), lstm_state, start)
        return action.cpu().numpy()

    return vector_env_returns_with_memory(envs, act, eval_episodes, seed, returns=final_info_returns)
