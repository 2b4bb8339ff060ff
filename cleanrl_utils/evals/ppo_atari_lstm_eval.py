"""Evaluate a saved `ppo_atari_lstm.py` model on whole games, with its memory carried from step to step.

The LSTM state returned by one step is fed to the next, and zeroed after each episode end as in
training; the script's env factory ends an episode at each lost life, so that is where the memory
restarts. Returns are counted per whole game, with its raw score (see `ppo_atari_eval`).
"""

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import _collect
from cleanrl_utils.evals.ppo_atari_eval import finished_game_returns


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
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    agent = Model(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device, weights_only=True))
    agent.eval()
    lstm_state = agent.initial_state(1, device)
    start = torch.zeros(1, device=device)  # 1 after an episode ended: the state is zeroed before the next step

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        nonlocal lstm_state, start
        with torch.inference_mode():
            action, _, _, lstm_state = agent.act(torch.as_tensor(obs, device=device), lstm_state, start)
        obs, _, terminations, truncations, infos = envs.step(action.cpu().numpy())
        start = torch.tensor(terminations | truncations, dtype=torch.float32, device=device)
        return obs, finished_game_returns(infos)

    return _collect(envs, step, eval_episodes, seed)
