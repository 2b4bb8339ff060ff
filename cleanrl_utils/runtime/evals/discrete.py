"""Evaluators of the PyTorch scripts with vector observations and discrete actions (CartPole, Acrobot, ...).

| script | evaluator |
|---|---|
| `ppo.py` | `evaluate_ppo`: the policy samples its actions, as in training |
| `dqn.py` | `evaluate_dqn`: epsilon-greedy on the Q-values, one env |
| `c51.py` | `evaluate_c51`: epsilon-greedy on the means of the return distributions, one env |
| `pqn.py` | `evaluate_pqn`: epsilon-greedy on the Q-values, through the script's vector-env factory |

Each takes the script's network class and env factory as arguments and imports no algorithm file. The scripts
pass the arguments by position, in the order written out below; the epsilon-greedy ones take `epsilon` before
`capture_video`.
"""

from collections.abc import Callable

import torch

from cleanrl_utils.runtime.evals.common import (
    closed_on_error,
    epsilon_greedy_fn,
    load_distributional,
    make_eval_env,
    make_eval_vector_env,
    on_numpy,
    read_model_file,
    single_env_returns,
    vector_env_returns,
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
    """Play a saved `ppo.py` agent (a state dict of `Model`), sampling its actions as in training."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    with closed_on_error(envs):
        agent = with_weights(Model(envs), read_model_file(model_path, device), device)
    act = on_numpy(agent.sample_action, device, torch.float32)
    return vector_env_returns(envs, act, eval_episodes, seed)


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
    """Play a saved `dqn.py` Q-network (a state dict of `Model`) with epsilon-greedy actions."""
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    with closed_on_error(env):
        q_network = with_weights(Model(env), read_model_file(model_path, device), device)
    act = epsilon_greedy_fn(on_numpy(q_network, device, torch.float32), env.action_space, epsilon)
    return single_env_returns(env, act, eval_episodes, seed)


def evaluate_c51(
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
    """Play a saved `c51.py` model, epsilon-greedy on its Q-values (the means of its distributions).

    The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them.
    """
    env = make_eval_env(make_env, env_id, run_name, capture_video, seed)
    with closed_on_error(env):
        q_network = load_distributional(model_path, env, Model, device)
    act = epsilon_greedy_fn(on_numpy(q_network, device, torch.float32), env.action_space, epsilon)
    return single_env_returns(env, act, eval_episodes, seed)


def evaluate_pqn(
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
    """Play a saved `pqn.py` Q-network with epsilon-greedy actions (its network reads the vector env's spaces)."""
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    envs.action_space.seed(seed)  # epsilon's random actions
    with closed_on_error(envs):
        q_network = with_weights(Model(envs), read_model_file(model_path, device), device)
    act = epsilon_greedy_fn(on_numpy(q_network, device, torch.float32), envs.action_space, epsilon)
    return vector_env_returns(envs, act, eval_episodes, seed)
