"""Evaluate a saved `c51.py` model with epsilon-greedy actions on its Q-values (the means of its distributions)."""

from collections.abc import Callable

import torch

from cleanrl_utils.evals.episodes import epsilon_greedy, single_env_returns


def evaluate(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type[torch.nn.Module],
    device: torch.device | str = "cpu",
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    env = make_env(env_id, 0, capture_video, run_name)()
    env.action_space.seed(seed)
    # The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them.
    saved = torch.load(model_path, map_location=device, weights_only=True)
    if not isinstance(saved, dict) or "model_weights" not in saved:
        raise ValueError(f"{model_path} is not a c51.py model (expected a dict with model_weights and args)")
    support = {key: saved["args"][key] for key in ("n_atoms", "v_min", "v_max")}
    model = Model(env, **support).to(device)
    model.load_state_dict(saved["model_weights"])
    model.eval()
    return single_env_returns(env, epsilon_greedy(model, env.action_space, epsilon, device), eval_episodes, seed)
