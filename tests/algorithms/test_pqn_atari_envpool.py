"""Behaviour of pqn_atari_envpool.py and pqn_atari_envpool_lstm.py that the contract tests do not reach:
Q(lambda) targets around envpool's episode ends, the LSTM memory resets, the missing-envpool error.
(Their episode statistics: tests/algorithms/test_envpool_episode_statistics.py.)"""

import numpy as np
import pytest
import torch

pytest.importorskip("envpool")

from cleanrl import pqn_atari_envpool, pqn_atari_envpool_lstm  # noqa: E402
from tests.fixtures.q_lambda import lambda_return_by_definition, random_rollout  # noqa: E402

MODULES = [pqn_atari_envpool, pqn_atari_envpool_lstm]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.split(".")[-1])
def test_q_lambda_targets_by_hand(module):
    """gamma = lambda = 0.5 over 5 steps; values[t] = 10 (t + 1), 60 after the rollout.

    envpool returns an episode's last observation at its ending step and resets on the next step, so
    values[t + 1] after an end is the value of the last state: a truncation bootstraps on it alone, a
    termination on nothing, and neither mixes in the reset step's own target.
    """
    rewards = np.array([[1, 1, 1], [2, 1, 1], [3, 1, 1], [4, 1, 1], [5, 1, 1]], np.float32)
    terminations = np.zeros((5, 3), np.float32)
    truncations = np.zeros((5, 3), np.float32)
    terminations[1, 0] = 1  # env 0: a life lost at step 1 (step 2 is the reset)
    truncations[2, 1] = 1  # env 1: the time limit at step 2 (step 3 is the reset)
    terminations[4, 2] = truncations[4, 2] = 1  # env 2: both at the last step: a termination
    values = np.tile(np.array([10, 20, 30, 40, 50], np.float32)[:, None], (1, 3))
    next_value = np.full(3, 60, np.float32)
    returns = module.q_lambda_returns(rewards, terminations, truncations, values, next_value, 0.5, 0.5)
    expected = [
        # env 0: 35 = 5 + 60/2; 25.25 = 4 + (35 + 50)/4; 19.3125 = 3 + (25.25 + 40)/4; 2 (terminal); 6.5 = 1 + (2 + 20)/4
        [6.5, 2.0, 19.3125, 25.25, 35.0],
        # env 1: 31; 21.25 = 1 + (31 + 50)/4; 21 = 1 + 40/2 (truncated); 13.75 = 1 + (21 + 30)/4; 9.4375 = 1 + (13.75 + 20)/4
        [9.4375, 13.75, 21.0, 21.25, 31.0],
        # env 2: 1 (terminal); 13.75 = 1 + (1 + 50)/4; 14.4375 = 1 + (13.75 + 40)/4; 12.109375; 9.02734375
        [9.02734375, 12.109375, 14.4375, 13.75, 1.0],
    ]
    np.testing.assert_allclose(returns.T, expected)


def test_q_lambda_targets_match_the_definition_on_random_rollouts():
    rng = np.random.default_rng(0)
    steps, envs, gamma, lam = 9, 6, 0.9, 0.65
    rewards, values, next_value = random_rollout(rng, steps, envs)
    ends = rng.random((steps, envs)) < 0.25
    terminations = (ends & (rng.random((steps, envs)) < 0.5)).astype(np.float32)
    truncations = (ends & (terminations == 0)).astype(np.float32)
    returns = pqn_atari_envpool.q_lambda_returns(rewards, terminations, truncations, values, next_value, gamma, lam)
    for t in range(steps):
        for e in range(envs):
            if t > 0 and (terminations[t - 1, e] or truncations[t - 1, e]):
                continue  # the reset step: its target is never learned from
            want = lambda_return_by_definition(rewards, terminations, truncations, values, next_value, gamma, lam, t, e)
            assert returns[t, e] == pytest.approx(want, rel=1e-5, abs=1e-5), (t, e)
    assert terminations.any() and truncations.any()


@pytest.fixture(scope="module")
def lstm_net():
    import envpool

    envs = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=1, stack_num=1)
    torch.manual_seed(0)
    net = pqn_atari_envpool_lstm.QNetwork(envs)
    envs.close()
    return net


def frames(steps, num_envs, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (steps * num_envs, 1, 84, 84), generator=g, dtype=torch.uint8)


def random_state(net, num_envs, seed=1):
    g = torch.Generator().manual_seed(seed)
    h, c = net.initial_state(num_envs)
    return torch.randn(h.shape, generator=g), torch.randn(c.shape, generator=g)


def test_lstm_memory_is_zeroed_at_an_episode_start_only(lstm_net):
    """Env 0 starts an episode at step 2: from there its Q-values are those of a fresh episode; env 1's are not touched."""
    steps, num_envs = 5, 2
    x = frames(steps, num_envs)
    state = random_state(lstm_net, num_envs)
    starts = torch.zeros(steps, num_envs)
    starts[2, 0] = 1
    with torch.no_grad():
        q, _ = lstm_net(x, state, starts.reshape(-1))
        q = q.reshape(steps, num_envs, -1)
        q_no_reset, _ = lstm_net(x, state, torch.zeros(steps * num_envs))
        q_no_reset = q_no_reset.reshape(steps, num_envs, -1)
        env0 = x.reshape(steps, num_envs, 1, 84, 84)[2:, 0]
        q_fresh, _ = lstm_net(env0, lstm_net.initial_state(1), torch.zeros(steps - 2))
    torch.testing.assert_close(q[2:, 0], q_fresh)
    torch.testing.assert_close(q[:2], q_no_reset[:2])  # before the start: the carried memory
    torch.testing.assert_close(q[:, 1], q_no_reset[:, 1])  # the other env keeps its memory
    assert not torch.allclose(q[2:, 0], q_no_reset[2:, 0])  # the memory matters, so the reset does too


def test_lstm_replay_of_a_rollout_matches_acting_step_by_step(lstm_net):
    """The update replays each env's sequence from the rollout's first state: it must see what acting saw."""
    steps, num_envs = 6, 3
    x = frames(steps, num_envs, seed=2).reshape(steps, num_envs, 1, 84, 84)
    starts = torch.zeros(steps, num_envs)
    starts[1, 2] = starts[4, 0] = 1
    first_state = random_state(lstm_net, num_envs, seed=3)
    state, acted = first_state, []
    with torch.no_grad():
        for t in range(steps):
            q, state = lstm_net(x[t], state, starts[t])
            acted.append(q)
        replayed, last_state = lstm_net(x.reshape(-1, 1, 84, 84), first_state, starts.reshape(-1))
        # a minibatch of whole envs (1 and 2) replays from those envs' columns of the first state
        envs_12 = torch.tensor([1, 2])
        part, _ = lstm_net(
            x[:, envs_12].reshape(-1, 1, 84, 84),
            (first_state[0][:, envs_12], first_state[1][:, envs_12]),
            starts[:, envs_12].reshape(-1),
        )
    torch.testing.assert_close(replayed, torch.cat(acted))
    torch.testing.assert_close(last_state, state)
    torch.testing.assert_close(part.reshape(steps, 2, -1), torch.stack(acted)[:, 1:])


@pytest.mark.extended  # 17 s of one core: CI runs it after the quick run
def test_lstm_run_resumes_the_learner_and_plays_new_games(tmp_path):
    """envpool cannot save its games: a resumed pqn_atari_envpool_lstm.py run restores the Q-network, the optimiser,
    the step count and the random generators, and starts new games (and new memories) from other env seeds.

    4 iterations of 4 envs x 32 steps, a checkpoint every 2; resumed twice from its first checkpoint (step 256),
    each time from a copy of the run folder.
    """
    import shutil

    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.tensorboard_reader import read_scalars
    from tests.helpers import run_in_process

    args = ("--num-envs", "4", "--num-steps", "32", "--total-timesteps", "512", "--update-epochs", "1")
    first = run_in_process("pqn_atari_envpool_lstm.py", *args, "--checkpoint-frequency", "2", cwd=tmp_path / "first")
    assert first.returncode == 0, first.stderr[-3000:]
    assert [p.name for p in ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)] == [
        "checkpoint_256.pt",
        "checkpoint_512.pt",
    ]

    logs = []
    for copy in ("a", "b"):
        shutil.copytree(tmp_path / "first", tmp_path / copy)
        run_dir = tmp_path / copy / "runs" / first.run_dir.name
        resumed = run_in_process(
            "pqn_atari_envpool_lstm.py", "--resume", str(run_dir / "checkpoints" / "checkpoint_256.pt"), cwd=tmp_path / copy
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        logs.append({tag: series for tag, series in read_scalars(run_dir).items() if tag != "charts/SPS"})
        # the optimiser went on from its state: 4 iterations x 1 epoch x 4 minibatches (one env each) of RAdam steps
        state = ckpt.read(run_dir / "checkpoints" / "checkpoint_512.pt")
        assert {float(param["step"]) for param in state["optimizer"]["state"].values()} == {16.0}
    assert logs[0] == logs[1], "resuming the same checkpoint twice gives the same run"

    uninterrupted = {tag: series for tag, series in read_scalars(first.run_dir).items() if tag != "charts/SPS"}
    resumed_logs = logs[0]
    assert {tag: [(s, v) for s, v in series if s <= 256] for tag, series in resumed_logs.items()} == {
        tag: [(s, v) for s, v in series if s <= 256] for tag, series in uninterrupted.items()
    }, "what was logged up to the checkpoint stays"
    assert [s for s, _ in resumed_logs["losses/td_loss"]] == [128, 256, 384, 512], "it trained to the end"
    # the same learner state at step 256, but new games: the Q-values it acts on differ from the uninterrupted run's
    assert resumed_logs["losses/q_values"][2:] != uninterrupted["losses/q_values"][2:]
