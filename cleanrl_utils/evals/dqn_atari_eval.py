"""Evaluate a saved `dqn_atari.py` model on whole games, with epsilon-greedy actions.

The script's env factory ends an episode at each lost life (for learning) and keeps the raw score of
the whole game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is
counted only when a game ends, and it is the game's score, not one life's clipped rewards.
"""

import random
from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import _collect


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

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        if random.random() < epsilon:
            action = env.action_space.sample()
        else:
            with torch.inference_mode():
                action = model(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax().item()
        obs, _, terminated, truncated, info = env.step(action)
        if not (terminated or truncated):
            return obs, []
        # a lost life ends the episode but not the game: the next life starts from this reset
        return env.reset()[0], [float(info["episode"]["r"])] if "episode" in info else []

    return _collect(env, step, eval_episodes, seed)
