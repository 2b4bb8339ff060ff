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

from cleanrl_utils.evals.episodes import epsilon_greedy_fn, single_env_returns
from cleanrl_utils.evals.flax_params import read_saved_state, restore_params


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
    saved = read_saved_state(model_path)
    if not {"model_weights", "args"} <= saved.keys():
        raise ValueError(f"{model_path} is not a c51_jax.py model (expected Flax bytes of a dict with model_weights and args)")
    n_atoms, v_min, v_max = (saved["args"][key] for key in ("n_atoms", "v_min", "v_max"))
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    model = Model(action_dim=env.action_space.n, n_atoms=n_atoms)
    try:
        template = model.init(jax.random.PRNGKey(0), env.observation_space.sample()[None])
        params = restore_params(saved["model_weights"], template, model_path)
    except Exception:
        env.close()
        raise
    atoms = jnp.linspace(v_min, v_max, num=n_atoms)
    q_values = jax.jit(lambda obs: (model.apply(params, obs) * atoms).sum(-1))
    return single_env_returns(env, epsilon_greedy_fn(q_values, env.action_space, epsilon), eval_episodes, seed)
