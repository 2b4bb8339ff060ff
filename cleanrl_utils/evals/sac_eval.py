"""Evaluate a saved `sac_continuous_action.py` model: the actor plays with its deterministic (mean) action.

The saved file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act.
Training samples from the squashed Gaussian; for evaluation the noise is left out and the action is
tanh(mean) rescaled to the action bounds, the usual way to report SAC's learned policy.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_vector_env, on_numpy, vector_env_returns
from cleanrl_utils.evals.torch_models import read_model_file, with_weights


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
    saved = read_model_file(model_path, device, {"actor"}, "holds no actor weights (saved by sac_continuous_action.py?)")
    actor = with_weights(Model(envs), saved["actor"], device)
    chosen = 2 if deterministic else 0  # get_action gives (sampled action, its log-probability, mean action)
    act = on_numpy(lambda x: actor.get_action(x)[chosen], device, torch.float32)
    return vector_env_returns(envs, act, eval_episodes, seed)
