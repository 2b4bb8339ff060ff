"""Evaluators of the PyTorch Atari scripts, scored on whole games.

| script | evaluator |
|---|---|
| `ppo_atari.py`, `ppo_atari_multigpu.py` | `evaluate_ppo`: the policy samples its actions |
| `ppo_atari_lstm.py` | `evaluate_ppo_lstm`: the same, its LSTM state carried from step to step |
| `dqn_atari.py`, `qdagger_dqn_atari_impalacnn.py` (the student; its teacher is a `dqn_atari.py` model) | `evaluate_dqn` |
| `c51_atari.py`, `rainbow_atari.py` | `evaluate_distributional` |
| `sac_atari.py` | `evaluate_sac`: the actor samples its actions |

The scripts' env factories end an episode at each lost life (for learning) and keep the raw score of the whole
game in `info["episode"]`, below the life and reward-clipping wrappers. So a return is counted only when a game
ends, and it is the game's score, not one life's clipped rewards. The scripts pass the arguments by position, in the
order written out below; the epsilon-greedy ones take `epsilon` before `capture_video`.
"""

from collections.abc import Callable

import numpy as np
import torch

from cleanrl_utils.runtime.evals.common import (
    closed_on_error,
    final_info_returns,
    load_distributional,
    make_eval_env,
    make_eval_vector_env,
    on_numpy,
    read_model_file,
    single_env_returns,
    vector_env_returns,
    vector_env_returns_with_memory,
    whole_game_returns,
    with_weights,
)


def evaluate_ppo(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved PPO Atari agent (`ppo_atari.py`, `ppo_atari_multigpu.py`), sampling its actions; the sub-env's own
    statistics count the games (`final_info_returns`), not statistics around the vector env."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video, episode_statistics=False)
    with closed_on_error(envs):
        agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    act = on_numpy(lambda x: agent.act(x)[0], device)
    return vector_env_returns(envs, act, eval_episodes, seed, returns=final_info_returns)


def evaluate_ppo_lstm(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `ppo_atari_lstm.py` agent, its memory carried from step to step.

    The LSTM state returned by one step is fed to the next, and zeroed after each episode end as in training
    (each lost life, with these env factories).
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video, episode_statistics=False)
    with closed_on_error(envs):
        agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    lstm_state = agent.initial_state(1, device)

    def act(obs: np.ndarray, ended: np.ndarray) -> np.ndarray:
        nonlocal lstm_state
        start = torch.tensor(ended, dtype=torch.float32, device=device)  # 1: the state is zeroed before this step
        with torch.inference_mode():
            action, _, _, lstm_state = agent.act(torch.as_tensor(obs, device=device), lstm_state, start)
        return action.cpu().numpy()

    return vector_env_returns_with_memory(envs, act, eval_episodes, seed, returns=final_info_returns)


def evaluate_dqn(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    epsilon: float = 0.05,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a Q-network saved as a plain state_dict (`dqn_atari.py`, the QDagger student with its IMPALA CNN
    as `Model`) on whole games, epsilon-greedy."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    with closed_on_error(env):
        q_network = with_weights(Model(env), read_model_file(model_path, device), device)
    return whole_game_returns(env, on_numpy(q_network, device), epsilon, eval_episodes, seed)


def evaluate_distributional(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    epsilon: float = 0.01,
    capture_video: bool = True,
    seed: int = 0,
) -> list[float]:
    """Play a saved `c51_atari.py` or `rainbow_atari.py` model on whole games, epsilon-greedy on its Q-values (the
    means of its distributions).

    The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them. The
    network is in eval mode, so Rainbow's noisy layers play their means; its script passes a small `epsilon`
    so that a deterministic policy cannot stall a game.
    """
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    with closed_on_error(env):
        q_network = load_distributional(model_path, env, Model, device)
    return whole_game_returns(env, on_numpy(q_network, device), epsilon, eval_episodes, seed)


def evaluate_sac(
    model_path: str,
    make_env: Callable,
    env_id: str,
    eval_episodes: int,
    run_name: str,
    Model: type,
    device: torch.device | str = "cpu",
    capture_video: bool = True,
    seed: int = 0,
    *,
    deterministic: bool = False,
) -> list[float]:
    """Play a saved `sac_atari.py` actor on whole games, sampling from the policy (`deterministic=True`: its argmax).

    The file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act. Discrete
    SAC learns a stochastic policy whose entropy is held near a target, so by default the evaluation samples.
    """
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    not_it = "holds no actor weights (saved by sac_atari.py?)"
    with closed_on_error(env):
        actor = with_weights(Model(env), read_model_file(model_path, device, {"actor"}, not_it)["actor"], device)
    torch.manual_seed(seed)  # the sampled actions
    policy = on_numpy(lambda x: actor(x).argmax(-1) if deterministic else actor.get_action(x)[0], device)
    return single_env_returns(env, lambda obs: policy(obs[None]).item(), eval_episodes, seed, whole_games=True)
