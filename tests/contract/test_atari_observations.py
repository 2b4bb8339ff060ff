"""The Atari files on Gymnasium (PyTorch and the JAX twins) see the original CleanRL's frames, pixel for pixel: the
emulator's RGB frames, the max of the last two taken on RGB, resized to 84x84 (INTER_AREA), then OpenCV's
RGB-to-gray.

The order matters. A max on the emulator's gray frames is up to 38 gray levels off where sprites drawn in different
colours alternate between frames (MsPacman, Qbert, BeamRider), and graying before the resize rounds one level apart
on up to 11% of the pixels: benchmark/studies/atari_frame_order.py, and the second test below."""

import importlib

import cv2
import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.runtime.experiment import register_atari_games

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
GAMES = ["Breakout", "MsPacman", "Qbert", "BeamRider"]


def marks(script: str, game: str) -> list[pytest.MarkDecorator]:
    """The quick run: every file on MsPacman (the order shows from the first step) and ppo_atari on every game. The
    QDagger students are here too: a teacher trained by dqn_atari acts on the frames a student passes it."""
    return [] if game == "MsPacman" or script == "ppo_atari" else [pytest.mark.extended]


CASES = [pytest.param(script, game, marks=marks(script, game)) for script in SCRIPTS for game in GAMES]


ORDERS = {
    "original": lambda rgb: cv2.cvtColor(cv2.resize(rgb, (84, 84), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY),
    "gray, then resize": lambda rgb: cv2.resize(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), (84, 84), interpolation=cv2.INTER_AREA),
    "max on gray frames": lambda gray: cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA),
}


def original_env(env_id: str, order: str = "original") -> gym.Env:
    """The original CleanRL's Atari preprocessing, its frames made in `order` (ORDERS): by default the original's, the
    max of two RGB frames resized, then turned gray."""
    env = gym.make(env_id, disable_env_checker=True, obs_type="grayscale" if order == "max on gray frames" else "rgb")
    env = EpisodicLifeEnv(MaxAndSkipEnv(NoopResetEnv(env, noop_max=30), skip=4))
    env = ClipRewardEnv(FireResetEnv(env) if "FIRE" in env.unwrapped.get_action_meanings() else env)
    env = gym.wrappers.TransformObservation(env, ORDERS[order], gym.spaces.Box(0, 255, (84, 84), np.uint8))
    return gym.wrappers.FrameStackObservation(env, 4)


def gaps_to_the_original(ours: gym.Env, game: str, steps: int = 120) -> list[np.ndarray]:
    """|ours - original| of the newest frame at each of `steps` random actions, both reset with one seed."""
    theirs = original_env(f"{game}NoFrameskip-v4")
    obs, _ = ours.reset(seed=3)
    reference, _ = theirs.reset(seed=3)  # the same seed: the same no-op starts, so the same emulator states
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(steps):
        assert obs.shape[1:] == (84, 84) and obs.dtype == np.uint8  # a stack of frames (one for the LSTM)
        gaps.append(np.abs(obs[-1].astype(int) - reference[-1]))
        action = int(rng.integers(ours.action_space.n))
        obs, _, terminated, truncated, _ = ours.step(action)
        reference, _, terminated_too, truncated_too, _ = theirs.step(action)
        assert (terminated, truncated) == (terminated_too, truncated_too)
        if terminated or truncated:
            obs, reference = ours.reset()[0], theirs.reset()[0]
    ours.close(), theirs.close()
    return gaps


@pytest.mark.parametrize("script, game", CASES)
def test_frames_are_the_originals(script, game):
    register_atari_games()
    ours = importlib.import_module(f"cleanrl.{script}").make_env(f"{game}NoFrameskip-v4", 0, False, "unused")()
    largest = max(gap.max() for gap in gaps_to_the_original(ours, game))
    assert largest == 0, f"{script} on {game}: a frame {largest} gray levels from the original's"


@pytest.mark.parametrize(
    "order, game",
    [
        pytest.param(order, game, marks=[] if game == "MsPacman" else [pytest.mark.extended])
        for order in ("gray, then resize", "max on gray frames")
        for game in GAMES
        if (order, game) != ("max on gray frames", "Breakout")  # Breakout's colours do not alternate
    ],
)
def test_other_orders_are_caught_on_these_games(order, game):
    """The test above has teeth: graying before the resize is one level off somewhere, a max on gray frames more."""
    register_atari_games()
    largest = max(gap.max() for gap in gaps_to_the_original(original_env(f"{game}NoFrameskip-v4", order), game))
    if order == "gray, then resize":
        assert largest == 1  # the two orders round apart, by one level at most
    else:
        assert largest > 1
