"""Behaviour of c51.py that the contract tests do not reach: the projection and evaluation (truncation: test_truncation.py)."""

import pytest
import torch

from cleanrl import c51
from cleanrl_utils.evals.discrete import evaluate_c51


def test_projection_splits_mass_between_neighbouring_atoms():
    atoms = torch.tensor([0.0, 1.0, 2.0])
    next_atoms = torch.tensor([[0.5, 2.0, 7.0], [-3.0, 1.0, 1.25]])  # 7 and -3 lie outside: clamped to the ends
    next_pmfs = torch.tensor([[0.2, 0.3, 0.5], [0.4, 0.4, 0.2]])
    expected = torch.tensor([[0.1, 0.1, 0.8], [0.4, 0.55, 0.05]])
    assert torch.allclose(c51.project(next_atoms, next_pmfs, atoms), expected)


def test_projection_keeps_total_mass_and_mean():
    torch.manual_seed(0)
    atoms = torch.linspace(-10, 10, 51)
    next_pmfs = torch.rand(32, 51).softmax(-1)
    next_atoms = torch.rand(32, 1) * 0.9 + 0.9 * atoms  # r + gamma * z with r in [0, 0.9): inside the support
    target = c51.project(next_atoms, next_pmfs, atoms)
    assert torch.allclose(target.sum(-1), torch.ones(32))
    # splitting each mass linearly between two neighbours keeps the distribution's mean
    assert torch.allclose((target * atoms).sum(-1), (next_pmfs * next_atoms).sum(-1), atol=1e-4)


@pytest.fixture
def saved_c51(tmp_path) -> str:
    env = c51.make_env("CartPole-v1", 0, False, "unused")()
    torch.manual_seed(0)
    model = c51.QNetwork(env, n_atoms=11, v_min=-5, v_max=5)
    path = tmp_path / "c51.cleanrl_model"
    torch.save({"model_weights": model.state_dict(), "args": {"n_atoms": 11, "v_min": -5, "v_max": 5}}, path)
    return str(path)


def test_evaluate_rebuilds_the_support_from_the_saved_args(saved_c51, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    returns = evaluate_c51(saved_c51, c51.make_env, "CartPole-v1", 3, "ev", c51.QNetwork, epsilon=0.0, capture_video=False)
    again = evaluate_c51(saved_c51, c51.make_env, "CartPole-v1", 3, "ev", c51.QNetwork, epsilon=0.0, capture_video=False)
    assert len(returns) == 3 and returns == again


def test_evaluate_rejects_a_bare_state_dict(tmp_path):
    env = c51.make_env("CartPole-v1", 0, False, "unused")()
    path = tmp_path / "bare.cleanrl_model"
    torch.save(c51.QNetwork(env).state_dict(), path)
    with pytest.raises(ValueError, match="is not a distributional Q-network's model"):
        evaluate_c51(str(path), c51.make_env, "CartPole-v1", 1, "ev", c51.QNetwork, capture_video=False)
