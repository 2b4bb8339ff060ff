"""Evaluate a saved `c51_atari.py` model on whole games, epsilon-greedy on its Q-values (the means of its distributions).

The script's env factory ends an episode at each lost life (for learning) and keeps the raw score of
the whole game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is
counted only when a game ends, and it is the game's score, not one life's clipped rewards.
`rainbow_atari_eval` plays the same way, with its own network.
"""

import random
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import _collect


def load_distributional(
    model_path: str, env: gym.Env, Model: type[torch.nn.Module], device: torch.device | str, script: str
) -> torch.nn.Module:
    """The network saved as {model_weights, args}, rebuilt on the support (n_atoms, v_min, v_max) of its args."""
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if not isinstance(saved, dict) or "model_weights" not in saved:
        raise ValueError(f"{model_path} is not a {script} model (expected a dict with model_weights and args)")
    support = {key: saved["args"][key] for key in ("n_atoms", "v_min", "v_max")}
    model = Model(env, **support).to(device)
    model.load_state_dict(saved["model_weights"])
    return model.eval()


def whole_game_returns(
    env: gym.Env, model: torch.nn.Module, epsilon: float, device: torch.device | str, eval_episodes: int, seed: int
) -> list[float]:
    """Scores of `eval_episodes` whole games, acting epsilon-greedily on `model(obs)` (one Q-value per action)."""

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
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    model = load_distributional(model_path, env, Model, device, "c51_atari.py")
    return whole_game_returns(env, model, epsilon, device, eval_episodes, seed)
