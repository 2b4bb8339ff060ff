"""Behaviour of dqn.py that the contract tests do not reach: truncation and evaluation."""

import random

import pytest

from cleanrl import dqn
from cleanrl_utils.evals.dqn_eval import evaluate
from tests.envs import EPISODE_LENGTH
from tests.helpers import run_script, save_untrained_model

FAST_Q_LEARNING = (
    "--total-timesteps", "4000", "--learning-starts", "200", "--train-frequency", "1",
    "--target-network-frequency", "25", "--learning-rate", "0.003", "--batch-size", "64",
)  # fmt: skip


def final_q_value(tmp_path, env_id: str) -> float:
    run = run_script("dqn.py", "--env-id", env_id, *FAST_Q_LEARNING, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.scalars()["losses/q_values"][-1][1]


def test_truncation_bootstraps_and_termination_does_not(tmp_path):
    truncated = final_q_value(tmp_path / "t", "tests.envs:ConstantRewardTruncated-v0")
    terminated = final_q_value(tmp_path / "d", "tests.envs:ConstantRewardTerminated-v0")
    # The stored next state of a cut episode is its real last state, and it is bootstrapped:
    # Q climbs towards 1 / (1 - 0.99) = 100. A real termination caps Q at EPISODE_LENGTH.
    assert terminated < EPISODE_LENGTH + 0.5
    assert truncated > 4 * EPISODE_LENGTH


@pytest.fixture
def untrained_dqn(tmp_path) -> str:
    return save_untrained_model(
        dqn.QNetwork, dqn.make_env("CartPole-v1", 0, False, "unused")(), tmp_path / "dqn.cleanrl_model"
    )


def evaluate_dqn(model_path: str, eval_episodes: int, epsilon: float = 0.05) -> list[float]:
    return evaluate(
        model_path, dqn.make_env, "CartPole-v1", eval_episodes, "ev", dqn.QNetwork, epsilon=epsilon, capture_video=False
    )


def test_evaluate_is_greedy_at_epsilon_zero(untrained_dqn, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    random.seed(0)
    greedy = [evaluate_dqn(untrained_dqn, eval_episodes=2, epsilon=0.0) for _ in range(2)]
    assert greedy[0] == greedy[1] and len(greedy[0]) == 2


def test_evaluate_rejects_non_positive_episode_count(untrained_dqn):
    with pytest.raises(ValueError, match="eval_episodes"):
        evaluate_dqn(untrained_dqn, eval_episodes=0)
