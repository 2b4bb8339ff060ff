"""Evaluate a saved `ddpg_continuous_action_jax.py` model (and, through `td3_jax_eval`, a TD3 one).

The saved file is Flax's msgpack serialisation of a list of parameter trees whose first is the actor's:
[actor, qf1] for DDPG, [actor, qf1, qf2] for TD3. Only the actor is needed to act: its parameters are
restored into freshly initialised ones, so a file of another network or env fails with a clear error.
As in training, Gaussian noise of std `exploration_noise` x the action half-range is added and the
action clipped to the bounds (`exploration_noise=0` plays the deterministic policy).
"""

from collections.abc import Callable
from typing import Any

import flax
import jax
import numpy as np

from cleanrl_utils.evals.episodes import make_eval_vector_env, vector_env_returns


def load_actor_params(model_path: str, actor_params: Any) -> Any:
    """The saved actor parameters, restored into `actor_params` (same structure and shapes)."""
    with open(model_path, "rb") as f:
        data = f.read()
    saved = flax.serialization.msgpack_restore(data)
    if not isinstance(saved, dict) or "0" not in saved:
        raise ValueError(f"{model_path} holds no [actor, critic...] list of Flax parameters")
    # the critics' entries are read as they are (target None): only the actor's are checked and kept
    restored = flax.serialization.from_bytes([actor_params] + [None] * (len(saved) - 1), data)[0]
    shapes = jax.tree.map(np.shape, restored), jax.tree.map(np.shape, actor_params)
    if shapes[0] != shapes[1]:
        raise ValueError(f"the actor saved in {model_path} does not fit this env's observation and action sizes")
    return restored


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: Any = None,
    capture_video: bool = True,
    exploration_noise: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Play `eval_episodes` episodes with `Model`, the script's Flax Actor (built from the env's action bounds).

    `device` is accepted for a common signature with the PyTorch evaluators and ignored: JAX places arrays itself.
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    space = envs.single_action_space
    actor = Model(action_low=space.low.astype(np.float32), action_high=space.high.astype(np.float32))
    init_key, key = jax.random.split(jax.random.key(seed))
    obs_shape = (1, *envs.single_observation_space.shape)
    params = load_actor_params(model_path, jax.jit(actor.init)(init_key, np.zeros(obs_shape, np.float32)))

    @jax.jit
    def explore(obs, key):
        key, noise_key = jax.random.split(key)
        return actor.apply(params, obs, exploration_noise, noise_key, method="explore"), key

    act_deterministic = jax.jit(lambda obs: actor.apply(params, obs))

    def act(obs: np.ndarray) -> np.ndarray:
        nonlocal key
        obs = obs.astype(np.float32)
        if exploration_noise > 0:
            action, key = explore(obs, key)
        else:
            action = act_deterministic(obs)
        return np.asarray(action)

    return vector_env_returns(envs, act, eval_episodes, seed)
