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
ends, and it is the game's score, not one life's clipped rewards.
"""

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.common import (
    EvalRun,
    QValues,
    evaluator,
    final_info_returns,
    load_distributional,
    on_numpy,
    q_value_evaluator,
    vector_env_returns_with_memory,
)


@evaluator
def evaluate_ppo(run: EvalRun) -> list[float]:
    """Play a saved PPO Atari agent, sampling its actions; the sub-env's own statistics count the games
    (`final_info_returns`), not statistics around the vector env."""
    envs = run.vector_env(episode_statistics=False)
    agent = run.torch_model(envs)
    return run.returns(envs, on_numpy(lambda x: agent.act(x)[0], run.device), returns=final_info_returns)


@evaluator
def evaluate_ppo_lstm(run: EvalRun) -> list[float]:
    """Play a saved `ppo_atari_lstm.py` agent, its memory carried from step to step.

    The LSTM state returned by one step is fed to the next, and zeroed after each episode end as in training
    (each lost life, with these env factories).
    """
    envs = run.vector_env(episode_statistics=False)
    agent, device = run.torch_model(envs), run.device
    lstm_state = agent.initial_state(1, device)

    def act(obs: np.ndarray, ended: np.ndarray) -> np.ndarray:
        nonlocal lstm_state
        start = torch.tensor(ended, dtype=torch.float32, device=device)  # 1: the state is zeroed before this step
        with torch.inference_mode():
            action, _, _, lstm_state = agent.act(torch.as_tensor(obs, device=device), lstm_state, start)
        return action.cpu().numpy()

    return vector_env_returns_with_memory(envs, act, run.eval_episodes, run.seed, returns=final_info_returns)


@q_value_evaluator("whole games")
def evaluate_dqn(run: EvalRun, env: gym.Env) -> QValues:
    """Play a Q-network saved as a plain state_dict (`dqn_atari.py`, the QDagger student with its IMPALA CNN
    as `Model`), epsilon-greedy."""
    return on_numpy(run.torch_model(env), run.device)


@q_value_evaluator("whole games", epsilon=0.01)
def evaluate_distributional(run: EvalRun, env: gym.Env) -> QValues:
    """Play a saved `c51_atari.py` or `rainbow_atari.py` model, epsilon-greedy on its Q-values (the means of its
    distributions).

    The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them. The
    network is in eval mode, so Rainbow's noisy layers play their means; its script passes a small `epsilon`
    so that a deterministic policy cannot stall a game.
    """
    return on_numpy(load_distributional(run.model_path, env, run.Model, run.device), run.device)


@evaluator
def evaluate_sac(run: EvalRun, deterministic: bool = False) -> list[float]:
    """Play a saved `sac_atari.py` actor, sampling from the policy (`deterministic=True`: its argmax).

    The file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act. Discrete
    SAC learns a stochastic policy whose entropy is held near a target, so by default the evaluation samples.
    """
    env = run.env()
    actor = run.torch_model(env, "actor", "holds no actor weights (saved by sac_atari.py?)")
    torch.manual_seed(run.seed)  # the sampled actions
    policy = on_numpy(lambda x: actor(x).argmax(-1) if deterministic else actor.get_action(x)[0], run.device)
    return run.returns(env, lambda obs: policy(obs[None]).item(), whole_games=True)
