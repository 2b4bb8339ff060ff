"""Episode loops and action rules shared by the evaluators."""

import random
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch


def make_eval_vector_env(make_env: Callable, env_id: str, run_name: str, capture_video: bool) -> gym.vector.VectorEnv:
    """One sub-env from a vector-env script's own factory, with episode statistics."""
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def _collect(env, step: Callable, eval_episodes: int, seed: int) -> list[float]:
    """Reset `env`, then call `step(obs) -> (obs, returns of the episodes that just ended)` until enough ended."""
    if eval_episodes <= 0:
        raise ValueError(f"eval_episodes must be positive, got {eval_episodes}")
    episodic_returns: list[float] = []
    obs, _ = env.reset(seed=seed)
    try:
        while len(episodic_returns) < eval_episodes:
            obs, finished = step(obs)
            for episodic_return in finished:
                print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
                episodic_returns.append(episodic_return)
    finally:
        env.close()
    return episodic_returns[:eval_episodes]


def vector_env_returns(envs: gym.vector.VectorEnv, act: Callable, eval_episodes: int, seed: int = 0) -> list[float]:
    """Step a vector env (with vector RecordEpisodeStatistics) until `eval_episodes` episodes end."""

    def step(obs):
        obs, _, _, _, infos = envs.step(act(obs))
        return obs, [float(infos["episode"]["r"][i]) for i in np.flatnonzero(infos.get("_episode", []))]

    return _collect(envs, step, eval_episodes, seed)


def single_env_returns(env: gym.Env, act: Callable, eval_episodes: int, seed: int = 0) -> list[float]:
    """Step one env (wrapped in RecordEpisodeStatistics) until `eval_episodes` episodes end."""

    def step(obs):
        obs, _, terminated, truncated, info = env.step(act(obs))
        if terminated or truncated:
            return env.reset()[0], [float(info["episode"]["r"])]
        return obs, []

    return _collect(env, step, eval_episodes, seed)


def epsilon_greedy(
    q_network: torch.nn.Module, action_space: gym.Space, epsilon: float, device: torch.device | str
) -> Callable[[np.ndarray], int | np.ndarray]:
    """Act greedily on `q_network(obs)`, at random with probability `epsilon` (decided per sub-env for a batch)."""

    def act(obs: np.ndarray) -> int | np.ndarray:
        batched = isinstance(action_space, gym.spaces.MultiDiscrete)  # a vector env's action space
        if not batched and random.random() < epsilon:
            return action_space.sample()
        with torch.inference_mode():
            greedy = q_network(torch.as_tensor(obs, dtype=torch.float32, device=device)).argmax(-1).cpu().numpy()
        if not batched:
            return int(greedy)
        return np.where(np.random.random(greedy.shape) < epsilon, action_space.sample(), greedy)

    return act


def epsilon_greedy_fn(
    q_values_fn: Callable[[np.ndarray], np.ndarray], action_space: gym.Space, epsilon: float
) -> Callable[[np.ndarray], int | np.ndarray]:
    """`epsilon_greedy` for any `q_values_fn(obs) -> Q-values` (array-like, last axis the actions): e.g. a jitted JAX function."""

    def act(obs: np.ndarray) -> int | np.ndarray:
        batched = isinstance(action_space, gym.spaces.MultiDiscrete)  # a vector env's action space
        if not batched and random.random() < epsilon:
            return action_space.sample()
        greedy = np.asarray(q_values_fn(obs)).argmax(-1)
        if not batched:
            return int(greedy)
        return np.where(np.random.random(greedy.shape) < epsilon, action_space.sample(), greedy)

    return act
