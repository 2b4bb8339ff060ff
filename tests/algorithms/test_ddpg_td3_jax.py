"""ddpg_continuous_action_jax.py and td3_continuous_action_jax.py: action bounds, exploration and smoothing noise,
the delayed actor, several envs, the saved model and its evaluator. Contract checks: test_script_contract.py;
truncation: test_truncation.py."""

import runpy
import signal
import sys

import flax
import gymnasium as gym
import jax
import numpy as np
import pytest

from cleanrl import ddpg_continuous_action_jax as ddpg
from cleanrl import td3_continuous_action_jax as td3
from cleanrl_utils.runtime.evals.jax import evaluate_deterministic_actor
from tests import helpers
from tests.helpers import REPO, run_script, script_env

# asymmetric, and not [-1, 1]: the centre is not 0 and the half-ranges differ per dimension
LOW, HIGH = np.array([-1.0, 0.0, 2.0], np.float32), np.array([3.0, 0.5, 2.5], np.float32)
CENTRE, HALF_RANGE = (LOW + HIGH) / 2, (HIGH - LOW) / 2
OBS = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)


def actor_with_output_bias(module, bias: float):
    """An actor whose last layer ignores the observation and outputs `bias` before the tanh, with its params."""
    actor = module.Actor(action_low=LOW, action_high=HIGH)
    params = actor.init(jax.random.PRNGKey(0), OBS)
    last = params["params"]["Dense_2"]
    last["kernel"], last["bias"] = np.zeros_like(last["kernel"]), np.full_like(last["bias"], bias)
    return actor, params


@pytest.mark.parametrize("module", [ddpg, td3], ids=["ddpg", "td3"])
def test_actor_reaches_asymmetric_bounds_exactly(module):
    actor, params = actor_with_output_bias(module, 50.0)  # tanh(50) is 1 in float32
    np.testing.assert_array_equal(actor.apply(params, OBS), np.broadcast_to(HIGH, (5, 3)))
    actor, params = actor_with_output_bias(module, -50.0)
    np.testing.assert_array_equal(actor.apply(params, OBS), np.broadcast_to(LOW, (5, 3)))
    actor, params = actor_with_output_bias(module, 0.0)  # tanh(0) = 0: the centre of the box
    np.testing.assert_allclose(actor.apply(params, OBS), np.broadcast_to(CENTRE, (5, 3)))


@pytest.mark.parametrize("module", [ddpg, td3], ids=["ddpg", "td3"])
def test_exploration_noise_is_scaled_by_the_half_range_and_clipped(module):
    actor, params = actor_with_output_bias(module, 0.0)
    obs = np.zeros((20000, 4), np.float32)
    actions = np.asarray(actor.apply(params, obs, 0.1, jax.random.PRNGKey(1), method="explore"))
    np.testing.assert_allclose(actions.std(0) / HALF_RANGE, 0.1, rtol=0.03)
    wide = np.asarray(actor.apply(params, obs, 5.0, jax.random.PRNGKey(2), method="explore"))  # far wider than the box
    assert (wide >= LOW).all() and (wide <= HIGH).all()
    assert (wide == LOW).any(0).all() and (wide == HIGH).any(0).all()


def test_smoothing_noise_clipped_before_scaling_then_action_to_bounds():
    actor, params = actor_with_output_bias(td3, 0.0)
    obs = np.zeros((1000, 4), np.float32)
    # a huge std: every draw is clipped to +-noise_clip, i.e. +-0.3 half-ranges from the centre
    smoothed = td3.smoothed_target_actions(actor, params, obs, jax.random.PRNGKey(0), policy_noise=1e6, noise_clip=0.3)
    noise = (np.asarray(smoothed) - CENTRE) / HALF_RANGE
    np.testing.assert_allclose(np.abs(noise), 0.3, rtol=1e-5)
    assert (noise > 0).any() and (noise < 0).any()
    # a moderate std is not clipped: its spread is policy_noise half-ranges
    smoothed = td3.smoothed_target_actions(actor, params, np.zeros((20000, 4), np.float32), jax.random.PRNGKey(1), 0.1, 10.0)
    np.testing.assert_allclose((np.asarray(smoothed) - CENTRE).std(0) / HALF_RANGE, 0.1, rtol=0.03)
    # noise beyond the box: the target action still stays inside it, and reaches both bounds
    wide = np.asarray(
        td3.smoothed_target_actions(actor, params, obs, jax.random.PRNGKey(2), policy_noise=100.0, noise_clip=5.0)
    )
    np.testing.assert_array_equal(wide.min(0), LOW)
    np.testing.assert_array_equal(wide.max(0), HIGH)


def run_in_process(script: str, *args: str, cwd, monkeypatch) -> dict:
    """Run an algorithm file as __main__ in this process and return its globals (train states, counters...)."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [script, *args])
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        return runpy.run_path(str(REPO / "cleanrl" / script), run_name="__main__")
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])


def max_gap(a, b) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


@pytest.mark.parametrize(
    ("script", "num_envs", "policy_frequency", "critic_updates", "actor_updates"),
    [
        ("td3_continuous_action_jax.py", 1, 2, 199, 99),
        pytest.param("td3_continuous_action_jax.py", 1, 3, 199, 66, marks=pytest.mark.extended),  # 9 s of one core: CI runs it
        # never due: actor and targets untouched (7 s of one core: CI runs it)
        pytest.param("td3_continuous_action_jax.py", 1, 1000, 199, 0, marks=pytest.mark.extended),
        ("ddpg_continuous_action_jax.py", 2, 2, 99, 49),  # learning at global steps 102, 104, ..., 298
    ],
)
def test_actor_and_targets_update_every_policy_frequency_critic_updates(
    script, num_envs, policy_frequency, critic_updates, actor_updates, tmp_path, monkeypatch
):
    args = ("--env-id", "Pendulum-v1", "--total-timesteps", "300", "--learning-starts", "100", "--batch-size", "32",
            "--num-envs", str(num_envs), "--policy-frequency", str(policy_frequency))  # fmt: skip
    run = run_in_process(script, *args, cwd=tmp_path, monkeypatch=monkeypatch)
    critic_state, actor_state = run.get("qf_state", run.get("qf1_state")), run["actor_state"]
    assert run["num_updates"] == critic_updates
    assert int(critic_state.step) == critic_updates  # the optimisers' step counters
    assert int(actor_state.step) == actor_updates
    if actor_updates:  # the targets moved, but only part of the way (tau = 0.005)
        assert 0 < max_gap(actor_state.params, actor_state.target_params)
        assert 0 < max_gap(critic_state.params, critic_state.target_params)
    else:
        assert max_gap(actor_state.params, actor_state.target_params) == 0  # the actor kept its initial weights
        assert max_gap(critic_state.params, critic_state.target_params) > 0  # the critics learned; targets stayed
        assert max_gap(actor_state.params, run["actor_params"]) == 0
    if script.startswith("td3"):  # two critics, initialised apart
        assert max_gap(critic_state.params["qf1"], critic_state.params["qf2"]) > 0


def test_several_envs_count_env_steps_and_model_holds_three_networks(tmp_path):
    run = helpers.run_td3_on_two_pendulums("td3_continuous_action_jax.py", tmp_path)
    assert [s for s, _ in run.scalars()["eval/episodic_return"]] == list(range(10))
    saved = flax.serialization.msgpack_restore((run.run_dir / "td3_continuous_action_jax.cleanrl_model").read_bytes())
    assert sorted(saved) == ["0", "1", "2"]  # actor, qf1, qf2
    assert saved["0"]["params"]["Dense_2"]["kernel"].shape == (256, 1)  # the actor: Pendulum has one action
    assert saved["1"]["params"]["Dense_0"]["kernel"].shape == (3 + 1, 256)  # a critic: observation and action
    assert "jit compile time: " in run.stdout


def save_untrained(module, env_id: str, path, critics: int) -> tuple:
    envs = gym.vector.SyncVectorEnv([module.make_env(env_id, 0, False, "unused")])
    space, obs = envs.single_action_space, np.zeros((1, *envs.single_observation_space.shape), np.float32)
    actor, keys = module.Actor(action_low=space.low, action_high=space.high), jax.random.split(jax.random.PRNGKey(3), 3)
    params = [actor.init(keys[0], obs)]
    params += [module.QNetwork().init(key, obs, np.zeros((1, *space.shape), np.float32)) for key in keys[1 : 1 + critics]]
    path.write_bytes(flax.serialization.to_bytes(params))
    return actor, params[0]


@pytest.mark.extended  # 10 s of one core: CI runs it after the quick run
@pytest.mark.parametrize(("module", "critics"), [(ddpg, 1), (td3, 2)], ids=["ddpg", "td3"])
def test_evaluation_without_noise_is_the_deterministic_actor(module, critics, tmp_path, monkeypatch):
    """The evaluator's episodes equal a hand-written loop: raw Pendulum, the saved actor's own actions."""
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.cleanrl_model"
    actor, params = save_untrained(module, "Pendulum-v1", model, critics)
    returns = evaluate_deterministic_actor(
        str(model), module.make_env, "Pendulum-v1", 2, "unused", module.Actor, device="cpu", capture_video=False,
        exploration_noise=0.0, seed=5,
    )  # fmt: skip
    expected = helpers.returns_played_by_hand(
        "Pendulum-v1", lambda obs: np.asarray(actor.apply(params, obs[None].astype(np.float32)))[0], 2, seed=5
    )
    assert returns == pytest.approx(expected, rel=1e-5)
    noisy = evaluate_deterministic_actor(
        str(model), module.make_env, "Pendulum-v1", 2, "unused", module.Actor, capture_video=False, seed=5
    )
    assert noisy != returns


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_evaluator_rejects_other_files_and_other_envs(tmp_path):
    other = tmp_path / "other.cleanrl_model"
    other.write_bytes(flax.serialization.to_bytes({"agent": np.zeros(3)}))
    with pytest.raises(ValueError, match=r"no \[actor, critic...\] list"):
        evaluate_deterministic_actor(str(other), ddpg.make_env, "Pendulum-v1", 1, "unused", ddpg.Actor, capture_video=False)
    model = tmp_path / "pendulum.cleanrl_model"
    save_untrained(ddpg, "Pendulum-v1", model, 1)  # 3 observation numbers; MountainCarContinuous has 2
    with pytest.raises(ValueError, match="does not fit this env"):
        evaluate_deterministic_actor(
            str(model), ddpg.make_env, "MountainCarContinuous-v0", 1, "unused", ddpg.Actor, capture_video=False
        )


@pytest.mark.parametrize(
    "script", ["ddpg_continuous_action_jax.py", "td3_continuous_action_jax.py", "sac_continuous_action_jax.py"]
)
def test_missing_jax_is_one_line_naming_the_extra(script, tmp_path):
    stub = tmp_path / "blocked" / "jax"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('jax is blocked for this test', name='jax')\n")
    env = script_env()
    env["PYTHONPATH"] = f"{tmp_path / 'blocked'}:{env['PYTHONPATH']}"
    run = run_script(script, "--env-id", "Pendulum-v1", cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip() == f'{script}: error: jax is missing; install it with pip install -e ".[jax]"'
