"""Why does a trained CartPole agent's episode end? Plays a saved pqn.py model and counts the reasons.

    python -m benchmark.checks.cartpole_failure_modes runs/CartPole-v1__pqn__1__*/pqn.cleanrl_model [--episodes 20]

For each epsilon (0 and 0.05) it plays the episodes and reports their mean length and how they
ended: the time limit (500 steps), the cart leaving the track (|x| > 2.4) or the pole falling.
Used on the classic-control page to explain PQN's late collapse on CartPole.
"""

import argparse
import pickle
import sys
from collections import Counter
from typing import NoReturn

import gymnasium as gym
import numpy as np
import torch

from cleanrl import pqn
from cleanrl_utils.runtime.model_files import read_torch


def play(model: torch.nn.Module, episodes: int, epsilon: float) -> tuple[float, Counter]:
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    lengths, reasons = [], Counter()
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        for step in range(1, 10_000):
            with torch.inference_mode():
                action = int(model(torch.as_tensor(obs)).argmax())
            if rng.random() < epsilon:
                action = int(rng.integers(2))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                cart_out = abs(obs[0]) > env.unwrapped.x_threshold
                reasons["time limit" if truncated else "cart left the track" if cart_out else "pole fell"] += 1
                lengths.append(step)
                break
    return float(np.mean(lengths)), reasons


def fail(message: str) -> NoReturn:
    print(f"cartpole_failure_modes.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_path")
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()
    model = pqn.QNetwork(pqn.make_vector_env("CartPole-v1", 1, False, "unused"))
    if args.episodes <= 0:
        fail(f"--episodes must be positive, got {args.episodes}")
    try:  # tensors only: a TorchScript archive, a pickle or a FIFO is refused unread
        model.load_state_dict(read_torch(args.model_path))
    except (OSError, ValueError, RuntimeError, TypeError, AttributeError, pickle.UnpicklingError) as e:
        fail(f"{args.model_path} is not a pqn.py CartPole model: {' '.join(str(e).split())[:200]}")
    print("| epsilon | mean episode length | how episodes ended |")
    print("|---|---|---|")
    for epsilon in (0.0, 0.05):
        length, reasons = play(model, args.episodes, epsilon)
        print(f"| {epsilon} | {length:.1f} | {', '.join(f'{k}: {v}' for k, v in reasons.most_common())} |")


if __name__ == "__main__":
    main()
