"""Evaluate a saved `ppo_atari.py` model on whole games: the policy samples its actions, as in training.

The script's env factory ends an episode at each lost life (for learning) and keeps the raw score of
the whole game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is
counted only when a game ends, and it is the game's score, not one life's clipped rewards: the
sub-env's own statistics count (`final_info_returns`), not statistics around the vector env.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import final_info_returns, make_eval_vector_env, on_numpy, vector_env_returns
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
    act = on_numpy(lambda x: agent.act(x)[0], device)
    return vector_env_returns(envs, act, eval_episodes, seed, returns=final_info_returns)
