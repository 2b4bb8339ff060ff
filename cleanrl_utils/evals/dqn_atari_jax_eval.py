"""Evaluate a saved `dqn_atari_jax.py` model (Flax parameters) on whole games, with epsilon-greedy actions.

The model file holds `flax.serialization.to_bytes(params)`: the parameters are read back into freshly
initialised ones of the script's `QNetwork`, which checks that the file fits the network and the game.
Returns are counted as in `dqn_atari_eval`: only when a whole game ends, with its raw score.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import gymnasium as gym
import jax
import numpy as np

from cleanrl_utils.evals.episodes import _collect, epsilon_greedy_fn
from cleanrl_utils.evals.flax_params import load_params


def whole_game_returns(
    env: gym.Env, q_values: Callable[[np.ndarray], jax.Array], epsilon: float, eval_episodes: int, seed: int
) -> list[float]:
    """Scores of `eval_episodes` whole games, acting epsilon-greedily on `q_values(obs)` (a batch of one observation)."""
    act = epsilon_greedy_fn(jax.jit(lambda obs: q_values(obs[None])[0]), env.action_space, epsilon)

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        obs, _, terminated, truncated, info = env.step(act(obs))
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
    Model: type[nn.Module],
    device: Any = None,  # accepted for the common evaluator signature; JAX places arrays itself
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    model = Model(action_dim=env.action_space.n)
    try:
        params = load_params(model_path, model, env.observation_space.sample())
    except Exception:
        env.close()
        raise
    return whole_game_returns(env, lambda obs: model.apply(params, obs), epsilon, eval_episodes, seed)
