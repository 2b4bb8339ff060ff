"""Evaluators of the PyTorch scripts with vector observations and discrete actions (CartPole, Acrobot, ...).

| script | evaluator |
|---|---|
| `ppo.py` | `evaluate_ppo`: the policy samples its actions, as in training |
| `dqn.py` | `evaluate_dqn`: epsilon-greedy on the Q-values, one env |
| `c51.py` | `evaluate_c51`: epsilon-greedy on the means of the return distributions, one env |
| `pqn.py` | `evaluate_pqn`: epsilon-greedy on the Q-values, through the script's vector-env factory |

Each takes the script's network class and env factory as arguments and imports no algorithm file.
"""

import gymnasium as gym
import torch

from cleanrl_utils.evals.common import (
    EvalRun,
    QValues,
    evaluator,
    load_distributional,
    on_numpy,
    q_value_evaluator,
)


@evaluator
def evaluate_ppo(run: EvalRun) -> list[float]:
    """Play a saved `ppo.py` agent, sampling its actions."""
    envs = run.vector_env()
    return run.returns(envs, on_numpy(run.torch_model(envs).sample_action, run.device, torch.float32))


@q_value_evaluator()
def evaluate_dqn(run: EvalRun, env: gym.Env) -> QValues:
    """Play a saved `dqn.py` Q-network with epsilon-greedy actions."""
    return on_numpy(run.torch_model(env), run.device, torch.float32)


@q_value_evaluator()
def evaluate_c51(run: EvalRun, env: gym.Env) -> QValues:
    """Play a saved `c51.py` model, epsilon-greedy on its Q-values (the means of its distributions).

    The file holds the training args too: the network's support (n_atoms, v_min, v_max) comes from them.
    """
    return on_numpy(load_distributional(run.model_path, env, run.Model, run.device), run.device, torch.float32)


@q_value_evaluator("vector env")
def evaluate_pqn(run: EvalRun, envs: gym.vector.VectorEnv) -> QValues:
    """Play a saved `pqn.py` Q-network with epsilon-greedy actions (its network reads the vector env's spaces)."""
    return on_numpy(run.torch_model(envs), run.device, torch.float32)
