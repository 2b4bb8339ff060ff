"""Behaviour of pqn.py that the contract tests do not reach: Q(lambda) targets and evaluation (truncation: test_truncation.py)."""

import numpy as np
import pytest

from cleanrl import pqn
from cleanrl_utils.evals.discrete import evaluate_pqn
from tests.helpers import save_untrained_model


def lambda_return_by_definition(rewards, dones, values, next_value, gamma, lam, t, env):
    """G_t = sum over n of (1 - lam) lam^(n-1) G_t^(n), with n-step returns truncated at the rollout's end or an episode end."""
    horizon = len(rewards)
    values_after = [values[k + 1, env] if k + 1 < horizon else next_value[env] for k in range(horizon)]

    def n_step(n):
        total, discount = 0.0, 1.0
        for k in range(t, t + n):
            total += discount * rewards[k, env]
            discount *= gamma
            if dones[k, env]:
                return total
        return total + discount * values_after[t + n - 1]

    steps_left = horizon - t
    for k in range(t, horizon):  # an episode end before the rollout's end stops the sum there
        if dones[k, env]:
            steps_left = k - t + 1
            break
    weighted = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, steps_left))
    return weighted + lam ** (steps_left - 1) * n_step(steps_left)


def test_q_lambda_returns_match_the_definition():
    rng = np.random.default_rng(0)
    steps, envs, gamma, lam = 7, 3, 0.9, 0.65
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    next_value = rng.normal(size=envs).astype(np.float32)
    dones = np.zeros((steps, envs), np.float32)
    dones[2, 0] = dones[5, 0] = dones[6, 1] = 1  # episode ends inside the rollout and at its last step
    returns = pqn.q_lambda_returns(rewards, dones, values, next_value, gamma, lam)
    expected = [
        [lambda_return_by_definition(rewards, dones, values, next_value, gamma, lam, t, e) for e in range(envs)]
        for t in range(steps)
    ]
    np.testing.assert_allclose(returns, expected, rtol=1e-5)


@pytest.fixture
def untrained_pqn(tmp_path) -> str:
    envs = pqn.make_vector_env("CartPole-v1", 1, False, "unused")
    return save_untrained_model(pqn.QNetwork, envs, tmp_path / "pqn.cleanrl_model")


# the case with videos (6 s of one core) is `extended`: CI runs it after the quick run
@pytest.mark.parametrize("capture_video", [False, pytest.param(True, marks=pytest.mark.extended)])
def test_evaluate_is_greedy_at_epsilon_zero(untrained_pqn, tmp_path, monkeypatch, capture_video):
    monkeypatch.chdir(tmp_path)
    runs = [
        evaluate_pqn(
            untrained_pqn, pqn.make_env, "CartPole-v1", 2, "ev", pqn.QNetwork, epsilon=0.0, capture_video=capture_video
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and len(runs[0]) == 2
    assert bool(list((tmp_path / "videos" / "ev").glob("*.mp4"))) == capture_video
