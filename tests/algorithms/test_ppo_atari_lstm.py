"""ppo_atari_lstm.py beyond the contract tests: state resets at episode starts, replaying whole-env
minibatches from the rollout's initial state, and the evaluator that carries the memory."""

import math
from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch

from cleanrl import ppo_atari_lstm
from cleanrl_utils.runtime.evals.atari import evaluate_ppo_lstm
from tests.helpers import run_script, save_untrained_model


def make_agent(seed: int = 0) -> ppo_atari_lstm.Agent:
    torch.manual_seed(seed)
    return ppo_atari_lstm.Agent(SimpleNamespace(single_action_space=gym.spaces.Discrete(4)))  # Breakout's 4 actions


def random_state(num_envs: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(1, num_envs, 128), torch.randn(1, num_envs, 128)


def frames(steps: int, num_envs: int) -> torch.Tensor:
    return torch.randint(0, 256, (steps, num_envs, 1, 84, 84), dtype=torch.uint8)


def test_env_gives_single_frames():
    envs = ppo_atari_lstm.make_vector_env("BreakoutNoFrameskip-v4", 2, False, "unused")
    obs, _ = envs.reset(seed=0)
    envs.close()
    assert obs.shape == (2, 1, 84, 84)


@torch.no_grad()
def test_state_is_zeroed_exactly_where_an_episode_starts():
    agent = make_agent()

    def outputs(x, state, starts):  # LSTM outputs as (steps, envs, 128)
        out, _ = agent.get_states(x.reshape(-1, 1, 84, 84), state, starts)
        return out.reshape(x.shape[0], x.shape[1], -1)

    x, state = frames(3, 3), random_state(3)
    starts = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # env 0 restarts at step 1, env 2 at step 2
    out = outputs(x, state, starts)
    kept = outputs(x, state, torch.zeros(3, 3))
    # before its start an env keeps its memory (env 1 never restarts) ...
    assert (
        torch.allclose(out[0], kept[0]) and torch.allclose(out[:, 1], kept[:, 1]) and torch.allclose(out[:2, 2], kept[:2, 2])
    )
    assert not torch.allclose(out[1, 0], kept[1, 0], atol=1e-3)
    # ... and from its start on it behaves as an env that began from zeros there
    zeros = agent.initial_state(1)
    assert torch.allclose(out[1:, 0], outputs(x[1:, :1], zeros, torch.zeros(2, 1))[:, 0], atol=1e-6)
    assert torch.allclose(out[2:, 2], outputs(x[2:, 2:], zeros, torch.zeros(1, 1))[:, 0], atol=1e-6)


@torch.no_grad()
def test_minibatch_of_envs_replays_the_rollout_from_its_initial_state():
    """The update's reconstruction gives the rollout's log-probabilities and values: ratio 1 before any step."""
    agent = make_agent()
    num_steps, num_envs = 16, 4
    obs = frames(num_steps, num_envs)
    starts = (torch.rand(num_steps, num_envs) < 0.2).float()
    initial = random_state(num_envs)  # mid-training, the rollout starts from a carried, non-zero memory
    state, logprobs, values, actions = initial, [], [], []
    for t in range(num_steps):  # as in the rollout: one step of all envs at a time
        action, logprob, value, state = agent.act(obs[t], state, starts[t])
        actions.append(action), logprobs.append(logprob), values.append(value)
    logprobs, values, actions = torch.stack(logprobs), torch.stack(values), torch.stack(actions)

    # as in the update: a minibatch is a set of whole envs, indexed step-major in the flat batch
    flat_inds = torch.arange(num_steps * num_envs).reshape(num_steps, num_envs)
    mb_envs = torch.tensor([3, 1])
    mb_inds = flat_inds[:, mb_envs].reshape(-1)
    b_obs, b_starts, b_actions = obs.reshape(-1, 1, 84, 84), starts.reshape(-1), actions.reshape(-1)
    mb_initial = (initial[0][:, mb_envs], initial[1][:, mb_envs])
    newlogprob, entropy, newvalue = agent.evaluate_actions(b_obs[mb_inds], mb_initial, b_starts[mb_inds], b_actions[mb_inds])
    assert torch.allclose(newlogprob, logprobs.reshape(-1)[mb_inds], atol=1e-6)
    assert torch.allclose(newvalue, values.reshape(-1)[mb_inds], atol=1e-5)
    assert (entropy > 0).all()

    # replaying from zeros instead of the saved state would not reproduce the rollout
    _, _, zero_value = agent.evaluate_actions(b_obs[mb_inds], agent.initial_state(2), b_starts[mb_inds], b_actions[mb_inds])
    assert not torch.allclose(zero_value, values.reshape(-1)[mb_inds], atol=1e-3)


@pytest.mark.extended  # 9 s of one core: CI runs it after the quick run
def test_first_minibatch_of_each_update_has_ratio_one(tmp_path):
    """End to end: with one minibatch and one epoch the logged statistics are those of the first minibatch,
    replayed from the saved initial state before any gradient step. With a clip range of 1e-5 any replay
    that strays from the rollout shows up in clipfrac (replaying from zeros: ~13% of the samples). On the CPU:
    GPUs' TF32 convolutions round differently for the rollout's and the update's batch sizes."""
    args = ("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--num-minibatches", "1")
    run = run_script("ppo_atari_lstm.py", *args, "--update-epochs", "1", "--clip-coef", "1e-5", "--no-cuda", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    assert [step for step, _ in scalars["losses/clipfrac"]] == [128, 256]  # the second starts from carried memory
    assert all(frac == 0 for _, frac in scalars["losses/clipfrac"])
    assert all(abs(kl) < 1e-6 for _, kl in scalars["losses/old_approx_kl"] + scalars["losses/approx_kl"])


@pytest.mark.extended  # 14 s of one core: CI runs it after the quick run
def test_resumed_run_logs_what_the_uninterrupted_run_logged(tmp_path):
    """A checkpoint holds each env's memory (h, c) and episode-start flags beside the emulators: resumed from the
    older checkpoint the run kept, a copy of the run folder logs the same scalars as the run itself, step for step.
    6 iterations of 2 envs x 32 steps, a checkpoint every 2 (in this process: the same computation)."""
    import shutil

    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.tensorboard_reader import read_scalars
    from tests.helpers import run_in_process

    args = ("--num-envs", "2", "--num-steps", "32", "--total-timesteps", "384", "--num-minibatches", "2", "--no-cuda")
    whole = run_in_process("ppo_atari_lstm.py", *args, "--checkpoint-frequency", "2", cwd=tmp_path / "whole", timeout_s=300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    first = ckpt.checkpoints(whole.run_dir / ckpt.CHECKPOINT_DIR)[0]  # the older of the two kept: after 4 iterations
    assert first.name == "checkpoint_256.pt"
    shutil.copytree(tmp_path / "whole", tmp_path / "copy")
    run_dir = tmp_path / "copy" / "runs" / whole.run_dir.name
    resumed = run_in_process(
        "ppo_atari_lstm.py", "--resume", str(run_dir / ckpt.CHECKPOINT_DIR / first.name), cwd=tmp_path / "copy", timeout_s=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    expected, got = ({t: v for t, v in read_scalars(d).items() if t != "charts/SPS"} for d in (whole.run_dir, run_dir))
    assert got == expected and max(step for step, _ in got["losses/value_loss"]) == 384


class RecordingAgent(ppo_atari_lstm.Agent):
    """The script's Agent, noting what each acting step receives and returns."""

    calls: list = []

    def act(self, x, lstm_state, starts):
        out = super().act(x, lstm_state, starts)
        RecordingAgent.calls.append((lstm_state, starts.clone(), out[3]))
        return out


def test_evaluate_carries_the_memory_and_resets_it_after_each_lost_life(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    envs = ppo_atari_lstm.make_vector_env("BreakoutNoFrameskip-v4", 1, False, "unused")
    model_path = save_untrained_model(ppo_atari_lstm.Agent, envs, tmp_path / "ppo_atari_lstm.cleanrl_model")
    envs.close()
    RecordingAgent.calls = []
    returns = evaluate_ppo_lstm(
        model_path, ppo_atari_lstm.make_env, "BreakoutNoFrameskip-v4", 2, "ev", RecordingAgent, capture_video=False
    )
    assert len(returns) == 2 and all(r >= 0 and math.isfinite(r) for r in returns)
    calls = RecordingAgent.calls
    assert not calls[0][0][0].any() and calls[0][1].item() == 0  # the first game starts from zeros
    for (_, _, state_out), (state_in, _, _) in zip(calls, calls[1:]):
        assert torch.equal(state_in[0], state_out[0]) and torch.equal(state_in[1], state_out[1])  # carried over
    # Breakout: 5 lives a game, each loss ends an episode; the 10th end (game over) is the last step played
    assert sum(start.item() for _, start, _ in calls) == 2 * 5 - 1
