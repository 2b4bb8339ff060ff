"""Evaluate a saved `sac_continuous_action.py` model: the actor plays with its deterministic (mean) action.

The saved file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act.
Training samples from the squashed Gaussian; for evaluation the noise is left out and the action is
tanh(mean) rescaled to the action bounds, the usual way to report SAC's learned policy.
"""

from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, vector_env_returns


def load_actor_weights(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The actor's state_dict from a saved model file."""
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if not isinstance(saved, dict) or "actor" not in saved:
        raise ValueError(f"{model_path} holds no actor weights (saved by sac_continuous_action.py?)")
    return saved["actor"]


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
    deterministic: bool = True,
) -> list[float]:
    """Play `eval_episodes` episodes with the mean action (`deterministic=False`: sample as in training)."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    actor = Model(envs).to(device)
    actor.load_state_dict(load_actor_weights(model_path, device))
    actor.eval()

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            sampled, _, mean = actor.get_action(torch.as_tensor(obs, dtype=torch.float32, device=device))
        return (mean if deterministic else sampled).cpu().numpy()

    return vector_env_returns(envs, act, eval_episodes, seed)
