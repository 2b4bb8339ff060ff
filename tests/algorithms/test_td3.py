"""td3_continuous_action.py: target policy smoothing, twin critics with a delayed actor, several envs, and the
saved model. The actor's bounds and exploration noise: test_ddpg.py (the same Actor); resume: test_resume.py."""

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import td3_continuous_action as td3
from cleanrl_utils.runtime.evals.continuous import evaluate_deterministic_actor
from tests import helpers
from tests.algorithms.test_ddpg import adam_steps, run_in_process

LOW, HIGH = np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32)
SPACES = SimpleNamespace(
    single_observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
    single_action_space=gym.spaces.Box(LOW, HIGH, dtype=np.float32),
)


def centred_actor() -> torch.nn.Module:
    """An actor that always acts at the centre of the box (tanh output 0)."""
    actor = td3.Actor(SPACES)
    with torch.no_grad():
        actor.fc_mu.weight.zero_()
        actor.fc_mu.bias.zero_()
    return actor


def test_smoothing_noise_is_scaled_by_the_half_range():
    torch.manual_seed(0)
    actor, centre, half_range = centred_actor(), torch.as_tensor((LOW + HIGH) / 2), torch.as_tensor((HIGH - LOW) / 2)
    noise = td3.smoothed_target_actions(actor, torch.zeros(50000, 4), policy_noise=0.1, noise_clip=10.0) - centre
    assert torch.allclose(noise.std(0) / half_range, torch.full((2,), 0.1), rtol=0.03)
    assert torch.allclose(noise.mean(0) / half_range, torch.zeros(2), atol=0.003)


def test_smoothing_noise_clipped_before_scaling_then_action_to_bounds():
    torch.manual_seed(0)
    actor, centre, half_range = centred_actor(), torch.as_tensor((LOW + HIGH) / 2), torch.as_tensor((HIGH - LOW) / 2)
    # a huge std: every draw is clipped to +-noise_clip, i.e. +-0.3 half-ranges from the centre
    noise = (td3.smoothed_target_actions(actor, torch.zeros(1000, 4), policy_noise=1e6, noise_clip=0.3) - centre) / half_range
    assert torch.allclose(noise.abs(), torch.full_like(noise, 0.3))
    assert (noise > 0).any() and (noise < 0).any()
    # noise beyond the box: the target action still stays inside it
    wide = td3.smoothed_target_actions(actor, torch.zeros(1000, 4), policy_noise=100.0, noise_clip=5.0)
    assert torch.equal(wide.amin(0), torch.as_tensor(LOW)) and torch.equal(wide.amax(0), torch.as_tensor(HIGH))


@pytest.mark.parametrize(("policy_frequency", "actor_updates"), [(2, 99), (3, 66), (1, 199)])
def test_twin_critics_every_step_actor_and_targets_delayed(policy_frequency, actor_updates, tmp_path, monkeypatch):
    args = ("--env-id", "Pendulum-v1", "--total-timesteps", "300", "--learning-starts", "100", "--batch-size", "32",
            "--policy-frequency", str(policy_frequency))  # fmt: skip
    run = run_in_process("td3_continuous_action.py", *args, cwd=tmp_path, monkeypatch=monkeypatch)
    assert run["num_updates"] == 199  # one critic update per step from step 101 to 299
    assert adam_steps(run["q_optimizer"]) == {199}
    assert len(run["q_optimizer"].state) == 12  # both critics' 6 tensors, in one optimiser
    assert adam_steps(run["actor_optimizer"]) == {actor_updates}
    for online, target in ((run["qf1"], run["qf1_target"]), (run["qf2"], run["qf2_target"])):
        assert all(not torch.equal(o, t) for o, t in zip(online.parameters(), target.parameters(), strict=True))
    assert not torch.equal(run["qf1"].fc1.weight, run["qf2"].fc1.weight)  # two critics, initialised apart
    assert all(p.requires_grad for p in run["qf1"].parameters())  # frozen only for the actor's forward pass


def test_several_envs_count_environment_steps_and_log_every_episode(tmp_path):
    run = helpers.run_td3_on_two_pendulums("td3_continuous_action.py", tmp_path)
    saved = torch.load(run.run_dir / "td3_continuous_action.cleanrl_model", weights_only=True)
    assert isinstance(saved, tuple) and len(saved) == 3  # actor, qf1, qf2
    envs = gym.vector.SyncVectorEnv([td3.make_env("Pendulum-v1", 0, False, "unused")])
    td3.Actor(envs).load_state_dict(saved[0])
    td3.QNetwork(envs).load_state_dict(saved[1])
    td3.QNetwork(envs).load_state_dict(saved[2])
    returns = evaluate_deterministic_actor(str(run.run_dir / "td3_continuous_action.cleanrl_model"), td3.make_env, "Pendulum-v1", 2,
                       "unused", td3.Actor, capture_video=False)  # fmt: skip
    assert len(returns) == 2 and all(-16.3 * 200 <= r <= 0 for r in returns)
