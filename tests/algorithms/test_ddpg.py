"""ddpg_continuous_action.py (and the Actor it shares with td3_continuous_action.py): action bounds, exploration
noise, the delayed actor update, and the evaluator. Contract checks: test_script_contract.py; truncation:
test_truncation.py."""

import runpy
import signal
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import ddpg_continuous_action as ddpg
from cleanrl import td3_continuous_action as td3
from cleanrl_utils.runtime.evals.continuous import evaluate_deterministic_actor
from tests.helpers import REPO, returns_played_by_hand

# asymmetric, and not [-1, 1]: the centre is not 0 and the half-ranges differ per dimension
LOW, HIGH = np.array([-1.0, 0.0, 2.0], np.float32), np.array([3.0, 0.5, 2.5], np.float32)
SPACES = SimpleNamespace(
    single_observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
    single_action_space=gym.spaces.Box(LOW, HIGH, dtype=np.float32),
)


def saturated_actor(module, sign: float) -> torch.nn.Module:
    """An actor whose tanh output is `sign` (+-1) in every dimension, whatever the observation."""
    actor = module.Actor(SPACES)
    with torch.no_grad():
        actor.fc_mu.weight.zero_()
        actor.fc_mu.bias.fill_(sign * 50.0)  # tanh(50) is 1 in float32
    return actor


@pytest.mark.parametrize("module", [ddpg, td3], ids=["ddpg", "td3"])
def test_actor_reaches_asymmetric_bounds_exactly(module):
    obs = torch.randn(5, 4)
    assert torch.equal(saturated_actor(module, 1.0)(obs), torch.as_tensor(HIGH).expand(5, 3))
    assert torch.equal(saturated_actor(module, -1.0)(obs), torch.as_tensor(LOW).expand(5, 3))
    actor = module.Actor(SPACES)
    with torch.no_grad():
        actor.fc_mu.weight.zero_()
        actor.fc_mu.bias.zero_()
    assert torch.allclose(actor(obs), torch.as_tensor((LOW + HIGH) / 2))  # tanh(0) = 0: the centre of the box
    # the saved weights are the reference's: scale and bias are kept, the bounds (derived from them) are not
    assert {"action_scale", "action_bias"} <= set(actor.state_dict()) and "action_low" not in actor.state_dict()


@pytest.mark.parametrize("module", [ddpg, td3], ids=["ddpg", "td3"])
def test_exploration_noise_is_scaled_by_the_half_range_and_clipped(module):
    torch.manual_seed(0)
    actor = module.Actor(SPACES)
    with torch.no_grad():
        actor.fc_mu.weight.zero_()
        actor.fc_mu.bias.zero_()  # acts at the centre of the box
    actions = actor.explore(torch.zeros(20000, 4), 0.1)
    half_range = torch.as_tensor((HIGH - LOW) / 2)
    assert torch.allclose(actions.std(0) / half_range, torch.full((3,), 0.1), rtol=0.03)
    wide = actor.explore(torch.zeros(20000, 4), 5.0)  # far wider than the box: clipped to it, bounds hit
    assert (wide >= torch.as_tensor(LOW)).all() and (wide <= torch.as_tensor(HIGH)).all()
    assert (wide == torch.as_tensor(LOW)).any(0).all() and (wide == torch.as_tensor(HIGH)).any(0).all()


def run_in_process(script: str, *args: str, cwd, monkeypatch) -> dict:
    """Run an algorithm file as __main__ in this process and return its globals (networks, optimisers...)."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [script, *args])
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    threads = torch.get_num_threads()
    try:
        return runpy.run_path(str(REPO / "cleanrl" / script), run_name="__main__")
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
        torch.set_num_threads(threads)


def adam_steps(optimizer: torch.optim.Optimizer) -> set[int]:
    return {int(state["step"]) for state in optimizer.state.values()}


@pytest.mark.parametrize(("num_envs", "critic_updates"), [(1, 199), (2, 99)])
def test_actor_and_targets_update_every_policy_frequency_critic_updates(num_envs, critic_updates, tmp_path, monkeypatch):
    # learning from global step 101 on: with 1 env, steps 101..299; with 2 envs, steps 102, 104, ..., 298
    args = ("--env-id", "Pendulum-v1", "--total-timesteps", "300", "--learning-starts", "100", "--batch-size", "32",
            "--num-envs", str(num_envs), "--policy-frequency", "2")  # fmt: skip
    run = run_in_process("ddpg_continuous_action.py", *args, cwd=tmp_path, monkeypatch=monkeypatch)
    assert run["num_updates"] == critic_updates
    assert adam_steps(run["q_optimizer"]) == {critic_updates}
    assert adam_steps(run["actor_optimizer"]) == {critic_updates // 2}
    assert all(p.requires_grad for p in run["qf1"].parameters())  # frozen only for the actor's forward pass
    # the targets moved towards the online networks, but only a little (tau = 0.005)
    for online, target in ((run["actor"], run["target_actor"]), (run["qf1"], run["qf1_target"])):
        gap = max((o - t).abs().max().item() for o, t in zip(online.parameters(), target.parameters(), strict=True))
        assert 0 < gap


def test_evaluation_without_noise_is_the_deterministic_actor(tmp_path, monkeypatch):
    """The evaluator's episodes equal a hand-written loop: raw Pendulum, the actor's own actions."""
    monkeypatch.chdir(tmp_path)
    envs = gym.vector.SyncVectorEnv([ddpg.make_env("Pendulum-v1", 0, False, "unused")])
    torch.manual_seed(3)
    actor, qf1 = ddpg.Actor(envs), ddpg.QNetwork(envs)
    torch.save((actor.state_dict(), qf1.state_dict()), tmp_path / "m.cleanrl_model")
    returns = evaluate_deterministic_actor(str(tmp_path / "m.cleanrl_model"), ddpg.make_env, "Pendulum-v1", 2, "unused", ddpg.Actor,
                       capture_video=False, exploration_noise=0.0, seed=5)  # fmt: skip

    @torch.no_grad()
    def act(obs):
        return actor(torch.as_tensor(obs, dtype=torch.float32)[None])[0].numpy()

    assert returns == pytest.approx(returns_played_by_hand("Pendulum-v1", act, 2, seed=5), rel=1e-6)
    noisy = evaluate_deterministic_actor(str(tmp_path / "m.cleanrl_model"), ddpg.make_env, "Pendulum-v1", 2, "unused", ddpg.Actor,
                     capture_video=False, exploration_noise=0.1, seed=5)  # fmt: skip
    assert noisy != returns


def test_evaluator_rejects_a_file_without_an_actor(tmp_path):
    torch.save({"agent": {}}, tmp_path / "other.cleanrl_model")
    with pytest.raises(ValueError, match="no \\(actor, critic...\\) tuple"):
        evaluate_deterministic_actor(str(tmp_path / "other.cleanrl_model"), ddpg.make_env, "Pendulum-v1", 1, "unused", ddpg.Actor,
                 capture_video=False)  # fmt: skip
