"""Behaviour of ppo.py that the contract tests do not reach: truncation, simultaneous episode ends, eval."""

from collections import Counter

import pytest
import torch

from cleanrl import ppo
from cleanrl_utils.runtime.evals.discrete import evaluate_ppo
from tests.fixtures.envs import EPISODE_LENGTH
from tests.helpers import run_in_process, save_untrained_model

# Episodes end together in all 4 sub-envs every EPISODE_LENGTH steps.
FAST_VALUE_LEARNING = ("--num-envs", "4", "--num-steps", "64", "--learning-rate", "0.01", "--no-clip-vloss", "--no-anneal-lr")
# 16 iterations: the truncated value reaches ~43 (~66 after 32), the terminated one stays at ~3
TOTAL_TIMESTEPS = 4096


def trained_value(tmp_path, env_id: str) -> tuple[float, dict]:
    budget = ("--total-timesteps", str(TOTAL_TIMESTEPS), *FAST_VALUE_LEARNING)
    run = run_in_process("ppo.py", "--env-id", env_id, *budget, "--save-model", cwd=tmp_path, timeout_s=300)
    assert run.returncode == 0, run.stderr[-3000:]
    envs = ppo.make_vector_env(env_id, 1, False, "unused")
    agent = ppo.Agent(envs)
    agent.load_state_dict(torch.load(run.run_dir / "ppo.cleanrl_model", weights_only=True))
    obs, _ = envs.reset(seed=0)
    with torch.inference_mode():
        return agent.get_value(torch.as_tensor(obs)).item(), run.scalars()


def test_every_episode_is_logged_with_its_true_return_and_length():
    """Gymnasium's vector RecordEpisodeStatistics under same-step autoreset counts each episode whole.

    CartPole pays 1 per step, so each episode's return equals its length; 1.2 and 1.3 lost each later
    episode's first step (fixed in 1.4.0, the floor in pyproject.toml).
    """
    envs = ppo.make_vector_env("CartPole-v1", 3, False, "unused")
    envs.action_space.seed(0)
    envs.reset(seed=0)
    true_return, true_length = [0.0] * 3, [0] * 3
    logged, expected = [], []
    for _ in range(600):
        _, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
        for i in range(3):
            true_return[i] += float(rewards[i])
            true_length[i] += 1
            if terminations[i] or truncations[i]:
                expected.append((i, true_return[i], true_length[i]))
                true_return[i], true_length[i] = 0.0, 0
        if "episode" in infos:
            for i in infos["_episode"].nonzero()[0]:
                logged.append((int(i), float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])))
    envs.close()
    assert len(expected) > 3 * 5  # several episodes after each sub-env's first
    assert logged == expected


def test_truncation_bootstraps_and_termination_does_not(tmp_path):
    # Same rewards, same episode length; only how the episode ends differs.
    truncated, scalars = trained_value(tmp_path / "t", "tests.fixtures.envs:ConstantRewardTruncated-v0")
    terminated, _ = trained_value(tmp_path / "d", "tests.fixtures.envs:ConstantRewardTerminated-v0")
    # A cut episode goes on in truth: its value heads for 1 / (1 - 0.99) = 100.
    # A terminated one is worth at most EPISODE_LENGTH.
    assert terminated < EPISODE_LENGTH + 0.5
    assert truncated > 4 * EPISODE_LENGTH

    # All four sub-envs end together every 5 steps: every one of those episodes is logged.
    logged = scalars["charts/episodic_return"]
    per_step = Counter(step for step, _ in logged)
    assert set(per_step.values()) == {4}
    assert len(logged) == 4 * (TOTAL_TIMESTEPS // 4 // EPISODE_LENGTH)
    assert {r for _, r in logged} == {float(EPISODE_LENGTH)}


@pytest.mark.parametrize("capture_video", [False, True])
def test_evaluate_loads_model_and_returns_episodes(tmp_path, monkeypatch, capture_video):
    monkeypatch.chdir(tmp_path)
    envs = ppo.make_vector_env("CartPole-v1", 1, False, "unused")
    model_path = save_untrained_model(ppo.Agent, envs, tmp_path / "ppo.cleanrl_model")
    returns = evaluate_ppo(model_path, ppo.make_env, "CartPole-v1", 3, "ev", ppo.Agent, capture_video=capture_video)
    assert len(returns) == 3 and all(r >= 1 for r in returns)
    assert bool(list((tmp_path / "videos" / "ev").glob("*.mp4"))) == capture_video


def test_evaluate_rejects_wrong_model(tmp_path):
    model_path = save_untrained_model(
        ppo.Agent, ppo.make_vector_env("Acrobot-v1", 1, False, "unused"), tmp_path / "acrobot.cleanrl_model"
    )
    with pytest.raises(RuntimeError, match="size mismatch"):
        evaluate_ppo(model_path, ppo.make_env, "CartPole-v1", 1, "ev", ppo.Agent, capture_video=False)
