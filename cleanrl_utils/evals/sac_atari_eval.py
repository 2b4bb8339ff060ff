"""Evaluate a saved `sac_atari.py` model on whole games: the actor samples its actions, as in training.

The saved file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act.
Discrete SAC learns a stochastic policy whose entropy is held near a target, so by default the
evaluation samples from it; `deterministic=True` plays its most likely action instead. As for
`dqn_atari.py`, the env factory ends an episode at each lost life and a return is counted only when
the whole game ends (its raw score, from `info["episode"]`).
"""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import make_eval_env, on_numpy, single_env_returns
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
    deterministic: bool = False,
) -> list[float]:
    """Play `eval_episodes` whole games, sampling from the policy (`deterministic=True`: its argmax)."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    saved = read_model_file(model_path, device, {"actor"}, "holds no actor weights (saved by sac_atari.py?)")
    actor = with_weights(Model(env), saved["actor"], device)
    torch.manual_seed(seed)  # the sampled actions
    policy = on_numpy(lambda x: actor(x).argmax(-1) if deterministic else actor.get_action(x)[0], device)
    return single_env_returns(env, lambda obs: policy(obs[None]).item(), eval_episodes, seed, whole_games=True)
