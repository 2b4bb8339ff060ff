"""Evaluate a saved `ppo_trxl/ppo_trxl.py` model: the policy samples its actions with its episodic memory, as in training.

The model file holds the weights and the arguments that rebuild the agent (`model_weights`, `args`,
`max_episode_steps`). The memory of the episode under way is kept here and emptied when it ends.
"""

from collections.abc import Callable
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, vector_env_returns_with_memory
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


def load_agent(
    model_path: str, Model: type[torch.nn.Module], envs: gym.vector.VectorEnv, device: torch.device | str
) -> torch.nn.Module:
    """The agent of a saved model, rebuilt from its stored arguments, in eval mode."""
    saved = read_model_file(model_path, device)
    args = SimpleNamespace(**saved["args"])
    agent = Model(args, envs.single_observation_space, envs.single_action_space, saved["max_episode_steps"])
    return with_weights(agent, saved["model_weights"], device)


def memory_policy(agent: torch.nn.Module, device: torch.device | str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`act(obs, done)` for a one-env vector env: the action for `obs`; `done` (of the previous step) empties the memory."""
    memory = agent.new_memory(1, device)
    episode_step = torch.full((1,), -1, dtype=torch.long, device=device)

    def act(obs: np.ndarray, done: np.ndarray) -> np.ndarray:
        if done.any():
            memory.zero_()
            episode_step.fill_(-1)
        episode_step.add_(1)
        with torch.inference_mode():
            action = agent.act(torch.as_tensor(obs, device=device), memory, episode_step)[0]
        return (action[:, 0] if action.shape[1] == 1 else action).cpu().numpy()

    return act


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
    act = memory_policy(load_agent(model_path, Model, envs, device), device)
    return vector_env_returns_with_memory(envs, act, eval_episodes, seed)
