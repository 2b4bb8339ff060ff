"""Evaluators of the PyTorch scripts with continuous actions (MuJoCo, Pendulum, ...).

| script | evaluator |
|---|---|
| `ppo_continuous_action.py`, `rpo_continuous_action.py` | `evaluate_ppo`: the Gaussian policy, its observation statistics |
| `sac_continuous_action.py` | `evaluate_sac`: the actor's mean action |
| `ddpg_continuous_action.py`, `td3_continuous_action.py` | `evaluate_deterministic_actor`: the actor, exploration noise |

Each takes the script's network class and env factory as arguments and imports no algorithm file.
"""

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.evals.common import (
    EvalRun,
    closed_on_error,
    evaluator,
    final_info_returns,
    on_numpy,
    read_model_file,
    with_weights,
)


def load_ppo_model(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The saved dict: {"agent": state_dict, "obs_rms": {"mean", "var", "count"}}."""
    return read_model_file(model_path, device, {"agent", "obs_rms"}, "holds no agent weights with observation statistics")


def restore_obs_rms(envs: gym.vector.SyncVectorEnv, obs_rms: dict) -> None:
    """Put the training statistics into every sub-env's NormalizeObservation wrapper and stop updating them."""
    for env in envs.envs:
        while not isinstance(env, gym.wrappers.NormalizeObservation):
            env = env.env
        env.obs_rms.mean = np.asarray(obs_rms["mean"].cpu(), dtype=np.float64)
        env.obs_rms.var = np.asarray(obs_rms["var"].cpu(), dtype=np.float64)
        env.obs_rms.count = float(obs_rms["count"])
        env.update_running_mean = False


@evaluator
def evaluate_ppo(run: EvalRun, gamma: float = 0.99, deterministic: bool = False) -> list[float]:
    """Play a saved `ppo_continuous_action.py` / `rpo_continuous_action.py` agent; it samples as in training
    (`deterministic`: acts with its mean).

    The file holds the agent's weights and the observation-normalisation statistics of training; they are
    restored into the eval env's NormalizeObservation wrapper and frozen there, so the agent sees its
    observations exactly as it saw them at the end of training. Returns are the environment's own rewards,
    counted by the RecordEpisodeStatistics wrapper inside the env, before any reward scaling.
    """
    envs = run.vector_env(gamma, episode_statistics=False)
    with closed_on_error(envs):
        saved = load_ppo_model(run.model_path, run.device)
        agent = with_weights(run.Model(envs), saved["agent"], run.device)
        restore_obs_rms(envs, saved["obs_rms"])
    act = on_numpy(lambda x: agent.sample_action(x, deterministic=deterministic), run.device, torch.float32)
    return run.returns(envs, act, returns=final_info_returns)


@evaluator
def evaluate_sac(run: EvalRun, deterministic: bool = True) -> list[float]:
    """Play a saved `sac_continuous_action.py` actor with its mean action (`deterministic=False`: sample as in training).

    The file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act. Training
    samples from the squashed Gaussian; for evaluation the noise is left out and the action is tanh(mean)
    rescaled to the action bounds, the usual way to report SAC's learned policy.
    """
    envs = run.vector_env()
    actor = run.torch_model(envs, "actor", "holds no actor weights (saved by sac_continuous_action.py?)")
    chosen = 2 if deterministic else 0  # get_action gives (sampled action, its log-probability, mean action)
    return run.returns(envs, on_numpy(lambda x: actor.get_action(x)[chosen], run.device, torch.float32))


def load_actor_state(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The actor's state dict: the first of the saved tuple."""
    saved = read_model_file(model_path, device)
    if not isinstance(saved, tuple | list) or not saved or not isinstance(saved[0], dict):
        raise ValueError(f"{model_path} holds no (actor, critic...) tuple of state dicts")
    return saved[0]


@evaluator
def evaluate_deterministic_actor(run: EvalRun, exploration_noise: float = 0.1) -> list[float]:
    """Play a saved `ddpg_continuous_action.py` or `td3_continuous_action.py` actor (the script's Actor class).

    The file is a tuple of state dicts whose first is the actor's: (actor, qf1) for DDPG, (actor, qf1, qf2)
    for TD3. As in training, Gaussian noise of std `exploration_noise` x the action half-range is added and
    the action clipped to the bounds (`exploration_noise=0` plays the deterministic policy).
    """
    envs = run.vector_env()
    with closed_on_error(envs):
        actor = with_weights(run.Model(envs), load_actor_state(run.model_path, run.device), run.device)
    policy = (lambda x: actor.explore(x, exploration_noise)) if exploration_noise > 0 else actor
    return run.returns(envs, on_numpy(policy, run.device, torch.float32))
