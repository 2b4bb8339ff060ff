"""c51_atari.py beyond the contract tests: the network, evaluation (its projection: test_c51.py, with c51.py's; its
memory: test_frame_replay.py)."""

import gymnasium as gym
import pytest
import torch

from cleanrl import c51_atari
from cleanrl_utils.runtime.evals.atari import evaluate_distributional

BREAKOUT = "BreakoutNoFrameskip-v4"


def test_network_outputs_distributions_and_their_means():
    env = type("E", (), {"action_space": gym.spaces.Discrete(4)})()
    q = c51_atari.QNetwork(env, n_atoms=11, v_min=-5, v_max=5)
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    pmfs = q.pmfs(frames)
    assert pmfs.shape == (2, 4, 11) and torch.allclose(pmfs.sum(-1), torch.ones(2, 4))
    logits = q.network(frames.float() / 255.0).view(2, 4, 11)  # frames are divided by 255 inside
    assert torch.allclose(pmfs, logits.softmax(-1))
    assert torch.allclose(q.log_pmfs(frames), logits.log_softmax(-1))  # the loss's input, never clamped
    assert torch.allclose(q(frames), (pmfs * torch.linspace(-5, 5, 11)).sum(-1))


def saved_model(path, n_atoms=11) -> str:
    env = c51_atari.make_env(BREAKOUT, 0, False, "unused")()
    torch.manual_seed(0)
    support = {"n_atoms": n_atoms, "v_min": -5.0, "v_max": 5.0}
    torch.save({"model_weights": c51_atari.QNetwork(env, **support).state_dict(), "args": support}, path)
    return str(path)


def test_evaluate_plays_whole_games_on_the_saved_support(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = saved_model(tmp_path / "c51_atari.cleanrl_model")
    returns = evaluate_distributional(
        model, c51_atari.make_env, BREAKOUT, 2, "ev", c51_atari.QNetwork, epsilon=0.05, capture_video=False
    )
    assert len(returns) == 2 and all(r >= 0 for r in returns)


def test_evaluate_rejects_a_bare_state_dict(tmp_path):
    env = c51_atari.make_env(BREAKOUT, 0, False, "unused")()
    path = tmp_path / "bare.cleanrl_model"
    torch.save(c51_atari.QNetwork(env).state_dict(), path)
    with pytest.raises(ValueError, match="is not a distributional Q-network's model"):
        evaluate_distributional(str(path), c51_atari.make_env, BREAKOUT, 1, "ev", c51_atari.QNetwork, capture_video=False)
