"""rainbow_atari.py beyond the contract tests: sum tree, prioritised n-step frame memory, noisy layers, evaluation."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import rainbow_atari
from cleanrl_utils.runtime.evals.atari import evaluate_distributional
from cleanrl_utils.runtime.evals.common import load_distributional
from tests.helpers import run_script
from tests.runtime.test_frame_replay import FRAME, STACK, synthetic_steps

BREAKOUT = "BreakoutNoFrameskip-v4"
GAMMA, N_STEP = 0.9, 3


def test_sum_tree_totals_and_search_follow_updates():
    tree = rainbow_atari.SumTree(10)  # 16 leaves, 6 of them never used
    rng = np.random.default_rng(0)
    priorities = np.zeros(10)
    for _ in range(20):
        slots = rng.integers(0, 10, size=3)
        values = rng.random(3) * (rng.random(3) < 0.8)  # zero now and then
        tree.update(slots, values)
        priorities[slots] = values  # with a repeated slot, the last value counts, in both
        assert tree.nodes[1] == pytest.approx(priorities.sum())
        assert tree.nodes[tree.leaves : tree.leaves + 10] == pytest.approx(priorities)
    # a value falls in the slot where the running sum of the priorities passes it; empty slots are never found
    values = rng.random(1000) * priorities.sum()
    expected = np.searchsorted(np.cumsum(priorities), values, side="right")
    assert (tree.find(values) == expected).all() and (priorities[tree.find(values)] > 0).all()


def fill(rb, steps):
    """Feed `steps` to the memory; return the slot each step's transition was stored at."""
    slots = []
    for obs, action, reward, next_obs, terminated, episode_end in steps:
        rb.add(obs, next_obs, action, reward, terminated, episode_end)
        slots.append((rb.pos - 2) % rb.capacity)  # its next frame was written last, right after its own slot
    return slots


def naive_n_step(steps, t):
    """(return, next_obs, done, discount) of the n-step transition from step t; None if its n steps are not all there."""
    total = 0.0
    for k in range(N_STEP):
        if t + k == len(steps):
            return None
        _, _, reward, next_obs, terminated, episode_end = steps[t + k]
        total += GAMMA**k * reward
        if episode_end:
            break
    return total, next_obs, terminated, GAMMA ** (k + 1)


def new_memory(buffer_size, alpha=0.5):
    return rainbow_atari.PrioritizedFrameReplayBuffer(buffer_size, (STACK, *FRAME), N_STEP, GAMMA, alpha, 1e-6, "cpu")


@pytest.mark.parametrize("buffer_size", [40, 1000])  # wrapped around many times, and not yet full
def test_n_step_transitions_match_a_naive_computation(buffer_size):
    steps = synthetic_steps(np.random.default_rng(0), 400)  # episodes of 1 to 12 steps, terminated or cut
    rb = new_memory(buffer_size)
    slot_of = fill(rb, steps)
    latest = {slot: t for t, slot in enumerate(slot_of)}  # each slot holds its newest step
    valid = np.flatnonzero(rb.valid)
    batch = rb.fetch(valid, np.ones(len(valid)))
    for k, slot in enumerate(valid):
        t = latest[slot]
        total, next_obs, terminated, discount = naive_n_step(steps, t)
        np.testing.assert_array_equal(batch.observations[k].numpy(), steps[t][0])
        np.testing.assert_array_equal(batch.next_observations[k].numpy(), next_obs)  # never from the next episode
        assert batch.actions[k].item() == steps[t][1]
        assert batch.returns[k, 0].item() == pytest.approx(total, abs=1e-5)
        assert (batch.dones[k, 0].item(), batch.discounts[k, 0].item()) == (float(terminated), pytest.approx(discount))
    assert len(valid) >= 0.6 * min(buffer_size, 400)
    if buffer_size == 1000:  # nothing overwritten: all but the unfinished tail of the last episode can be sampled
        expected = {slot_of[t] for t in range(len(steps)) if naive_n_step(steps, t) is not None}
        assert set(valid) == expected and len(expected) < len(steps)
    assert (rb.tree.nodes[rb.tree.leaves : rb.tree.leaves + rb.capacity] > 0).tolist() == rb.valid.tolist()


def test_buffer_size_counts_transitions():
    rng = np.random.default_rng(4)
    stack, steps = np.repeat(rng.integers(0, 256, (1, *FRAME), dtype=np.uint8), STACK, axis=0), []
    for _ in range(300):  # one episode, never ending: the memory holds its last 100 n-step transitions at least
        next_stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, *FRAME), dtype=np.uint8)])
        steps.append((stack, 1, 1.0, next_stack, False, False))
        stack = next_stack
    rb = new_memory(100)
    slot_of = fill(rb, steps)
    valid = np.flatnonzero(rb.valid)
    assert len(valid) >= 100
    latest = {slot: t for t, slot in enumerate(slot_of)}
    batch = rb.fetch(valid, np.ones(len(valid)))
    for k, slot in enumerate(valid):  # each one whole: its own stack, and the stack n steps later
        np.testing.assert_array_equal(batch.observations[k].numpy(), steps[latest[slot]][0])
        np.testing.assert_array_equal(batch.next_observations[k].numpy(), steps[latest[slot] + N_STEP - 1][3])
    rb = new_memory(1)  # the smallest memory still holds a transition to sample
    fill(rb, steps[:20])
    assert rb.valid.sum() >= 1


@pytest.mark.extended  # 13 s of one core: CI runs it after the quick run
def test_a_memory_of_ten_transitions_trains(tmp_path):
    """`--buffer-size` counts transitions (not frames), so even 10 is a memory to learn from (a batch at most that)."""
    args = ("--buffer-size", "10", "--batch-size", "8", "--learning-starts", "10", "--total-timesteps", "101")
    run = run_script("rainbow_atari.py", *args, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert [step for step, _ in run.scalars()["losses/td_loss"]] == [100]


def test_truncated_returns_stop_at_episode_ends():
    """Hand-made: a two-step episode ended by a termination, then a one-step episode cut by a time limit."""
    frame = [np.full((STACK, *FRAME), i, dtype=np.uint8) for i in range(6)]
    rb = new_memory(100)
    rb.add(frame[0], frame[1], 0, 1.0, False, False)
    rb.add(frame[1], frame[2], 1, 2.0, True, True)
    rb.add(frame[3], frame[4], 2, 4.0, False, True)
    batch = rb.fetch(np.flatnonzero(rb.valid), np.ones(3))
    assert batch.returns[:, 0].tolist() == pytest.approx([1.0 + GAMMA * 2.0, 2.0, 4.0])
    assert batch.dones[:, 0].tolist() == [1.0, 1.0, 0.0]  # the cut one bootstraps, from its real last frame
    assert batch.discounts[:, 0].tolist() == pytest.approx([GAMMA**2, GAMMA, GAMMA])
    assert [obs[-1, 0, 0].item() for obs in batch.next_observations] == [2, 2, 4]


def test_sampling_is_proportional_to_priorities_with_importance_weights():
    rb = new_memory(1000, alpha=0.5)
    fill(rb, synthetic_steps(np.random.default_rng(1), 200))
    valid = np.flatnonzero(rb.valid)
    assert (rb.tree.nodes[rb.tree.leaves + valid] == 1.0).all()  # new transitions get the largest priority so far
    losses = np.random.default_rng(2).random(len(valid)) * 3
    rb.update_priorities(valid, losses)
    priorities = (losses + 1e-6) ** 0.5
    assert rb.tree.nodes[1] == pytest.approx(priorities.sum()) and rb.max_priority == pytest.approx(priorities.max())
    np.random.seed(0)
    counts = np.zeros(rb.capacity)
    for _ in range(300):
        batch, slots = rb.sample(64, beta=0.4)
        np.add.at(counts, slots, 1)
        weights = (priorities[np.searchsorted(valid, slots)] / priorities.sum()) ** -0.4
        assert batch.weights.numpy() == pytest.approx(weights / weights.max(), rel=1e-5)
    frequencies = counts[valid] / counts.sum()
    assert np.abs(frequencies - priorities / priorities.sum()).max() < 0.006
    assert rb.sample(32, beta=0.0)[0].weights.tolist() == [1.0] * 32  # beta 0: no correction


def test_memory_per_transition_fits_a_million_in_24_gib():
    rb = new_memory(rainbow_atari.Args().buffer_size)  # np.zeros: the pages are not touched yet
    per_transition = rb.nbytes / rb.capacity
    # a frame, action, reward (4), termination, episode end, episode start, valid; and the float64 sum tree
    assert 84 * 84 + 9 < per_transition < 84 * 84 + 9 + 17
    assert rb.nbytes < 7 * 2**30  # room left on a 24 GiB machine for the rest


def test_noisy_layer_noise_changes_on_reset_and_is_off_in_eval_mode():
    torch.manual_seed(0)
    layer, x = rainbow_atari.NoisyLinear(5, 3), torch.randn(4, 5)
    first, again = layer(x), layer(x)
    assert torch.equal(first, again)  # the noise stays until reset
    # the factorised noise: weights mu + sigma * f(eps_out) f(eps_in)^T
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(layer.epsilon_out, layer.epsilon_in)
    bias = layer.bias_mu + layer.bias_sigma * layer.epsilon_out
    assert torch.allclose(first, x @ weight.T + bias, atol=1e-6)
    layer.reset_noise()
    assert not torch.allclose(layer(x), first)
    layer.eval()
    plain = x @ layer.weight_mu.T + layer.bias_mu
    assert torch.allclose(layer(x), plain)
    layer.reset_noise()
    assert torch.allclose(layer(x), plain)  # eval mode is deterministic
    assert layer.weight_sigma[0, 0].item() == pytest.approx(0.5 / 5**0.5)
    assert layer.bias_sigma[0].item() == pytest.approx(0.5 / 3**0.5)


def test_network_is_dueling_and_distributional():
    env = type("E", (), {"action_space": gym.spaces.Discrete(4)})()
    torch.manual_seed(0)
    q = rainbow_atari.NoisyDuelingDistributionalNetwork(env, n_atoms=11, v_min=-5, v_max=5)
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    pmfs = q.pmfs(frames)
    assert pmfs.shape == (2, 4, 11) and torch.allclose(pmfs.sum(-1), torch.ones(2, 4))
    h = q.network(frames / 255.0)
    value, advantage = q.value_head(h).view(2, 1, 11), q.advantage_head(h).view(2, 4, 11)
    assert torch.allclose(pmfs, (value + advantage - advantage.mean(1, keepdim=True)).softmax(-1), atol=1e-6)
    assert torch.allclose(q.log_pmfs(frames).exp(), pmfs)
    assert torch.allclose(q(frames), (pmfs * torch.linspace(-5, 5, 11)).sum(-1))
    before = q(frames)
    q.reset_noise()  # reaches every noisy layer
    assert not torch.allclose(q(frames), before)


def test_evaluate_plays_whole_games_without_noise(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = rainbow_atari.make_env(BREAKOUT, 0, False, "unused")()
    torch.manual_seed(0)
    support = {"n_atoms": 11, "v_min": -5.0, "v_max": 5.0}
    model = rainbow_atari.NoisyDuelingDistributionalNetwork(env, **support)
    path = tmp_path / "rainbow_atari.cleanrl_model"
    torch.save({"model_weights": model.state_dict(), "args": support}, path)
    Model = rainbow_atari.NoisyDuelingDistributionalNetwork
    assert not load_distributional(str(path), env, Model, "cpu").training  # noisy layers: means only

    def play():
        return evaluate_distributional(
            str(path), rainbow_atari.make_env, BREAKOUT, 1, "ev", Model, epsilon=0.0, capture_video=False
        )

    returns = play()
    assert len(returns) == 1 and returns[0] >= 0
    assert returns == play()  # greedy on the mean network: the same games again
