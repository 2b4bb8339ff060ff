"""Evaluate a saved `dqn_jax.py` model (Flax parameters) with epsilon-greedy actions.

The file holds `flax.serialization.to_bytes(params)`; they are read back into freshly initialised
parameters of the script's `QNetwork`, so a file of another network or env fails with a clear error.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from cleanrl_utils.evals.episodes import closed_on_error, epsilon_greedy_fn, make_eval_env, single_env_returns
from cleanrl_utils.evals.flax_params import load_params


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[nn.Module],
    device: Any = None,  # accepted for the common evaluator signature (enjoy passes one); JAX places arrays itself
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = Model(action_dim=env.action_space.n)
    with closed_on_error(env):
        params = load_params(model_path, model, env.observation_space.sample())
    q_values = jax.jit(lambda obs: model.apply(params, obs))
    return single_env_returns(env, epsilon_greedy_fn(q_values, env.action_space, epsilon), eval_episodes, seed)
