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

from cleanrl_utils.evals.episodes import _collect


def load_model(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The saved dict: {"agent": state_dict, "obs_rms": {"mean", "var", "count"}}."""
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if not isinstance(saved, dict) or not {"agent", "obs_rms"} <= set(saved):
        raise ValueError(f"{model_path} holds no agent weights with observation statistics")
    return saved


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
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name, gamma)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    saved = load_model(model_path, device)
    agent = Model(envs).to(device)
    agent.load_state_dict(saved["agent"])
    agent.eval()
    restore_obs_rms(envs, saved["obs_rms"])

    def step(obs):
        with torch.inference_mode():
            action = agent.act(torch.as_tensor(obs, dtype=torch.float32, device=device), deterministic=deterministic)
        obs, _, _, _, infos = envs.step(action.cpu().numpy())
        if "final_info" not in infos:
            return obs, []
        episode = infos["final_info"]["episode"]
        return obs, [float(episode["r"][i]) for i in np.flatnonzero(infos["final_info"]["_episode"])]

    return _collect(envs, step, eval_episodes, seed)
