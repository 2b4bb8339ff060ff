"""Stable-Baselines3 configured like our scripts, for side-by-side speed and learning runs.

    python benchmark/compare/sb3_baselines.py ppo --total-timesteps 500000 [--threads 1]
    python benchmark/compare/sb3_baselines.py sac --env-id Hopper-v4 --total-timesteps 100000 --json out.json
    python benchmark/compare/sb3_baselines.py ppo_atari --env-id BreakoutNoFrameskip-v4 --total-timesteps 300000
    python benchmark/compare/sb3_baselines.py dqn_atari --env-id BreakoutNoFrameskip-v4 --total-timesteps 20000 \
        --learning-starts 1000 --buffer-size 20000

prints `SPS: <steps per second of model.learn>` and, with `--json`, writes the SPS and every
finished training episode's return. Differences SB3 does not let us remove: its DQN uses the
Huber loss (ours: MSE) and always computes a gradient norm (clipping is disabled here with a
huge threshold); its SAC has one learning rate for actor, critics and temperature (3e-4; ours:
3e-4 actor, 1e-3 critics and temperature) and clamps the log-std to [-20, 2] (ours squashes it
into [-5, 2]).
"""

import argparse
import json
import time

import numpy as np
import torch
from stable_baselines3 import DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

from cleanrl_utils import atomic


def ppo_model(env_id: str, seed: int) -> PPO:
    """ppo.py's defaults: 4 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, 64-64 tanh MLPs."""
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    return PPO(
        "MlpPolicy",
        env,
        learning_rate=lambda progress_remaining: 2.5e-4 * progress_remaining,
        n_steps=128,
        batch_size=128,
        n_epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=0.2,
        normalize_advantage=True,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
        seed=seed,
        device="cpu",
    )


def dqn_model(env_id: str, seed: int) -> DQN:
    """dqn.py's defaults: 120-84 ReLU MLP, buffer 10k, batch 128, train every 10 steps, target sync every 500."""
    env = make_vec_env(env_id, n_envs=1, seed=seed)
    return DQN(
        "MlpPolicy",
        env,
        learning_rate=2.5e-4,
        buffer_size=10000,
        learning_starts=10000,
        batch_size=128,
        tau=1.0,
        gamma=0.99,
        train_freq=10,
        gradient_steps=1,
        target_update_interval=500,
        exploration_fraction=0.5,
        exploration_initial_eps=1.0,
        exploration_final_eps=0.05,
        max_grad_norm=1e10,
        policy_kwargs=dict(net_arch=[120, 84]),
        seed=seed,
        device="cpu",
    )


def ppo_continuous_model(env_id: str, seed: int) -> PPO:
    """ppo_continuous_action.py's defaults: 1 env x 2048 steps, 32 minibatches, 10 epochs, lr 3e-4 annealed,
    64-64 tanh MLPs, observations and rewards normalised and clipped at 10."""
    env = VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed), gamma=0.99, clip_obs=10.0, clip_reward=10.0)
    return PPO(
        "MlpPolicy",
        env,
        learning_rate=lambda progress_remaining: 3e-4 * progress_remaining,
        n_steps=2048,
        batch_size=64,
        n_epochs=10,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=0.2,
        normalize_advantage=True,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
        seed=seed,
        device="cpu",
    )


def ppo_atari_model(env_id: str, seed: int) -> PPO:
    """ppo_atari.py's defaults: 8 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, clip 0.1 (values
    too), Nature CNN on 4 stacked 84x84 gray frames scaled to [0, 1]. SB3's AtariWrapper does what ours does (noop
    reset, max-and-skip 4, a lost life ends the learning episode, fire reset, reward sign); its Monitor sits below
    it, so the returns it records are whole games' scores, as ours are."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(env_id, n_envs=8, seed=seed), n_stack=4)
    return PPO(
        "CnnPolicy",
        env,
        learning_rate=lambda progress_remaining: 2.5e-4 * progress_remaining,
        n_steps=128,
        batch_size=256,
        n_epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.1,
        clip_range_vf=0.1,
        normalize_advantage=True,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
    )


def dqn_atari_model(env_id: str, seed: int, learning_starts: int, buffer_size: int) -> DQN:
    """dqn_atari.py's defaults: Nature CNN on 4 stacked 84x84 gray frames, lr 1e-4, batch 32, a gradient step every
    4th step, target copied every 1000, epsilon from 1 to 0.01 over the first 10% of the budget, the same Atari
    wrappers as ppo_atari_model's."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return DQN(
        "CnnPolicy",
        VecFrameStack(make_atari_env(env_id, n_envs=1, seed=seed), n_stack=4),
        learning_rate=1e-4,
        buffer_size=buffer_size,
        learning_starts=learning_starts,
        batch_size=32,
        tau=1.0,
        gamma=0.99,
        train_freq=4,
        gradient_steps=1,
        target_update_interval=1000,
        exploration_fraction=0.1,
        exploration_initial_eps=1.0,
        exploration_final_eps=0.01,
        max_grad_norm=1e10,
        seed=seed,
        device="cpu",
    )


def off_policy_kwargs(env_id: str, seed: int, learning_starts: int) -> dict:
    """What SB3's SAC/TD3/DDPG share with ours: buffer 1e6, batch 256, tau 0.005, gamma 0.99, 256-256 MLPs."""
    return dict(
        env=make_vec_env(env_id, n_envs=1, seed=seed),
        buffer_size=1_000_000,
        learning_starts=learning_starts,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        seed=seed,
        device="cpu",
    )


def sac_model(env_id: str, seed: int, learning_starts: int) -> SAC:
    """sac_continuous_action.py: twin critics, automatic entropy tuning (alpha starts at 1), target entropy -dim(A)."""
    return SAC(
        "MlpPolicy",
        learning_rate=3e-4,
        ent_coef="auto_1.0",
        target_update_interval=1,
        policy_kwargs=dict(net_arch=[256, 256]),
        **off_policy_kwargs(env_id, seed, learning_starts),
    )


def td3_model(env_id: str, seed: int, learning_starts: int, ddpg: bool = False) -> TD3:
    """td3_continuous_action.py (or, with `ddpg`, ddpg_continuous_action.py: one critic, no target smoothing),
    Gaussian exploration noise 0.1 of the half-range, actor and targets updated every 2nd critic update."""
    kwargs = off_policy_kwargs(env_id, seed, learning_starts)
    n_actions = kwargs["env"].action_space.shape[0]
    return TD3(
        "MlpPolicy",
        learning_rate=3e-4,
        action_noise=NormalActionNoise(mean=np.zeros(n_actions), sigma=0.1 * np.ones(n_actions)),
        policy_delay=2,
        target_policy_noise=0.0 if ddpg else 0.2,
        target_noise_clip=0.0 if ddpg else 0.5,
        policy_kwargs=dict(net_arch=[256, 256], n_critics=1 if ddpg else 2),
        **kwargs,
    )


class EpisodeReturns(BaseCallback):
    """Every finished training episode's return, from the Monitor wrapper make_vec_env puts on each env."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []

    def _on_step(self) -> bool:
        self.returns += [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
        return True


def make_model(algo: str, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
    if algo == "dqn_atari":
        starts = learning_starts if learning_starts is not None else 80000
        return dqn_atari_model(env_id, seed, starts, buffer_size or 1_000_000)
    if algo in ("ppo", "dqn"):
        return ppo_model(env_id, seed) if algo == "ppo" else dqn_model(env_id, seed)
    if algo == "ppo_continuous":
        return ppo_continuous_model(env_id, seed)
    if algo == "ppo_atari":
        return ppo_atari_model(env_id, seed)
    starts = learning_starts if learning_starts is not None else (5000 if algo == "sac" else 25000)
    return sac_model(env_id, seed, starts) if algo == "sac" else td3_model(env_id, seed, starts, ddpg=algo == "ddpg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algo", choices=["ppo", "dqn", "ppo_continuous", "ppo_atari", "dqn_atari", "sac", "td3", "ddpg"])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=500000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave torch's default)")
    parser.add_argument("--learning-starts", type=int, default=None, help="off-policy: steps before learning (ours' default)")
    parser.add_argument("--buffer-size", type=int, default=None, help="dqn_atari: replay capacity (ours' default)")
    parser.add_argument("--json", default=None, help="write {sps, episodic_returns, ...} to this file")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = make_model(args.algo, args.env_id, args.seed, args.learning_starts, args.buffer_size)
    # a logger that writes nothing, as SB3's default does at verbose=0, without the empty /tmp/SB3-<date> folder it makes
    model.set_logger(Logger(folder=None, output_formats=[]))
    episodes = EpisodeReturns()
    start = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps, callback=episodes)
    sps = args.total_timesteps / (time.perf_counter() - start)
    print(f"SPS: {sps:.0f} (torch threads: {torch.get_num_threads()})")
    if args.json:
        result = {"impl": "sb3", "algo": args.algo, "env_id": args.env_id, "seed": args.seed, "sps": sps}
        # whole or not at all: the benchmark counts the run as done once this file exists
        atomic.write_text(args.json, json.dumps(result | {"episodic_returns": [float(r) for r in episodes.returns]}))


if __name__ == "__main__":
    main()
