"""Evaluate a saved `ppo_continuous_action.py` / `rpo_continuous_action.py` model.

The saved file holds the agent's weights and the observation-normalisation statistics of training; they
are restored into the eval env's NormalizeObservation wrapper and frozen there, so the agent sees its
observations exactly as it saw them at the end of training. Returns are the environment's own rewards,
counted by the RecordEpisodeStatistics wrapper inside the env, before any reward scaling.
"""

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.episodes import final_info_returns, make_eval_vector_env, on_numpy, vector_env_returns
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


def load_model(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The saved dict: {"agent": state_dict, "obs_rms": {"mean", "var", "count"}}."""
    return read_model_file(model_path, device, {"agent", "obs_rms"}, "holds no agent weights with observation statistics")


def restore_obs_rms(envs: gym.vector.SyncVectorEnv, obs_rms: dict) -> None:
    """Put the training statistics into every sub-env's NormalizeObservation wrapper and stop updating them."""
    for env in envs.envs:
        while not isinstance(env, gym.wrappers.NormalizeObservation):
            env = env.env
        env.obs_rms.mean = np.asarray(obs_rms["mean"].cpu(), dtype=np.float64)
        env.obs_rms.var = np.asarray(obs_rms["var"].cpu(), dtype=np.float64)
        env.obs_rms.count = float(obs_rms["count"])
        env.update_running_mean = False


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
    gamma: float = 0.99,
    deterministic: bool = False,
) -> list[float]:
    """Play `eval_episodes` episodes; the policy samples as in training (`deterministic`: acts with its mean)."""
    # the returns are counted inside the env, before the reward scaling that follows its statistics
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video, gamma, episode_statistics=False)
    saved = load_model(model_path, device)
    agent = with_weights(Model(envs), saved["agent"], device)
    restore_obs_rms(envs, saved["obs_rms"])
    act = on_numpy(lambda x: agent.act(x, deterministic=deterministic), device, torch.float32)
    return vector_env_returns(envs, act, eval_episodes, seed, returns=final_info_returns)
