"""Evaluate a saved `ddpg_continuous_action.py` model (and, through `td3_eval`, a TD3 one).

The saved file is a tuple of state dicts whose first is the actor's: (actor, qf1) for DDPG,
(actor, qf1, qf2) for TD3. Only the actor is needed to act. As in training, Gaussian noise of std
`exploration_noise` x the action half-range is added and the action clipped to the bounds
(`exploration_noise=0` plays the deterministic policy).
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, on_numpy, vector_env_returns
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


def load_actor_state(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The actor's state dict: the first of the saved tuple."""
    saved = read_model_file(model_path, device)
    if not isinstance(saved, tuple | list) or not saved or not isinstance(saved[0], dict):
        raise ValueError(f"{model_path} holds no (actor, critic...) tuple of state dicts")
    return saved[0]


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    exploration_noise: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Play `eval_episodes` episodes with `Model` (the script's Actor, built from the vector env)."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    actor = with_weights(Model(envs), load_actor_state(model_path, device), device)
    policy = (lambda x: actor.explore(x, exploration_noise)) if exploration_noise > 0 else actor
    return vector_env_returns(envs, on_numpy(policy, device, torch.float32), eval_episodes, seed)
