"""Evaluate a saved `sac_atari.py` model on whole games: the actor samples its actions, as in training.

The saved file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act.
Discrete SAC learns a stochastic policy whose entropy is held near a target, so by default the
evaluation samples from it; `deterministic=True` plays its most likely action instead. As for
`dqn_atari.py`, the env factory ends an episode at each lost life and a return is counted only when
the whole game ends (its raw score, from `info["episode"]`).
"""

from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.evals.episodes import _collect


def load_actor_weights(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The actor's state_dict from a saved model file."""
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if not isinstance(saved, dict) or "actor" not in saved:
        raise ValueError(f"{model_path} holds no actor weights (saved by sac_atari.py?)")
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
    deterministic: bool = False,
) -> list[float]:
    """Play `eval_episodes` whole games, sampling from the policy (`deterministic=True`: its argmax)."""
    env = make_env(env_id, 0, capture_video, run_name)()
    actor = Model(env).to(device)
    actor.load_state_dict(load_actor_weights(model_path, device))
    actor.eval()
    torch.manual_seed(seed)  # the sampled actions

    def step(obs: np.ndarray) -> tuple[np.ndarray, list[float]]:
        with torch.inference_mode():
            x = torch.as_tensor(obs, device=device).unsqueeze(0)
            action = actor(x).argmax().item() if deterministic else actor.get_action(x)[0].item()
        obs, _, terminated, truncated, info = env.step(action)
        if not (terminated or truncated):
            return obs, []
        # a lost life ends the episode but not the game: the next life starts from this reset
        return env.reset()[0], [float(info["episode"]["r"])] if "episode" in info else []

    return _collect(env, step, eval_episodes, seed)
