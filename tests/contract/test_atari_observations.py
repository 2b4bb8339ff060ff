"""The Atari files on Gymnasium (PyTorch and the JAX twins) see the frames the original CleanRL saw: the emulator's
gray frames (the luma of its palette, which is OpenCV's RGB-to-gray) resized to 84x84, where the original resized
the RGB frame and then turned it gray."""

import importlib

import cv2
import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.experiment import register_atari_games

SCRIPTS = [
    "ppo_atari",
    "ppo_atari_lstm",
    "ppo_atari_multigpu",
    "dqn_atari",
    "c51_atari",
    "rainbow_atari",
    "sac_atari",
    "qdagger_dqn_atari_impalacnn",
    "dqn_atari_jax",
    "c51_atari_jax",
    "qdagger_dqn_atari_jax_impalacnn",
]


def original_env(env_id: str) -> gym.Env:
    """The original CleanRL's Atari preprocessing: RGB frames resized (INTER_AREA), then OpenCV's RGB-to-gray."""
    env = gym.make(env_id, disable_env_checker=True)
    env = MaxAndSkipEnv(NoopResetEnv(env, noop_max=30), skip=4)
    env = ClipRewardEnv(FireResetEnv(EpisodicLifeEnv(env)))
    gray = gym.spaces.Box(0, 255, (84, 84), np.uint8)
    env = gym.wrappers.TransformObservation(
        env, lambda rgb: cv2.cvtColor(cv2.resize(rgb, (84, 84), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY), gray
    )
    return gym.wrappers.FrameStackObservation(env, 4)


@pytest.mark.parametrize("script", SCRIPTS)
def test_frames_are_the_originals_to_within_one_gray_level(script):
    register_atari_games()
    ours = importlib.import_module(f"cleanrl.{script}").make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    theirs = original_env("BreakoutNoFrameskip-v4")
    obs, _ = ours.reset(seed=3)
    reference, _ = theirs.reset(seed=3)  # the same seed: the same no-op starts, so the same emulator states
    rng = np.random.default_rng(0)
    differing = []
    for _ in range(200):
        assert obs.shape[1:] == (84, 84) and obs.dtype == np.uint8  # a stack of frames (one for the LSTM)
        newest, original = obs[-1].astype(int), reference[-1]
        assert np.abs(newest - original).max() <= 1  # the two orders of resizing and graying round apart
        differing.append((newest != original).mean())
        action = int(rng.integers(ours.action_space.n))
        obs, _, terminated, truncated, _ = ours.step(action)
        reference, _, terminated_too, truncated_too, _ = theirs.step(action)
        assert (terminated, truncated) == (terminated_too, truncated_too)
        if terminated or truncated:
            obs, reference = ours.reset()[0], theirs.reset()[0]
    assert np.mean(differing) < 0.01  # a rounding difference, at a few pixels of a frame
    ours.close(), theirs.close()
