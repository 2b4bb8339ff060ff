"""Behaviour of c51.py that the contract tests do not reach: the projection (also c51_atari.py's) and evaluation
(truncation: test_truncation.py)."""

import pytest
import torch

from cleanrl import c51, c51_atari
from cleanrl_utils.runtime.evals.discrete import evaluate_c51

# the same categorical projection, in both torch C51 scripts
PROJECTIONS = pytest.mark.parametrize("project", [c51.project, c51_atari.project], ids=["c51", "c51_atari"])


@PROJECTIONS
@pytest.mark.parametrize(
    ("atoms", "next_atoms", "next_pmfs", "expected"),
    [
        pytest.param(  # 7 and -3 lie outside: clamped to the ends
            [0.0, 1.0, 2.0], [[0.5, 2.0, 7.0], [-3.0, 1.0, 1.25]], [[0.2, 0.3, 0.5], [0.4, 0.4, 0.2]],
            [[0.1, 0.1, 0.8], [0.4, 0.55, 0.05]], id="clamped",
        ),
        # r + gamma * z for r = 0.5, gamma = 0.5, and a termination (all of it at r = -0.25): 0.5 splits half and
        # half between atoms 0 and 1; -0.25 goes 1/4 to -1 and 3/4 to 0
        pytest.param(
            [-1.0, 0.0, 1.0], [[0.0, 0.5, 1.0], [-0.25, -0.25, -0.25]], [[0.2, 0.6, 0.2], [0.5, 0.3, 0.2]],
            [[0.0, 0.5, 0.5], [0.25, 0.75, 0.0]], id="terminal",
        ),
    ],
)  # fmt: skip
def test_projection_splits_mass_between_neighbouring_atoms(project, atoms, next_atoms, next_pmfs, expected):
    got = project(torch.tensor(next_atoms), torch.tensor(next_pmfs), torch.tensor(atoms))
    assert torch.allclose(got, torch.tensor(expected))


@PROJECTIONS
def test_projection_conserves_mass_and_mean_and_clamps_to_the_support(project):
    torch.manual_seed(0)
    atoms = torch.linspace(-10, 10, 51)
    next_pmfs = torch.rand(64, 51).softmax(-1)
    rewards = torch.rand(64, 1) * 0.2 - 0.1  # r + 0.99 z stays inside [-10, 10]
    done = (torch.rand(64, 1) < 0.3).float()
    target = project(rewards + 0.99 * atoms * (1 - done), next_pmfs, atoms)
    assert (target >= 0).all() and torch.allclose(target.sum(-1), torch.ones(64))
    # splitting each mass linearly between two neighbours keeps the mean: r + gamma * E[z] (r alone when done)
    expected_mean = rewards + 0.99 * (next_pmfs * atoms).sum(-1, keepdim=True) * (1 - done)
    assert torch.allclose((target * atoms).sum(-1, keepdim=True), expected_mean, atol=1e-4)
    # mass beyond v_max lands on the last atom
    edge = project(torch.full((1, 51), 25.0), next_pmfs[:1], atoms)
    assert edge[0, -1].item() == pytest.approx(1.0)


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
