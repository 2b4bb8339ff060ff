"""Stable-Baselines3 configured like our scripts, for side-by-side speed and learning runs.

    python -m benchmark.compare.sb3_baselines ppo --total-timesteps 500000 [--threads 1]
    python -m benchmark.compare.sb3_baselines sac --env-id Hopper-v4 --total-timesteps 100000 --json out.json
    python -m benchmark.compare.sb3_baselines ppo_atari --env-id BreakoutNoFrameskip-v4 --total-timesteps 300000
    python -m benchmark.compare.sb3_baselines dqn_atari --env-id BreakoutNoFrameskip-v4 --total-timesteps 20000 \
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
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from stable_baselines3 import DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack, VecNormalize

from cleanrl_utils.runtime import atomic


def vec_env(n_envs: int) -> Callable[[str, int], VecEnv]:
    """`n_envs` copies of a Gymnasium env, each under SB3's Monitor (which records the episodes' returns)."""
    return lambda env_id, seed: make_vec_env(env_id, n_envs=n_envs, seed=seed)


def normalized_env(env_id: str, seed: int) -> VecEnv:
    """One env with observations and rewards normalised and clipped at 10, as ppo_continuous_action.py does."""
    return VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed), gamma=0.99, clip_obs=10.0, clip_reward=10.0)


def atari_env(n_envs: int) -> Callable[[str, int], VecEnv]:
    """`n_envs` Atari games under SB3's AtariWrapper (noop reset, max-and-skip 4, a lost life ends the learning
    episode, fire reset, reward sign: what ours do), 4 frames stacked. Its Monitor sits below the wrapper, so the
    returns it records are whole games' scores, as ours are."""

    def make(env_id: str, seed: int) -> VecEnv:
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        return VecFrameStack(make_atari_env(env_id, n_envs=n_envs, seed=seed), n_stack=4)

    return make


def annealed(learning_rate: float) -> Callable[[float], float]:
    """A learning rate annealed linearly to 0 over the run (SB3 passes the share of the run still to go)."""
    return lambda progress_remaining: learning_rate * progress_remaining


def gaussian_action_noise(env: VecEnv) -> dict:
    """Exploration noise of 0.1 of the (normalised) half-range, as our TD3 and DDPG add."""
    n_actions = env.action_space.shape[0]
    return {"action_noise": NormalActionNoise(mean=np.zeros(n_actions), sigma=0.1 * np.ones(n_actions))}


def build(algo: type[BaseAlgorithm], settings: NamedTuple, env_id: str, seed: int, **fixed: object) -> BaseAlgorithm:
    """`algo` on the CPU with `settings`' fields as its keyword arguments (`env` made for `env_id` and `seed`,
    `per_env` giving those that depend on it), overridden by `fixed`."""
    own = settings._asdict()
    env = own.pop("env")(env_id, seed)
    per_env = own.pop("per_env", None)
    kwargs = own | (per_env(env) if per_env else {}) | fixed
    return algo(kwargs.pop("policy"), env, seed=seed, device="cpu", **kwargs)


def given(learning_starts: int | None, buffer_size: int | None) -> dict:
    """--learning-starts and --buffer-size where given, over an off-policy baseline's defaults."""
    pairs = (("learning_starts", learning_starts), ("buffer_size", buffer_size))
    return {name: value for name, value in pairs if value is not None}


TANH_64_64 = dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh)


class PPOSettings(NamedTuple):
    """A PPO file's defaults in SB3's names; all share GAE(0.99, 0.95), normalised advantages, value coefficient
    0.5, gradient norm 0.5, the learning rate annealed to 0 and the value change clipped like the ratio."""

    env: Callable[[str, int], VecEnv]
    learning_rate: float
    n_steps: int  # per env and rollout
    batch_size: int  # the minibatch
    n_epochs: int
    clip_range: float
    ent_coef: float
    policy: str = "MlpPolicy"  # CnnPolicy: the Nature CNN on frames scaled to [0, 1]
    policy_kwargs: dict | None = TANH_64_64

    def model(self, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
        annealing = dict(learning_rate=annealed(self.learning_rate), clip_range_vf=self.clip_range)
        shared = dict(gamma=0.99, gae_lambda=0.95, normalize_advantage=True, vf_coef=0.5, max_grad_norm=0.5)
        return build(PPO, self, env_id, seed, **shared, **annealing)


class DQNSettings(NamedTuple):
    """A DQN file's defaults in SB3's names; all share gamma 0.99, hard target copies, epsilon from 1, one gradient
    step per update and no gradient clipping (SB3 always clips: a huge threshold)."""

    env: Callable[[str, int], VecEnv]
    learning_rate: float
    buffer_size: int
    learning_starts: int
    batch_size: int
    train_freq: int  # a gradient step every this many steps
    target_update_interval: int
    exploration_fraction: float  # of the budget over which epsilon falls to its final value
    exploration_final_eps: float
    policy: str = "MlpPolicy"  # CnnPolicy: the Nature CNN
    policy_kwargs: dict | None = None

    def model(self, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
        shared = dict(tau=1.0, gamma=0.99, gradient_steps=1, exploration_initial_eps=1.0, max_grad_norm=1e10)
        return build(DQN, self, env_id, seed, **shared, **given(learning_starts, buffer_size))


# what SAC, TD3 and DDPG share: buffer 1e6, batch 256, tau 0.005, gamma 0.99, an update every step, lr 3e-4
OFF_POLICY = dict(
    buffer_size=1_000_000, batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, learning_rate=3e-4
)


class SACSettings(NamedTuple):
    """sac_continuous_action.py's defaults in SB3's names: twin critics, automatic entropy tuning (alpha starts at 1,
    target entropy -dim(A))."""

    learning_starts: int = 5000
    ent_coef: str = "auto_1.0"
    target_update_interval: int = 1
    policy_kwargs: dict = dict(net_arch=[256, 256])
    env: Callable[[str, int], VecEnv] = vec_env(1)
    policy: str = "MlpPolicy"

    def model(self, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
        return build(SAC, self, env_id, seed, **(OFF_POLICY | given(learning_starts, buffer_size)))


class TD3Settings(NamedTuple):
    """td3_continuous_action.py's defaults in SB3's names (ddpg_continuous_action.py's: one critic, no target
    smoothing): Gaussian exploration noise, actor and targets updated every 2nd critic update."""

    policy_kwargs: dict = dict(net_arch=[256, 256], n_critics=2)
    target_policy_noise: float = 0.2
    target_noise_clip: float = 0.5
    learning_starts: int = 25000
    policy_delay: int = 2
    per_env: Callable[[VecEnv], dict] = gaussian_action_noise
    env: Callable[[str, int], VecEnv] = vec_env(1)
    policy: str = "MlpPolicy"

    def model(self, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
        return build(TD3, self, env_id, seed, **(OFF_POLICY | given(learning_starts, buffer_size)))


BASELINES: dict[str, PPOSettings | DQNSettings | SACSettings | TD3Settings] = {
    "ppo": PPOSettings(vec_env(4), 2.5e-4, n_steps=128, batch_size=128, n_epochs=4, clip_range=0.2, ent_coef=0.01),
    "ppo_continuous": PPOSettings(
        normalized_env, 3e-4, n_steps=2048, batch_size=64, n_epochs=10, clip_range=0.2, ent_coef=0.0
    ),
    "ppo_atari": PPOSettings(
        atari_env(8), 2.5e-4, 128, 256, 4, clip_range=0.1, ent_coef=0.01, policy="CnnPolicy", policy_kwargs=None
    ),
    "dqn": DQNSettings(vec_env(1), 2.5e-4, 10_000, 10_000, 128, 10, 500, 0.5, 0.05, policy_kwargs=dict(net_arch=[120, 84])),
    "dqn_atari": DQNSettings(atari_env(1), 1e-4, 1_000_000, 80_000, 32, 4, 1000, 0.1, 0.01, policy="CnnPolicy"),
    "sac": SACSettings(),
    "td3": TD3Settings(),
    "ddpg": TD3Settings(dict(net_arch=[256, 256], n_critics=1), target_policy_noise=0.0, target_noise_clip=0.0),
}


class EpisodeReturns(BaseCallback):
    """Every finished training episode's return, from the Monitor wrapper make_vec_env puts on each env."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []

    def _on_step(self) -> bool:
        self.returns += [info["episode"]["r"] for info in self.locals["infos"] if "episode" in info]
        return True


def make_model(algo: str, env_id: str, seed: int, learning_starts: int | None, buffer_size: int | None) -> BaseAlgorithm:
    """The baseline `algo` on `env_id`; an off-policy one with `learning_starts` and `buffer_size` (None: ours' default)."""
    return BASELINES[algo].model(env_id, seed, learning_starts, buffer_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algo", choices=list(BASELINES))
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=500000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave torch's default)")
    parser.add_argument("--learning-starts", type=int, default=None, help="off-policy: steps before learning (ours' default)")
    parser.add_argument("--buffer-size", type=int, default=None, help="off-policy: replay capacity (ours' default)")
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
