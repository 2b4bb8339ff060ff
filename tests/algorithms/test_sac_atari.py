"""sac_atari.py beyond the contract tests: the discrete policy's math, the temperature, evaluation."""

import functools
import math

import gymnasium as gym
import pytest
import torch
from torch.distributions import Categorical

from cleanrl import sac_atari
from cleanrl_utils.runtime.evals.atari import evaluate_sac
from tests.helpers import run_script

N_ACTIONS = 6
FAKE_ENV = type("E", (), {"action_space": gym.spaces.Discrete(N_ACTIONS)})()


def frames(batch: int = 5) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)


def test_policy_probabilities_log_probabilities_and_samples_agree():
    torch.manual_seed(1)
    actor = sac_atari.Actor(FAKE_ENV)
    obs = frames()
    action, log_probs, probs = actor.get_action(obs)
    logits = actor(obs)
    assert action.shape == (5,) and log_probs.shape == probs.shape == (5, N_ACTIONS)
    torch.testing.assert_close(probs.sum(1), torch.ones(5))
    torch.testing.assert_close(log_probs, torch.log_softmax(logits, 1))
    torch.testing.assert_close(probs, torch.softmax(logits, 1))
    # the entropy the losses work with, -sum p log p, is the distribution's
    torch.testing.assert_close(-(probs * log_probs).sum(1), Categorical(logits=logits).entropy())
    # sampled actions follow the probabilities (the network's logits fixed, to sample many at once)
    actor.forward = lambda x: logits[:1].detach().expand(len(x), -1)
    sampled, _, _ = actor.get_action(torch.zeros(20000))
    frequencies = torch.bincount(sampled, minlength=N_ACTIONS) / 20000
    torch.testing.assert_close(frequencies, probs[0].detach(), atol=0.015, rtol=0)


def test_networks_divide_frames_by_255_and_start_with_zero_biases():
    actor, qf = sac_atari.Actor(FAKE_ENV), sac_atari.SoftQNetwork(FAKE_ENV)
    obs = frames(2)
    for net, head in ((actor, actor.fc_logits), (qf, qf.fc_q)):
        x = torch.relu(net.fc1(torch.relu(net.conv(obs.float() / 255.0))))
        torch.testing.assert_close(net(obs), head(x))
        assert all(
            layer.bias.abs().sum() == 0 for layer in net.modules() if isinstance(layer, (torch.nn.Conv2d, torch.nn.Linear))
        )
    assert qf(obs).shape == (2, N_ACTIONS)


def test_actor_loss_favours_the_best_action_and_alpha_spreads_it():
    q_values = torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0, 0.0]])

    def train(alpha: float) -> torch.Tensor:
        logits = torch.zeros(1, N_ACTIONS, requires_grad=True)
        optimizer = torch.optim.Adam([logits], lr=0.05)
        for _ in range(200):
            log_probs = torch.log_softmax(logits, 1)
            loss = sac_atari.actor_loss_fn(log_probs.exp(), log_probs, q_values, torch.tensor(alpha))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return torch.softmax(logits, 1).detach()[0]

    greedy, soft = train(0.01), train(1.0)
    assert greedy[1] > 0.95  # a small alpha: nearly all on the action worth the most
    # a large alpha: the soft-greedy policy exp(Q / alpha) / Z, one action e times as likely as each other
    torch.testing.assert_close(soft, torch.softmax(q_values[0] / 1.0, 0), atol=0.01, rtol=0)


@pytest.mark.parametrize(
    ("logits", "direction"),
    [(torch.zeros(8, N_ACTIONS), -1), (torch.tensor([[8.0, 0, 0, 0, 0, 0]]).repeat(8, 1), +1)],
    ids=["uniform policy: entropy above the target, alpha falls", "peaked policy: entropy below the target, alpha rises"],
)
def test_autotune_moves_alpha_toward_the_target_entropy(logits, direction):
    target_entropy = 0.89 * math.log(N_ACTIONS)
    log_probs = torch.log_softmax(logits, 1)
    entropy = -(log_probs.exp() * log_probs).sum(1).mean().item()
    assert (entropy - target_entropy) * direction < 0
    log_alpha = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([log_alpha], lr=3e-4, eps=1e-4)
    for _ in range(3):
        loss = sac_atari.temperature_loss(log_alpha, log_probs.exp(), log_probs, target_entropy)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert log_alpha.item() * direction == pytest.approx(3 * 3e-4, rel=0.01)  # Adam: lr per step, in the right way


@pytest.mark.extended  # 14 s of one core: CI runs it after the quick run
def test_no_autotune_keeps_alpha_fixed(tmp_path):
    run = run_script(
        "sac_atari.py",
        *("--env-id", "BreakoutNoFrameskip-v4", "--buffer-size", "1000", "--learning-starts", "100"),
        *("--total-timesteps", "320", "--batch-size", "8", "--no-autotune", "--alpha", "0.3"),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    assert [round(value, 6) for _, value in scalars["losses/alpha"]] == [0.3, 0.3]  # at steps 200 and 300
    assert "losses/alpha_loss" not in scalars
    assert all(math.isfinite(value) for _, value in scalars["losses/actor_loss"] + scalars["losses/qf_loss"])
    assert "|autotune|False|" in run.texts()["hyperparameters"]


def test_evaluate_plays_whole_games_sampled_or_greedy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = sac_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    torch.manual_seed(0)
    torch.save({"actor": sac_atari.Actor(env).state_dict()}, tmp_path / "sac_atari.cleanrl_model")
    env.close()
    play = functools.partial(
        evaluate_sac, "sac_atari.cleanrl_model", sac_atari.make_env, "BreakoutNoFrameskip-v4", 1, "ev", sac_atari.Actor
    )
    sampled = play(capture_video=False)
    assert len(sampled) == 1 and sampled[0] >= 0
    assert play(capture_video=False) == sampled  # the sampled actions are seeded
    assert len(play(capture_video=False, deterministic=True)) == 1


def test_evaluate_refuses_a_file_without_actor_weights(tmp_path):
    torch.save({"q_network": {}}, tmp_path / "other.cleanrl_model")
    with pytest.raises(ValueError, match="holds no actor weights"):
        evaluate_sac(
            str(tmp_path / "other.cleanrl_model"),
            sac_atari.make_env,
            "BreakoutNoFrameskip-v4",
            1,
            "ev",
            sac_atari.Actor,
            capture_video=False,
        )
