"""Behaviour of pqn.py that the contract tests do not reach: Q(lambda) targets and evaluation (truncation: test_truncation.py)."""

import numpy as np
import pytest

from cleanrl import pqn
from cleanrl_utils.runtime.evals.discrete import evaluate_pqn
from tests.fixtures.q_lambda import lambda_return_by_definition, random_rollout
from tests.helpers import save_untrained_model


def test_q_lambda_returns_match_the_definition():
    steps, envs, gamma, lam = 7, 3, 0.9, 0.65
    rewards, values, next_value = random_rollout(np.random.default_rng(0), steps, envs)
    dones = np.zeros((steps, envs), np.float32)
    dones[2, 0] = dones[5, 0] = dones[6, 1] = 1  # episode ends inside the rollout and at its last step
    returns = pqn.q_lambda_returns(rewards, dones, values, next_value, gamma, lam)
    # no target bootstraps across a done: pqn.py adds a truncated episode's bootstrap to its last reward instead
    # (test_truncation.py)
    no_truncations = np.zeros_like(dones)
    expected = [
        [
            lambda_return_by_definition(rewards, dones, no_truncations, values, next_value, gamma, lam, t, e)
            for e in range(envs)
        ]
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
