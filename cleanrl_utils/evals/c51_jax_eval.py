"""Evaluate a saved `c51_jax.py` model with epsilon-greedy actions on its Q-values (the means of its distributions).

The file holds `flax.serialization.to_bytes({"model_weights": params, "args": training arguments})`: the
arguments give the support (n_atoms, v_min, v_max); the parameters are read back into freshly initialised
ones of the script's `QNetwork`, so a file of another network or env fails with a clear error.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from cleanrl_utils.evals.episodes import closed_on_error, epsilon_greedy_fn, make_eval_env, single_env_returns
from cleanrl_utils.evals.flax_params import load_params_with_args


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

    def build(args: dict) -> nn.Module:
        return Model(action_dim=env.action_space.n, n_atoms=args["n_atoms"])  # the support is applied below

    with closed_on_error(env):
        model, params, args = load_params_with_args(model_path, build, env.observation_space.sample(), "c51_jax.py")
    atoms = jnp.linspace(args["v_min"], args["v_max"], num=args["n_atoms"])
    q_values = jax.jit(lambda obs: (model.apply(params, obs) * atoms).sum(-1))
    return single_env_returns(env, epsilon_greedy_fn(q_values, env.action_space, epsilon), eval_episodes, seed)
