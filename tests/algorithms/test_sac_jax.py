"""sac_continuous_action_jax.py: the twin of sac_continuous_action.py (both files' own training loops on the same
weights, batches and noise log the same losses), its squashed Gaussian, the actor's burst and the temperature, the
saved model and its evaluator. Contract checks: test_script_contract.py; resume: test_resume.py; truncation:
test_truncation.py."""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from stable_baselines3.common.buffers import ReplayBuffer

from cleanrl import sac_continuous_action_jax as sac
from cleanrl_utils.runtime.evals.jax import evaluate_sac
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.algorithms.test_ddpg import run_in_process as run_torch_in_process
from tests.algorithms.test_ddpg_td3_jax import run_in_process
from tests.helpers import returns_played_by_hand

# ---------------------------------------------------------------- the twin of the PyTorch file

# Hopper (3 action dimensions, episodes that terminate under random actions): 195 steps of random actions, then
# 5 critic updates on batches of 32 (and their actor bursts), logged at step 200
RANDOM_STEPS, BATCH, ACTION_DIM = 195, 32, 3
TWIN_ARGS = ("--env-id", "Hopper-v4", "--total-timesteps", "201", "--learning-starts", str(RANDOM_STEPS),
             "--batch-size", str(BATCH), "--buffer-size", "1000")  # fmt: skip
# The policy's Gaussian noise, in every draw of both runs. Scaled down so that tanh(u) stays away from +-1: there
# log(1 - tanh(u)^2 + 1e-6), the log-probability's correction in both files, turns the last-bit differences
# between PyTorch's and XLA's tanh into gaps of up to 0.4 (at |u| = 7), which no twin could close.
NOISE = 0.3 * np.random.default_rng(7).standard_normal((BATCH, ACTION_DIM)).astype(np.float32)


def batch_indices():
    """The transitions of each batch: drawn among the random actions' (the same in both runs: the same seeded
    action space and env), so the batches do not depend on how either run acted once it learned."""
    rng = np.random.Generator(np.random.PCG64(11))  # not default_rng, which the JAX run replaces
    while True:
        yield rng.integers(0, RANDOM_STEPS, BATCH)


class SharedBatches(np.random.Generator):
    """The JAX file's replay generator (`np.random.default_rng(seed)`), drawing `batch_indices()` instead."""

    def __init__(self, seed):
        super().__init__(np.random.PCG64(seed))
        self.indices = batch_indices()

    def integers(self, low, high=None, size=None, **kwargs):
        assert low == 0 and size == BATCH and high > RANDOM_STEPS  # a batch, once learning started
        return next(self.indices)


def flax_layers_as_torch(params: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) of each Dense layer in creation order, as torch.nn.Linear holds them (the kernel transposed)."""
    layers = params["params"]
    return [
        (np.asarray(layers[f"Dense_{i}"]["kernel"]).T, np.asarray(layers[f"Dense_{i}"]["bias"])) for i in range(len(layers))
    ]


def twin_runs(flags: tuple[str, ...], tmp_path, monkeypatch) -> tuple[dict, dict]:
    """Both files' whole runs, sharing their random parts: the JAX file's initial weights (copied into the torch file's
    layers as they are made), the batches (`batch_indices`) and the policy's Gaussian noise (`NOISE`, in every draw)."""
    for side in ("jax", "torch"):
        (tmp_path / side).mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(np.random, "default_rng", SharedBatches)
        patch.setattr(jax.random, "normal", lambda key, shape, dtype=jnp.float32: jnp.asarray(NOISE[: shape[0]], dtype))
        ran_jax = run_in_process("sac_continuous_action_jax.py", *TWIN_ARGS, *flags, cwd=tmp_path / "jax", monkeypatch=patch)
    # made in the torch file's order: actor, qf1, qf2, then the targets (which copy qf1 and qf2)
    critics = flax_layers_as_torch(ran_jax["qf1_params"]) + flax_layers_as_torch(ran_jax["qf2_params"])
    layers = iter(flax_layers_as_torch(ran_jax["actor_params"]) + critics + critics)

    def jax_weights(linear):
        weight, bias = next(layers)
        with torch.no_grad():
            linear.weight.copy_(torch.as_tensor(weight))
            linear.bias.copy_(torch.as_tensor(bias))

    def shared_noise(normal, sample_shape=()):
        return normal.loc + normal.scale * torch.as_tensor(NOISE[: len(normal.loc)])

    indices = batch_indices()
    with monkeypatch.context() as patch:
        patch.setattr(torch.nn.Linear, "reset_parameters", jax_weights)
        patch.setattr(torch.distributions.Normal, "rsample", shared_noise)
        patch.setattr(ReplayBuffer, "sample", lambda self, batch_size, env=None: self._get_samples(next(indices)))
        ran_torch = run_torch_in_process(
            "sac_continuous_action.py", *TWIN_ARGS, *flags, cwd=tmp_path / "torch", monkeypatch=patch
        )
    assert next(layers, None) is None, "the torch file made other layers than the JAX file's"
    return ran_jax, ran_torch


def losses(cwd) -> dict[str, list[tuple[int, float]]]:
    (run_dir,) = (cwd / "runs").glob("*")
    return {tag: rows for tag, rows in read_scalars(run_dir).items() if tag.startswith("losses/")}


def relative_gaps(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> list[float]:
    assert [step for step, _ in a] == [step for step, _ in b]
    return [abs(x - y) / max(abs(y), 1e-3) for (_, x), (_, y) in zip(a, b, strict=True)]


@pytest.mark.parametrize(
    "flags",
    [
        (),  # the defaults: 2 actor steps every 2nd iteration, alpha tuned, targets blended every step
        pytest.param(
            ("--policy-frequency", "3", "--autotune-resample", "--target-network-frequency", "2"), marks=pytest.mark.extended
        ),
        pytest.param(("--no-autotune", "--alpha", "0.1"), marks=pytest.mark.extended),
    ],
    ids=["defaults", "burst-of-3-resample-targets-every-2nd", "fixed-alpha"],
)
def test_the_same_updates_as_the_pytorch_file(flags, tmp_path, monkeypatch):
    """5 critic updates and their actor and temperature steps, from the same weights on the same batches and
    noise: every loss, Q-value and alpha logged agrees with the PyTorch file's to float32 rounding, and so do the
    networks and the temperature at the end (measured: at most 3e-5 apart with the defaults, 2e-4 for the actor
    loss of the second case). Over longer runs the two drift apart as any two float32 programs do (1e-3 on the
    critics' losses after 105 updates): Adam divides each gradient by its running size, which magnifies the
    rounding of those near zero."""
    ran_jax, ran_torch = twin_runs(flags, tmp_path, monkeypatch)
    got, expected = losses(tmp_path / "jax"), losses(tmp_path / "torch")
    assert got.keys() == expected.keys() and len(got) >= 7
    assert [step for step, _ in expected["losses/qf_loss"]] == [200]
    for tag in expected:
        assert max(relative_gaps(got[tag], expected[tag])) < 1e-3, (tag, got[tag], expected[tag])
    # the networks after the run
    params = ran_jax["actor_state"].params, ran_jax["qf_state"].params
    pairs = [(params[0], ran_torch["actor"]), (params[1]["qf1"], ran_torch["qf1"]), (params[1]["qf2"], ran_torch["qf2"])]
    pairs += [(ran_jax["qf_state"].target_params["qf1"], ran_torch["qf1_target"])]
    for flax_params, module in pairs:
        for (weight, bias), linear in zip(flax_layers_as_torch(flax_params), module.children(), strict=True):
            np.testing.assert_allclose(weight, linear.weight.detach().numpy(), rtol=1e-3, atol=1e-5)
            np.testing.assert_allclose(bias, linear.bias.detach().numpy(), rtol=1e-3, atol=1e-5)
    if "--no-autotune" not in flags:
        log_alpha = float(ran_jax["alpha_state"].params["log_alpha"])
        assert log_alpha != 0 and log_alpha == pytest.approx(ran_torch["log_alpha"].item(), rel=1e-4)


# ---------------------------------------------------------------- the squashed Gaussian

LOW, HIGH = np.array([-1.0], np.float32), np.array([3.0], np.float32)  # asymmetric: centre 1, half-range 2


def constant_actor(mean: float, log_std: float, low=LOW, high=HIGH) -> tuple[sac.Actor, dict]:
    """An actor whose Gaussian, before squashing, is N(mean, exp(log_std)^2) in every state and dimension."""
    actor = sac.Actor(action_low=low, action_high=high)
    params = actor.init(jax.random.key(0), np.zeros((1, 4), np.float32))
    layers = params["params"]
    for name, bias in (("Dense_2", mean), ("Dense_3", np.arctanh((log_std + 5) / 3.5 - 1))):  # mean and log-std heads
        layers[name] = {"kernel": np.zeros_like(layers[name]["kernel"]), "bias": np.full_like(layers[name]["bias"], bias)}
    return actor, params


def test_log_prob_is_a_density_over_asymmetric_bounds(monkeypatch):
    """exp(log_prob) integrates to 1 over the action range [-1, 3]: the tanh and the scale corrections are right."""
    actor, params = constant_actor(mean=0.4, log_std=-0.3)
    noise = np.linspace(-9, 9, 40001, dtype=np.float32)[:, None]  # every pre-squash value out to 9 standard deviations
    monkeypatch.setattr(jax.random, "normal", lambda key, shape, dtype=jnp.float32: jnp.asarray(noise))
    action, log_prob, mean_action = actor.apply(params, np.zeros((len(noise), 4), np.float32), None, method="get_action")
    a, density = np.asarray(action, np.float64)[:, 0], np.exp(np.asarray(log_prob, np.float64))
    assert np.all(np.diff(a) > -1e-6) and a[0] >= -1 and a[-1] <= 3  # XLA's float32 tanh is monotone to the last bit
    assert np.trapezoid(density, a) == pytest.approx(1.0, abs=2e-3)
    # without the change of variables (the Gaussian's own density) the area would be far from 1
    gaussian = np.exp(-0.5 * noise[:, 0].astype(np.float64) ** 2 + 0.3) / np.sqrt(2 * np.pi)
    assert abs(np.trapezoid(gaussian, a) - 1) > 0.3
    np.testing.assert_allclose(np.asarray(mean_action), 1 + 2 * np.tanh(0.4), rtol=1e-6)  # tanh(mean) on the bounds


def test_actions_stay_in_asymmetric_bounds_and_log_std_in_its_range():
    low, high = np.array([-1.0, 10.0], np.float32), np.array([3.0, 10.5], np.float32)
    actor = sac.Actor(action_low=low, action_high=high)
    obs = np.random.default_rng(0).normal(size=(500, 4)).astype(np.float32) * 10
    params = jax.tree.map(lambda x: x * 20, actor.init(jax.random.key(0), obs))  # huge pre-squash values: tanh saturates
    action, log_prob, mean_action = actor.apply(params, obs, jax.random.key(1), method="get_action")
    for a in (np.asarray(action), np.asarray(mean_action)):
        assert (a >= low).all() and (a <= high).all()
    assert np.isfinite(np.asarray(log_prob)).all()
    assert (np.asarray(action)[:, 0] < 1).any() and (np.asarray(action)[:, 0] > 1).any(), "both halves of [-1, 3]"
    _, log_std = actor.apply(params, obs)
    assert sac.LOG_STD_MIN <= float(log_std.min()) < -4.9 and 1.9 < float(log_std.max()) <= sac.LOG_STD_MAX


@pytest.mark.parametrize(("entropy", "direction"), [(-6.0, +1), (0.0, -1)])
def test_temperature_rises_below_the_target_entropy_and_falls_above(entropy, direction):
    """Target entropy -3 (3 action dims): an entropy of -6 is too little (alpha up), 0 is plenty (alpha down); the
    temperature's loss sends no gradient to the log-probabilities (the actor's)."""
    log_pi = jnp.full(256, -entropy)
    grad_alpha, grad_log_pi = jax.grad(sac.temperature_loss, argnums=(0, 1))({"log_alpha": jnp.zeros(())}, log_pi, -3.0)
    assert np.sign(-float(grad_alpha["log_alpha"])) == direction  # a gradient step moves log alpha this way
    assert not np.asarray(grad_log_pi).any()


# ---------------------------------------------------------------- a whole run, its model and its evaluator


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """A short Pendulum run (actor bursts of 3, alpha tuned) with --save-model, and its globals."""
    cwd = tmp_path_factory.mktemp("sac_jax")
    args = ("--env-id", "Pendulum-v1", "--total-timesteps", "401", "--learning-starts", "100", "--batch-size", "32",
            "--policy-frequency", "3", "--save-model")  # fmt: skip
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {"cwd": cwd, **run_in_process("sac_continuous_action_jax.py", *args, cwd=cwd, monkeypatch=monkeypatch)}


def test_critics_every_step_actor_and_temperature_in_bursts(trained):
    # critic updates at steps 101..400; bursts of 3 actor (and alpha) steps at iterations 102, 105, ..., 399
    assert int(trained["qf_state"].step) == 300
    assert int(trained["actor_state"].step) == int(trained["alpha_state"].step) == 3 * 100
    qf_params, targets = trained["qf_state"].params, trained["qf_state"].target_params
    gaps = jax.tree.leaves(jax.tree.map(lambda a, b: float(np.abs(a - b).max()), qf_params, targets))
    assert all(gap > 0 for gap in gaps)  # the targets trail the critics (tau = 0.005)
    assert (
        float(np.abs(qf_params["qf1"]["params"]["Dense_0"]["kernel"] - qf_params["qf2"]["params"]["Dense_0"]["kernel"]).max())
        > 0
    )


def test_autotune_moves_alpha_down_on_a_too_random_policy(trained):
    scalars = read_scalars(next((trained["cwd"] / "runs").glob("*")))
    alpha = [value for _, value in scalars["losses/alpha"]]
    # alpha starts at 1; the fresh policy is far more random than the target entropy -1, so alpha falls
    assert len(alpha) == 3 and 0 < alpha[-1] < alpha[0] < 1
    assert [step for step, _ in scalars["losses/alpha_loss"]] == [200, 300, 400]


def test_saved_model_holds_actor_and_critics_and_is_evaluated(trained):
    (run_dir,) = (trained["cwd"] / "runs").glob("*")
    saved = flax.serialization.msgpack_restore((run_dir / "sac_continuous_action_jax.cleanrl_model").read_bytes())
    assert sorted(saved) == ["0", "1", "2"]  # actor, qf1, qf2
    assert saved["0"]["params"]["Dense_3"]["kernel"].shape == (256, 1)  # the log-std head: Pendulum has one action
    assert saved["2"]["params"]["Dense_0"]["kernel"].shape == (3 + 1, 256)  # a critic: observation and action
    assert [step for step, _ in read_scalars(run_dir)["eval/episodic_return"]] == list(range(10))


def test_evaluation_plays_the_mean_action(trained):
    """The evaluator's episodes equal a hand-written loop over the raw env with tanh(mean) scaled to [-2, 2]."""
    (run_dir,) = (trained["cwd"] / "runs").glob("*")
    model = str(run_dir / "sac_continuous_action_jax.cleanrl_model")
    returns = evaluate_sac(model, sac.make_env, "Pendulum-v1", 2, "unused", sac.Actor, capture_video=False, seed=3)
    actor = sac.Actor(action_low=np.array([-2.0], np.float32), action_high=np.array([2.0], np.float32))
    params = trained["actor_state"].params  # what was saved

    def act(obs):
        mean, _ = actor.apply(params, obs[None].astype(np.float32))
        return 2.0 * np.tanh(np.asarray(mean))[0]

    assert returns == pytest.approx(returns_played_by_hand("Pendulum-v1", act, 2, seed=3), rel=1e-5)
    sampled = evaluate_sac(model, sac.make_env, "Pendulum-v1", 2, "unused", sac.Actor, capture_video=False, seed=3,
                           deterministic=False)  # fmt: skip
    assert sampled != returns


def test_evaluator_rejects_an_actor_of_another_env(trained, tmp_path):
    (run_dir,) = (trained["cwd"] / "runs").glob("*")
    model = str(run_dir / "sac_continuous_action_jax.cleanrl_model")  # 3 observation numbers; MountainCar has 2
    with pytest.raises(ValueError, match="does not fit this env"):
        evaluate_sac(model, sac.make_env, "MountainCarContinuous-v0", 1, "unused", sac.Actor, capture_video=False)


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_fixed_alpha_and_several_envs(tmp_path, monkeypatch):
    args = ("--env-id", "Pendulum-v1", "--num-envs", "2", "--total-timesteps", "800", "--learning-starts", "400",
            "--batch-size", "32", "--no-autotune", "--alpha", "0.2")  # fmt: skip
    ran = run_in_process("sac_continuous_action_jax.py", *args, cwd=tmp_path, monkeypatch=monkeypatch)
    scalars = read_scalars(next((tmp_path / "runs").glob("*")))
    # both Pendulums end their 200-step episodes in the 200th iteration, at global step 398
    assert [s for s, _ in scalars["charts/episodic_return"]] == [398, 398, 798, 798]
    assert [s for s, _ in scalars["losses/qf1_loss"]] == [500, 600, 700]
    assert [v for _, v in scalars["losses/alpha"]] == pytest.approx([0.2] * 3)
    assert "losses/alpha_loss" not in scalars and int(ran["alpha_state"].step) == 0
