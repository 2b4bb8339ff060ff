"""Evaluators of the PyTorch scripts with continuous actions (MuJoCo, Pendulum, ...).

| script | evaluator |
|---|---|
| `ppo_continuous_action.py`, `rpo_continuous_action.py` | `evaluate_ppo`: the Gaussian policy, its observation statistics |
| `sac_continuous_action.py` | `evaluate_sac`: the actor's mean action |
| `ddpg_continuous_action.py`, `td3_continuous_action.py` | `evaluate_deterministic_actor`: the actor, exploration noise |

Each takes the script's network class and env factory as arguments and imports no algorithm file. The scripts
pass the common arguments by position, in the order written out below, and the options after them by name.
"""

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.runtime.evals.common import (
    closed_on_error,
    final_info_returns,
    make_eval_vector_env,
    on_numpy,
    read_model_file,
    vector_env_returns,
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
    *,
    gamma: float = 0.99,
    deterministic: bool = False,
) -> list[float]:
    """Play a saved `ppo_continuous_action.py` / `rpo_continuous_action.py` agent; it samples as in training
    (`deterministic`: acts with its mean).

    The file holds the agent's weights and the observation-normalisation statistics of training; they are
    restored into the eval env's NormalizeObservation wrapper and frozen there, so the agent sees its
    observations exactly as it saw them at the end of training. Returns are the environment's own rewards,
    counted by the RecordEpisodeStatistics wrapper inside the env (`final_info_returns`), before any reward
    scaling (`gamma` is the factory's reward-scaling argument).
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video, gamma, episode_statistics=False)
    with closed_on_error(envs):
        saved = load_ppo_model(model_path, device)
        agent = with_weights(Model(envs), saved["agent"], device)
        restore_obs_rms(envs, saved["obs_rms"])
    act = on_numpy(lambda x: agent.sample_action(x, deterministic=deterministic), device, torch.float32)
    return vector_env_returns(envs, act, eval_episodes, seed, returns=final_info_returns)


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
    deterministic: bool = True,
) -> list[float]:
    """Play a saved `sac_continuous_action.py` actor with its mean action (`deterministic=False`: sample as in training).

    The file is a dict {"actor": state_dict, "qf1": ..., "qf2": ...}; only the actor is needed to act. Training
    samples from the squashed Gaussian; for evaluation the noise is left out and the action is tanh(mean)
    rescaled to the action bounds, the usual way to report SAC's learned policy.
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    not_it = "holds no actor weights (saved by sac_continuous_action.py?)"
    with closed_on_error(envs):
        actor = with_weights(Model(envs), read_model_file(model_path, device, {"actor"}, not_it)["actor"], device)
    chosen = 2 if deterministic else 0  # get_action gives (sampled action, its log-probability, mean action)
    act = on_numpy(lambda x: actor.get_action(x)[chosen], device, torch.float32)
    return vector_env_returns(envs, act, eval_episodes, seed)


def load_actor_state(model_path: str, device: torch.device | str = "cpu") -> dict:
    """The actor's state dict: the first of the saved tuple."""
    saved = read_model_file(model_path, device)
    if not isinstance(saved, tuple | list) or not saved or not isinstance(saved[0], dict):
        raise ValueError(f"{model_path} holds no (actor, critic...) tuple of state dicts")
    return saved[0]


def evaluate_deterministic_actor(
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
    exploration_noise: float = 0.1,
) -> list[float]:
    """Play a saved `ddpg_continuous_action.py` or `td3_continuous_action.py` actor (the script's Actor class).

    The file is a tuple of state dicts whose first is the actor's: (actor, qf1) for DDPG, (actor, qf1, qf2)
    for TD3. As in training, Gaussian noise of std `exploration_noise` x the action half-range is added and
    the action clipped to the bounds (`exploration_noise=0` plays the deterministic policy).
    """
    envs = make_eval_vector_env(make_env, env_id, run_name, capture_video)
    with closed_on_error(envs):
        actor = with_weights(Model(envs), load_actor_state(model_path, device), device)
    policy = (lambda x: actor.explore(x, exploration_noise)) if exploration_noise > 0 else actor
    return vector_env_returns(envs, on_numpy(policy, device, torch.float32), eval_episodes, seed)
