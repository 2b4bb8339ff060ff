"""Evaluate a saved `dqn_atari_jax.py` model (Flax parameters) on whole games, with epsilon-greedy actions.

The model file holds `flax.serialization.to_bytes(params)`: the parameters are read back into freshly
initialised ones of the script's `QNetwork`, which checks that the file fits the network and the game.
Returns are counted as in `dqn_atari_eval`: only when a whole game ends, with its raw score.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from cleanrl_utils.evals.episodes import closed_on_error, make_eval_env, whole_game_returns
from cleanrl_utils.evals.flax_params import load_params


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
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    model = Model(action_dim=env.action_space.n)
    with closed_on_error(env):
        params = load_params(model_path, model, env.observation_space.sample())
    return whole_game_returns(env, jax.jit(lambda obs: model.apply(params, obs)), epsilon, eval_episodes, seed)
