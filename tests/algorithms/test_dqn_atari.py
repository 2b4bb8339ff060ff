"""dqn_atari.py beyond the contract tests: whole-game logging, v5 ids, evaluation (its memory: test_frame_replay.py)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import dqn_atari
from cleanrl_utils.runtime.evals.atari import evaluate_dqn
from tests.helpers import save_untrained_model


def test_logged_episodes_are_whole_games():
    """`info["episode"]` (what the script logs) comes only at the game's end: no lives left, all its frames."""
    env = dqn_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    env.action_space.seed(0)
    env.reset(seed=0)
    games, lost_lives = [], 0
    for _ in range(400):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if "episode" in info:
            assert terminated and info["lives"] == 0
            # its length counts emulator frames of the whole game, no-op and FIRE frames of the resets included
            assert info["episode"]["l"] == info["episode_frame_number"]
            games.append(float(info["episode"]["r"]))
        elif terminated or truncated:
            assert info["lives"] > 0
            lost_lives += 1
        if terminated or truncated:
            env.reset()
    env.close()
    assert games and lost_lives >= 4 * len(games)  # Breakout has 5 lives


def test_v5_ids_skip_frames_once():
    env = dqn_atari.make_env("ALE/Breakout-v5", 0, False, "unused")()
    assert env.unwrapped._frameskip == 1  # MaxAndSkipEnv skips 4, not 4 x 4
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    env.close()


def test_evaluate_plays_whole_games(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = dqn_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    model_path = save_untrained_model(dqn_atari.QNetwork, env, tmp_path / "dqn_atari.cleanrl_model")
    returns = evaluate_dqn(
        model_path,
        dqn_atari.make_env,
        "BreakoutNoFrameskip-v4",
        2,
        "ev",
        dqn_atari.QNetwork,
        epsilon=0.05,
        capture_video=False,
    )
    assert len(returns) == 2 and all(r >= 0 for r in returns)


def test_network_divides_frames_by_255():
    q = dqn_atari.QNetwork(type("E", (), {"action_space": gym.spaces.Discrete(4)})())
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    assert torch.allclose(q(frames), q.network(frames.float() / 255.0))


def test_env_factory_refuses_a_non_atari_env():
    """enjoy and the evaluator call the factory directly: a clear Gymnasium error, which enjoy reports in one line."""
    with pytest.raises(gym.error.Error, match="CartPole-v1 is not an Atari game"):
        dqn_atari.make_env("CartPole-v1", 0, False, "unused")()
