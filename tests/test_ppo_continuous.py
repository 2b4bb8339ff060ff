"""ppo_continuous_action.py / rpo_continuous_action.py: the saved model carries the observation statistics,
and the evaluator acts with them exactly as the trained agent does; logged returns are the env's own."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl_utils.evals.ppo_continuous_eval import evaluate, load_model
from tests.helpers import run_script

SMOKE = ("--env-id", "Pendulum-v1", "--total-timesteps", "2048", "--num-steps", "256", "--save-model")


@pytest.fixture(scope="module", params=["ppo_continuous_action", "rpo_continuous_action"])
def trained(request, tmp_path_factory):
    """(algorithm module, saved model path, run) of one short Pendulum run with --save-model."""
    import importlib

    cwd = tmp_path_factory.mktemp(request.param)
    run = run_script(f"{request.param}.py", *SMOKE, cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    return importlib.import_module(f"cleanrl.{request.param}"), run.run_dir / f"{request.param}.cleanrl_model", run


def test_saved_model_holds_the_observation_statistics(trained):
    module, model_path, _ = trained
    saved = load_model(str(model_path))
    rms = saved["obs_rms"]
    assert rms["mean"].shape == rms["var"].shape == (3,)  # Pendulum: cos, sin, angular velocity
    assert rms["count"] > 2048  # updated on every observation of training (plus the initial epsilon)
    assert not torch.allclose(rms["mean"], torch.zeros(3)) and not torch.allclose(rms["var"], torch.ones(3))
    envs = gym.vector.SyncVectorEnv([module.make_env("Pendulum-v1", 0, False, "unused")])
    module.Agent(envs).load_state_dict(saved["agent"])  # the weights fit the script's own network


def test_evaluation_acts_as_the_agent_with_the_saved_statistics(trained):
    """The evaluator's episodes equal a hand-written loop: raw env, training statistics, the agent's mean action."""
    module, model_path, _ = trained
    returns = evaluate(str(model_path), module.make_env, "Pendulum-v1", 2, "unused", module.Agent,
                       capture_video=False, seed=3, deterministic=True)  # fmt: skip

    saved = load_model(str(model_path))
    mean, var = saved["obs_rms"]["mean"].numpy(), saved["obs_rms"]["var"].numpy()
    env = gym.make("Pendulum-v1")
    agent = module.Agent(gym.vector.SyncVectorEnv([module.make_env("Pendulum-v1", 0, False, "unused")]))
    agent.load_state_dict(saved["agent"])
    expected, obs = [], env.reset(seed=3)[0]
    for _ in range(2):
        total, done = 0.0, False
        while not done:
            seen = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
            with torch.no_grad():
                action = agent.actor_mean(torch.as_tensor(seen)).numpy()
            obs, reward, terminated, truncated, _ = env.step(np.clip(action, -2.0, 2.0))
            total += float(reward)
            done = terminated or truncated
        expected.append(total)
        obs = env.reset()[0]
    assert returns == pytest.approx(expected, rel=1e-6)


def test_logged_returns_are_the_environments_own(trained):
    """Pendulum pays between -16.3 and 0 per step; the scaled and clipped rewards would sum to far less in size."""
    _, _, run = trained
    returns = [r for _, r in run.scalars()["charts/episodic_return"]]
    assert len(returns) == 10
    assert all(-16.3 * 200 <= r <= 0 for r in returns)
    assert min(returns) < -200  # an untrained Pendulum policy loses hundreds; normalised rewards are O(1) per step
