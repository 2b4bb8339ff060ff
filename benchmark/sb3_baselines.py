"""Stable-Baselines3 configured like our ppo.py and dqn.py, for side-by-side speed runs.

    python benchmark/sb3_baselines.py ppo --total-timesteps 500000 [--threads 1]

prints `SPS: <steps per second of model.learn>`. Differences SB3 does not let us remove:
its DQN uses the Huber loss (ours: MSE) and always computes a gradient norm (clipping is
disabled here with a huge threshold).
"""

import argparse
import time

import torch
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.env_util import make_vec_env


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("algo", choices=["ppo", "dqn"])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=500000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = ppo_model(args.env_id, args.seed) if args.algo == "ppo" else dqn_model(args.env_id, args.seed)
    start = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    print(f"SPS: {args.total_timesteps / (time.perf_counter() - start):.0f} (torch threads: {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
