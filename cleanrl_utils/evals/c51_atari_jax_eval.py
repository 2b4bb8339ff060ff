"""Evaluate a saved `c51_atari_jax.py` model on whole games, epsilon-greedy on its Q-values (the means of its distributions).

The model file holds `flax.serialization.to_bytes({"model_weights": params, "args": vars(args)})`: the
args give the support (n_atoms, v_min, v_max) that rebuilds the network, whose freshly initialised
parameters then take the saved ones. Games are played and scored as in `dqn_atari_jax_eval`.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from cleanrl_utils.evals.dqn_atari_jax_eval import whole_game_returns
from cleanrl_utils.evals.flax_params import read_saved_state, restore_params


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
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    try:
        saved = read_saved_state(model_path)
        if not {"model_weights", "args"} <= set(saved):
            raise ValueError(f"{model_path} is not a c51_atari_jax.py model (expected model_weights and args)")
        support = {key: saved["args"][key] for key in ("n_atoms", "v_min", "v_max")}
        model = Model(action_dim=env.action_space.n, **support)
        template = model.init(jax.random.PRNGKey(0), env.observation_space.sample()[None])
        params = restore_params(saved["model_weights"], template, model_path)
    except Exception:
        env.close()
        raise
    return whole_game_returns(env, lambda obs: model.apply(params, obs), epsilon, eval_episodes, seed)
