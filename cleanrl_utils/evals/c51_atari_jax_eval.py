"""Evaluate a saved `c51_atari_jax.py` model on whole games, epsilon-greedy on its Q-values (the means of its distributions).

The model file holds `flax.serialization.to_bytes({"model_weights": params, "args": vars(args)})`: the
args give the support (n_atoms, v_min, v_max) that rebuilds the network, whose freshly initialised
parameters then take the saved ones. Games are played and scored as in `dqn_atari_jax_eval`.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from cleanrl_utils.evals.episodes import closed_on_error, make_eval_env, whole_game_returns
from cleanrl_utils.evals.flax_params import load_params_with_args


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[nn.Module],
    device: Any = None,  # accepted for the common evaluator signature; JAX places arrays itself
    epsilon: float = 0.01,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)

    def build(args: dict) -> nn.Module:
        return Model(action_dim=env.action_space.n, **{key: args[key] for key in ("n_atoms", "v_min", "v_max")})

    with closed_on_error(env):
        model, params, _ = load_params_with_args(model_path, build, env.observation_space.sample(), "c51_atari_jax.py")
    return whole_game_returns(env, jax.jit(lambda obs: model.apply(params, obs)), epsilon, eval_episodes, seed)
