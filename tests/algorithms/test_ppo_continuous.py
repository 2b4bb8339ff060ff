"""ppo_continuous_action.py / rpo_continuous_action.py: the saved model carries the observation statistics,
and the evaluator acts with them exactly as the trained agent does; logged returns are the env's own."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl_utils.runtime.evals.continuous import evaluate_ppo, load_ppo_model
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.helpers import REPO, returns_played_by_hand, run_script

# one epoch of two minibatches per rollout: nothing here needs the default 10 x 32 gradient steps, which cost more
# than the rollouts themselves; the observation statistics still see every observation
FEW_UPDATES = ("--num-minibatches", "2", "--update-epochs", "1")
SMOKE = ("--env-id", "Pendulum-v1", "--total-timesteps", "2048", "--num-steps", "256", *FEW_UPDATES, "--save-model")


# rpo's runs here (8 s each of one core) are `extended`: it shares these paths with ppo's (CI runs them after the quick run)
RPO_EXTENDED = pytest.param("rpo_continuous_action", marks=pytest.mark.extended)


@pytest.fixture(scope="module", params=["ppo_continuous_action", RPO_EXTENDED])
def trained(request, tmp_path_factory):
    """(algorithm module, saved model path, run) of one short Pendulum run with --save-model."""
    import importlib

    cwd = tmp_path_factory.mktemp(request.param)
    run = run_script(f"{request.param}.py", *SMOKE, cwd=cwd)
    assert run.returncode == 0, run.stderr[-3000:]
    return importlib.import_module(f"cleanrl.{request.param}"), run.run_dir / f"{request.param}.cleanrl_model", run


@pytest.mark.extended  # 9 s of one core: CI runs it after the quick run
def test_saved_model_holds_the_observation_statistics(trained):
    module, model_path, _ = trained
    saved = load_ppo_model(str(model_path))
    rms = saved["obs_rms"]
    assert rms["mean"].shape == rms["var"].shape == (3,)  # Pendulum: cos, sin, angular velocity
    assert rms["count"] > 2048  # updated on every observation of training (plus the initial epsilon)
    assert not torch.allclose(rms["mean"], torch.zeros(3)) and not torch.allclose(rms["var"], torch.ones(3))
    envs = gym.vector.SyncVectorEnv([module.make_env("Pendulum-v1", 0, False, "unused")])
    module.Agent(envs).load_state_dict(saved["agent"])  # the weights fit the script's own network


def test_evaluation_acts_as_the_agent_with_the_saved_statistics(trained):
    """The evaluator's episodes equal a hand-written loop: raw env, training statistics, the agent's mean action."""
    module, model_path, _ = trained
    play = {"capture_video": False, "seed": 3, "deterministic": True}  # the agent's mean action, from seed 3
    returns = evaluate_ppo(str(model_path), module.make_env, "Pendulum-v1", 2, "unused", module.Agent, **play)

    saved = load_ppo_model(str(model_path))
    mean, var = saved["obs_rms"]["mean"].numpy(), saved["obs_rms"]["var"].numpy()
    agent = module.Agent(gym.vector.SyncVectorEnv([module.make_env("Pendulum-v1", 0, False, "unused")]))
    agent.load_state_dict(saved["agent"])

    @torch.no_grad()
    def act(obs):
        seen = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
        return np.clip(agent.actor_mean(torch.as_tensor(seen)).numpy(), -2.0, 2.0)

    assert returns == pytest.approx(returns_played_by_hand("Pendulum-v1", act, 2, seed=3), rel=1e-6)


def test_logged_returns_are_the_environments_own(trained):
    """Pendulum pays between -16.3 and 0 per step; the scaled and clipped rewards would sum to far less in size."""
    _, _, run = trained
    returns = [r for _, r in run.scalars()["charts/episodic_return"]]
    assert len(returns) == 10
    assert all(-16.3 * 200 <= r <= 0 for r in returns)
    assert min(returns) < -200  # an untrained Pendulum policy loses hundreds; normalised rewards are O(1) per step


def observation_wrappers(env: gym.Env) -> list[gym.ObservationWrapper]:
    """The observation wrappers of one sub-env, innermost first: what turns a raw observation into the agent's input."""
    layers = []
    while isinstance(env, gym.Wrapper):
        layers += [env] if isinstance(env, gym.ObservationWrapper) else []
        env = env.env
    return layers[::-1]


def agent_input(env: gym.Env, raw_obs: np.ndarray) -> torch.Tensor:
    """`raw_obs` through the env's own wrappers, with the normalisation statistics frozen (nothing is learned from them)."""
    layers = observation_wrappers(env)
    for layer in layers:
        if isinstance(layer, gym.wrappers.NormalizeObservation):
            layer.update_running_mean = False
    inputs = []
    for obs in raw_obs:
        for layer in layers:
            obs = layer.observation(obs)
        inputs.append(obs)
    return torch.as_tensor(np.stack(inputs), dtype=torch.float32)


@pytest.mark.parametrize("script", ["ppo_continuous_action", "rpo_continuous_action"])
def test_reloaded_model_acts_as_the_trained_agent(script, tmp_path, monkeypatch):
    """Train on Hopper-v4 in this process, keep the trained agent and its envs, then reload the saved file as the
    evaluator does: the same raw observations give the same actions. Without the saved statistics they would not."""
    import runpy

    from cleanrl_utils.runtime.evals.continuous import restore_obs_rms

    monkeypatch.chdir(tmp_path)
    argv = [f"{script}.py", "--env-id", "Hopper-v4", "--total-timesteps", "2048", "--num-steps", "256", *FEW_UPDATES]
    argv.append("--save-model")
    monkeypatch.setattr("sys.argv", argv)
    trained = runpy.run_path(str(REPO / "cleanrl" / f"{script}.py"), run_name="__main__")
    trained_agent, trained_env = trained["agent"], trained["envs"].envs[0]
    (model_path,) = (tmp_path / "runs").glob(f"*/{script}.cleanrl_model")

    # raw observations from states the training never saw
    probe = gym.make("Hopper-v4")
    raw = [probe.reset(seed=7)[0]] + [probe.step(probe.action_space.sample())[0] for _ in range(30)]
    with torch.no_grad():
        expected = trained_agent.actor_mean(agent_input(trained_env, raw))

    module = trained["Agent"], trained["make_env"]
    Agent, make_env = module
    saved = load_ppo_model(str(model_path))
    envs = gym.vector.SyncVectorEnv([make_env("Hopper-v4", 0, False, "unused")])
    reloaded = Agent(envs)
    reloaded.load_state_dict(saved["agent"])
    unnormalised = agent_input(envs.envs[0], raw)  # a fresh env's statistics: what the reference's reload saw
    restore_obs_rms(envs, saved["obs_rms"])
    with torch.no_grad():
        got = reloaded.sample_action(agent_input(envs.envs[0], raw), deterministic=True)
        fresh_stats = reloaded.sample_action(unnormalised, deterministic=True)
    assert torch.equal(got, expected)
    assert torch.equal(reloaded.actor_logstd, trained_agent.actor_logstd.detach())
    assert not torch.allclose(fresh_stats, expected, atol=1e-3)


@pytest.mark.extended  # 9 s of one core: CI runs it after the quick run
@pytest.mark.parametrize("script", ["ppo_continuous_action", RPO_EXTENDED])
def test_dm_control_dict_observations_are_flattened(script, tmp_path):
    """dm_control's cartpole observes {position: 3, velocity: 2}; its episodes are 1000 steps, cut by a time limit."""
    args = ("--env-id", "dm_control/cartpole-balance-v0", "--total-timesteps", "1024", "--num-steps", "512")
    run = run_script(f"{script}.py", *args, *FEW_UPDATES, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    # the env id's namespace becomes a folder level: runs/dm_control/cartpole-balance-v0__{script}__1__{time}
    (run_dir,) = (tmp_path / "runs" / "dm_control").glob(f"cartpole-balance-v0__{script}__1__*")
    scalars = read_scalars(run_dir)
    assert [step for step, _ in scalars["charts/episodic_return"]] == [1000]
    assert scalars["charts/episodic_length"] == [(1000, 1000)]
    (_, episodic_return), *_ = scalars["charts/episodic_return"]
    assert 0 < episodic_return <= 1000  # balance pays at most 1 per step
    assert {"losses/value_loss", "losses/policy_loss", "charts/SPS"} <= set(scalars)
