"""Read models saved by the PyTorch algorithm files (`torch.save`) back into the script's network."""

from collections.abc import Collection
from typing import Any

import gymnasium as gym
import torch


def read_model_file(model_path: str, device: torch.device | str = "cpu", keys: Collection[str] = (), not_it: str = "") -> Any:
    """What `model_path` holds (tensors only: `weights_only`). With `keys`, it must be a dict of them, else ValueError
    "`model_path` `not_it`", a line that says which file it is not."""
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if keys and (not isinstance(saved, dict) or not set(keys) <= saved.keys()):
        raise ValueError(f"{model_path} {not_it}")
    return saved


def with_weights(model: torch.nn.Module, state_dict: dict, device: torch.device | str) -> torch.nn.Module:
    """`model` on `device` with the saved weights, in eval mode (no dropout, noisy layers at their means)."""
    model = model.to(device)
    model.load_state_dict(state_dict)
    return model.eval()


def load_distributional(
    model_path: str, env: gym.Env, Model: type[torch.nn.Module], device: torch.device | str, script: str
) -> torch.nn.Module:
    """A C51-style network saved as {model_weights, args}, rebuilt on the support (n_atoms, v_min, v_max) of its args."""
    saved = read_model_file(
        model_path, device, {"model_weights"}, f"is not a {script} model (expected a dict with model_weights and args)"
    )
    support = {key: saved["args"][key] for key in ("n_atoms", "v_min", "v_max")}
    return with_weights(Model(env, **support), saved["model_weights"], device)
