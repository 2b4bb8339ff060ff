"""Shared episode loop for the evaluators."""

from collections.abc import Callable

import gymnasium as gym
import numpy as np


def make_eval_envs(make_env: Callable, env_id: str, run_name: str, capture_video: bool) -> gym.vector.VectorEnv:
    """One sub-env from the algorithm's own factory, with episode statistics."""
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def run_episodes(
    envs: gym.vector.VectorEnv,
    act: Callable[[np.ndarray], np.ndarray],
    eval_episodes: int,
    seed: int = 0,
) -> list[float]:
    """Step `envs` with `act(obs) -> actions` until `eval_episodes` episodes end; return their returns."""
    if eval_episodes <= 0:
        raise ValueError(f"eval_episodes must be positive, got {eval_episodes}")
    episodic_returns: list[float] = []
    obs, _ = envs.reset(seed=seed)
    try:
        while len(episodic_returns) < eval_episodes:
            obs, _, _, _, infos = envs.step(act(obs))
            for i in np.flatnonzero(infos.get("_episode", [])):
                episodic_return = float(infos["episode"]["r"][i])
                print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
                episodic_returns.append(episodic_return)
    finally:
        envs.close()
    return episodic_returns[:eval_episodes]
