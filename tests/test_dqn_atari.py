"""dqn_atari.py beyond the contract tests: the frame replay memory, whole-game logging, v5 ids, evaluation."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import dqn_atari
from cleanrl_utils.evals.dqn_atari_eval import evaluate
from tests.helpers import save_untrained_model

FRAME = (84, 84)
STACK = 4


class NaiveBuffer:
    """The obvious layout, to check against: both stacked observations of each transition, by slot."""

    def __init__(self):
        self.at_slot = {}

    def add(self, slot, obs, next_obs, action, reward, terminated):
        self.at_slot[slot] = (obs.copy(), action, reward, next_obs.copy(), terminated)


def fill(rb, naive, steps):
    """Feed both buffers `steps` transitions: (obs, action, reward, next_obs, terminated, episode_end) each."""
    for obs, action, reward, next_obs, terminated, episode_end in steps:
        rb.add(obs, next_obs, action, reward, terminated, episode_end)
        # the transition's next frame was written last, right after the transition's own slot
        naive.add((rb.pos - 2) % rb.capacity, obs, next_obs, action, reward, terminated)


def assert_same_transitions(rb, naive):
    slots = np.flatnonzero(rb.valid)
    batch = rb.fetch(slots)
    for k, slot in enumerate(slots):
        obs, action, reward, next_obs, terminated = naive.at_slot[slot]
        np.testing.assert_array_equal(batch.observations[k].numpy(), obs)
        np.testing.assert_array_equal(batch.next_observations[k].numpy(), next_obs)
        assert batch.actions[k, 0].item() == action
        assert batch.rewards[k].item() == pytest.approx(reward)
        assert batch.dones[k].item() == float(terminated)
    return slots


def synthetic_steps(rng, count):
    """Random frames stacked as Gymnasium's FrameStackObservation does (the reset frame repeated), with
    episodes of 1 to 12 steps that end by termination or by a time-limit cut."""
    steps, stack = [], None
    for _ in range(count):
        if stack is None:
            stack = np.repeat(rng.integers(0, 256, (1, *FRAME), dtype=np.uint8), STACK, axis=0)
            left = rng.integers(1, 13)
        next_stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, *FRAME), dtype=np.uint8)])
        left -= 1
        terminated = left == 0 and rng.random() < 0.5
        steps.append((stack, int(rng.integers(4)), float(rng.choice([-1.0, 0.0, 1.0])), next_stack, terminated, left == 0))
        stack = None if left == 0 else next_stack
    return steps


@pytest.mark.parametrize("capacity", [40, 1000])  # wrapped around many times, and not yet full
def test_frame_buffer_rebuilds_the_stacks_a_naive_buffer_stores(capacity):
    rng = np.random.default_rng(0)
    rb, naive = dqn_atari.FrameReplayBuffer(capacity, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, synthetic_steps(rng, 400))
    slots = assert_same_transitions(rb, naive)
    # All but a few slots start a usable transition: the oldest three, and each episode's last frame.
    assert len(slots) >= (0.6 * capacity if capacity < 400 else 0.6 * 400)
    np.random.seed(0)
    sampled = rb.sample(256)  # sampling draws only valid slots
    stored = {naive.at_slot[s][0].tobytes() for s in slots}
    assert all(o.numpy().tobytes() in stored for o in sampled.observations)


def test_frame_buffer_matches_the_real_env_stacks():
    """On Breakout's frames, with lives lost (each one an episode start) and the memory wrapped around."""
    env = dqn_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    steps = []
    for _ in range(300):
        next_obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        steps.append((obs, 0, reward, next_obs, terminated, terminated or truncated))
        obs = env.reset()[0] if terminated or truncated else next_obs
    env.close()
    assert sum(s[4] for s in steps) >= 3, "some lives were lost"
    rb, naive = dqn_atari.FrameReplayBuffer(128, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, steps)
    assert len(assert_same_transitions(rb, naive)) > 100


def test_memory_per_transition_fits_a_million_in_24_gib(capsys):
    rb = dqn_atari.FrameReplayBuffer(1000, FRAME, STACK, "cpu")
    per_transition = rb.nbytes / 1000
    # one 84x84 frame, then action (1 byte), reward (4), termination, episode-start and valid flags (1 each)
    assert per_transition == 84 * 84 + 8 == 7064
    default = dqn_atari.Args().buffer_size * per_transition
    with capsys.disabled():
        print(f"\nreplay memory: {per_transition:.0f} bytes per transition, {default / 2**30:.2f} GiB for 1M")
    assert dqn_atari.Args().buffer_size == 1_000_000 and default < 7 * 2**30  # room left in 24 GiB
    assert default * 8 > 50 * 2**30  # what storing both 4-frame stacks would take


def test_frame_buffer_checkpoint_leaves_out_the_empty_part():
    rng = np.random.default_rng(1)
    rb, naive = dqn_atari.FrameReplayBuffer(10_000, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, synthetic_steps(rng, 50))
    data = pickle.dumps(rb)
    assert len(data) < 80 * rb.nbytes / 10_000  # ~55 frames stored, not 10,000
    restored = pickle.loads(data)
    assert restored.frames.shape == rb.frames.shape and (restored.pos, restored.last) == (rb.pos, rb.last)
    assert_same_transitions(restored, naive)
    fill(restored, naive, synthetic_steps(rng, 30))  # and it goes on filling
    assert_same_transitions(restored, naive)


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
    returns = evaluate(
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
