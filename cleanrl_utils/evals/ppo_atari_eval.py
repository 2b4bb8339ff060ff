"""Evaluate a saved `ppo_atari.py` model on whole games: the policy samples its actions, as in training.

The script's env factory ends an episode at each lost life (for learning) and keeps the raw score of
the whole game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is
counted only when a game ends, and it is the game's score, not one life's clipped rewards.
"""

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import _collect


def finished_game_returns(infos: dict) -> list[float]:
    """Raw returns of the games that ended in a SAME_STEP vector-env step (a lost life alone is not one)."""
    final = infos.get("final_info", {})
    return [float(final["episode"]["r"][i]) for i in np.flatnonzero(final.get("_episode", ()))]


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

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        with torch.inference_mode():
            action = agent.act(torch.as_tensor(obs, device=device))[0]
        obs, _, _, _, infos = envs.step(action.cpu().numpy())
        return obs, finished_game_returns(infos)

    return _collect(envs, step, eval_episodes, seed)
