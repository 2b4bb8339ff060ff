"""Behaviour of dqn.py that the contract tests do not reach: evaluation (truncation: test_truncation.py)."""

import random

import pytest

from cleanrl import dqn
from cleanrl_utils.runtime.evals.discrete import evaluate_dqn
from tests.helpers import save_untrained_model


@pytest.fixture
def untrained_dqn(tmp_path) -> str:
    return save_untrained_model(
        dqn.QNetwork, dqn.make_env("CartPole-v1", 0, False, "unused")(), tmp_path / "dqn.cleanrl_model"
    )


def play(model_path: str, eval_episodes: int, epsilon: float = 0.05) -> list[float]:
    return evaluate_dqn(
        model_path, dqn.make_env, "CartPole-v1", eval_episodes, "ev", dqn.QNetwork, epsilon=epsilon, capture_video=False
    )


def test_evaluate_is_greedy_at_epsilon_zero(untrained_dqn, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    random.seed(0)
    greedy = [play(untrained_dqn, eval_episodes=2, epsilon=0.0) for _ in range(2)]
    assert greedy[0] == greedy[1] and len(greedy[0]) == 2


def test_evaluate_rejects_non_positive_episode_count(untrained_dqn):
    with pytest.raises(ValueError, match="eval_episodes"):
        play(untrained_dqn, eval_episodes=0)
