"""cleanrl_utils.runtime.frame_replay: the Atari frame memory rebuilds the stacks a naive memory stores."""

import numpy as np
import pytest
import torch

from cleanrl import dqn_atari
from cleanrl_utils.runtime import plain_data
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)

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
        np.testing.assert_array_equal(np.asarray(batch.observations[k]), obs)
        np.testing.assert_array_equal(np.asarray(batch.next_observations[k]), next_obs)
        assert batch.actions[k].item() == action
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
    rb, naive = FrameReplayBuffer(capacity, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, synthetic_steps(rng, 400))
    slots = assert_same_transitions(rb, naive)
    # All but a few slots start a usable transition: the oldest three, and each episode's last frame.
    assert len(slots) >= (0.6 * capacity if capacity < 400 else 0.6 * 400)
    np.random.seed(0)
    sampled = rb.sample(256)  # sampling draws only valid slots
    stored = {naive.at_slot[s][0].tobytes() for s in slots}
    assert all(np.asarray(o).tobytes() in stored for o in sampled.observations)


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
    rb, naive = FrameReplayBuffer(128, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, steps)
    assert len(assert_same_transitions(rb, naive)) > 100


def test_memory_per_transition_fits_a_million_in_24_gib(capsys):
    rb = FrameReplayBuffer(1000, FRAME, STACK, "cpu")
    per_transition = rb.nbytes / rb.capacity
    # one 84x84 frame, then action (1 byte), reward (4), termination, episode-start and valid flags (1 each)
    assert per_transition == 84 * 84 + 8 == 7064
    default = dqn_atari.Args().buffer_size * per_transition
    with capsys.disabled():
        print(f"\nreplay memory: {per_transition:.0f} bytes per transition, {default / 2**30:.2f} GiB for 1M")
    assert dqn_atari.Args().buffer_size == 1_000_000 and default < 7 * 2**30  # room left in 24 GiB
    assert default * 8 > 50 * 2**30  # what storing both 4-frame stacks would take


def test_frame_buffer_checkpoint_leaves_out_the_empty_part():
    rng = np.random.default_rng(1)
    rb, naive = FrameReplayBuffer(10_000, FRAME, STACK, "cpu"), NaiveBuffer()
    fill(rb, naive, synthetic_steps(rng, 50))
    data = plain_data.dumps(rb.state_dict())
    assert len(data) < 80 * rb.nbytes / 10_000  # ~55 frames stored, not 10,000
    restored = FrameReplayBuffer(10_000, FRAME, STACK, "cpu")  # made by the resumed run, then filled in
    restored.load_state_dict(plain_data.loads(data))
    assert restored.frames.shape == rb.frames.shape and (restored.pos, restored.last) == (rb.pos, rb.last)
    assert_same_transitions(restored, naive)
    fill(restored, naive, synthetic_steps(rng, 30))  # and it goes on filling
    assert_same_transitions(restored, naive)
    with pytest.raises(ValueError, match="frames are not"):  # a memory of another size is not taken, nor half of it
        FrameReplayBuffer(10_000, (42, 42), STACK).load_state_dict(plain_data.loads(data))


def test_buffer_size_counts_transitions_and_any_positive_size_works():
    rng = np.random.default_rng(2)
    for buffer_size in (1, 10):
        rb, naive = FrameReplayBuffer(buffer_size, FRAME, STACK), NaiveBuffer()
        fill(rb, naive, synthetic_steps(rng, 60))
        assert len(assert_same_transitions(rb, naive)) >= min(buffer_size, 4)
    long_episode, stack = [], np.repeat(rng.integers(0, 256, (1, *FRAME), dtype=np.uint8), STACK, axis=0)
    for _ in range(200):  # one episode, never ending: the memory holds its last 100 transitions
        next_stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, *FRAME), dtype=np.uint8)])
        long_episode.append((stack, 1, 0.0, next_stack, False, False))
        stack = next_stack
    rb, naive = FrameReplayBuffer(100, FRAME, STACK), NaiveBuffer()
    fill(rb, naive, long_episode)
    assert len(assert_same_transitions(rb, naive)) >= 100
    with pytest.raises(ValueError, match="one transition at least"):
        FrameReplayBuffer(0, FRAME, STACK)


def test_numpy_and_torch_samples_are_the_same_transitions():
    rng = np.random.default_rng(3)
    on_host, on_torch, naive = FrameReplayBuffer(64, FRAME, STACK), FrameReplayBuffer(64, FRAME, STACK, "cpu"), NaiveBuffer()
    steps = synthetic_steps(rng, 100)
    fill(on_host, naive, steps)
    fill(on_torch, NaiveBuffer(), steps)
    np.random.seed(5)
    host = on_host.sample(32)
    np.random.seed(5)
    tensors = on_torch.sample(32)
    assert isinstance(host.frames, np.ndarray) and isinstance(tensors.frames, torch.Tensor)
    for field_host, field_torch in zip(host, tensors, strict=True):
        np.testing.assert_array_equal(field_host, field_torch.numpy())
    assert host.actions.dtype == np.int64 and host.frames.shape == (32, STACK + 1, *FRAME)
