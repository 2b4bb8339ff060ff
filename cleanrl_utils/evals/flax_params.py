"""Read Flax parameters saved by the JAX algorithm files (`flax.serialization.to_bytes`) back into a network."""

from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import jax
import numpy as np


def restore_params(state: Any, template: Any, model_path: str) -> Any:
    """`state` (a restored state dict) read into the structure of `template`; ValueError if the shapes differ."""
    params = flax.serialization.from_state_dict(template, state)  # raises ValueError on other layer names
    mismatched = [
        f"{jax.tree_util.keystr(path)}: {np.shape(leaf)} in the file, {np.shape(want)} here"
        for (path, leaf), want in zip(jax.tree_util.tree_leaves_with_path(params), jax.tree.leaves(template))
        if np.shape(leaf) != np.shape(want)
    ]
    if mismatched:
        raise ValueError(f"the parameters of {model_path} do not fit this network ({'; '.join(mismatched[:2])})")
    return params


def read_saved_state(model_path: str) -> dict:
    """The state dict in a file of Flax bytes; ValueError if the file holds something else."""
    with open(model_path, "rb") as f:
        data = f.read()
    try:
        state = flax.serialization.msgpack_restore(data)
    except Exception as e:  # msgpack's errors share no base class worth naming
        raise ValueError(f"{model_path} is not a file of Flax parameters ({type(e).__name__})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{model_path} is not a file of Flax parameters (it holds a {type(state).__name__})")
    return state


def restore_into(model: nn.Module, sample_obs: np.ndarray, state: Any, model_path: str) -> Any:
    """`state` read into the parameters of `model`, whose structure comes from one observation like `sample_obs`."""
    return restore_params(state, parameter_shapes(model, sample_obs), model_path)


def parameter_shapes(model: nn.Module, sample_obs: np.ndarray) -> Any:
    """The tree of `model`'s parameters as shapes only: tracing `init` costs a fraction of running it op by op
    (an Atari CNN: 0.07 s against 15-24 s on a 2-core CPU), and the saved values fill it in anyway."""
    return jax.eval_shape(model.init, jax.random.PRNGKey(0), sample_obs[None])


def load_params(model_path: str, model: nn.Module, sample_obs: np.ndarray) -> Any:
    """The Flax parameters saved at `model_path`, for `model` initialised on one observation like `sample_obs`."""
    return restore_into(model, sample_obs, read_saved_state(model_path), model_path)


def load_params_with_args(
    model_path: str, build: Callable[[dict], nn.Module], sample_obs: np.ndarray, script: str
) -> tuple[nn.Module, Any, dict]:
    """For a file of {"model_weights": params, "args": training arguments} (the C51 files, whose network needs its
    support from the args): the network `build(args)` makes, its saved parameters, and the args."""
    saved = read_saved_state(model_path)
    if not {"model_weights", "args"} <= saved.keys():
        raise ValueError(f"{model_path} is not a {script} model (expected Flax bytes of a dict with model_weights and args)")
    model = build(saved["args"])
    return model, restore_into(model, sample_obs, saved["model_weights"], model_path), saved["args"]
