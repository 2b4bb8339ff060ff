"""c51_jax.py's projection and update, and its evaluator's checks (time limits: tests/algorithms/test_dqn_jax.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from cleanrl import c51_jax
from cleanrl_utils.runtime.evals.jax import evaluate_c51


def test_projection_splits_mass_between_neighbouring_atoms():
    # the hand-worked case of tests/algorithms/test_c51.py
    atoms = np.array([0.0, 1.0, 2.0], np.float32)
    next_atoms = np.array([[0.5, 2.0, 7.0], [-3.0, 1.0, 1.25]], np.float32)  # 7 and -3 lie outside: clamped to the ends
    next_pmfs = np.array([[0.2, 0.3, 0.5], [0.4, 0.4, 0.2]], np.float32)
    expected = np.array([[0.1, 0.1, 0.8], [0.4, 0.55, 0.05]], np.float32)
    np.testing.assert_allclose(c51_jax.project(next_atoms, next_pmfs, atoms), expected, atol=1e-6)


def test_projection_keeps_total_mass_and_mean():
    rng = np.random.default_rng(0)
    atoms = np.linspace(-10, 10, 51, dtype=np.float32)
    next_pmfs = rng.dirichlet(np.ones(51), size=32).astype(np.float32)
    next_atoms = (rng.random((32, 1)) * 0.9 + 0.9 * atoms).astype(np.float32)  # r + gamma * z: inside the support
    target = np.asarray(c51_jax.project(next_atoms, next_pmfs, atoms))
    np.testing.assert_allclose(target.sum(-1), np.ones(32), rtol=1e-5)
    np.testing.assert_allclose((target * atoms).sum(-1), (next_pmfs * next_atoms).sum(-1), atol=1e-4)


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_update_after_a_termination_targets_the_reward_alone():
    """After a termination the target is all mass on the atom of r: the loss is -log p(s, a)[that atom]."""
    network = c51_jax.QNetwork(action_dim=2, n_atoms=3)
    atoms = np.array([0.0, 1.0, 2.0], np.float32)
    obs, next_obs = np.random.default_rng(0).normal(size=(2, 2, 4)).astype(np.float32)
    params = network.init(jax.random.PRNGKey(0), obs)
    state = c51_jax.QTrainState.create(
        apply_fn=network.apply, params=params, target_params=network.init(jax.random.PRNGKey(1), obs), tx=optax.sgd(0.0)
    )
    actions, rewards = np.array([1, 0], np.int32), np.array([1.0, 1.0], np.float32)
    pmfs = np.asarray(network.apply(params, obs))[np.arange(2), actions]  # (2, 3)

    _, loss, q_values = c51_jax.update(state, atoms, obs, actions, next_obs, rewards, np.ones(2, np.float32), 0.5)
    assert float(loss) == pytest.approx(-np.log(pmfs[:, 1]).mean(), rel=1e-5)
    assert float(q_values) == pytest.approx((pmfs * atoms).sum(-1).mean(), rel=1e-5)
    # not terminated: the target's mass spreads beyond the reward's atom, so the loss differs
    _, bootstrapped, _ = c51_jax.update(state, atoms, obs, actions, next_obs, rewards, np.zeros(2, np.float32), 0.5)
    assert abs(float(bootstrapped) - float(loss)) > 1e-3


@pytest.mark.extended  # 7 s of one core: CI runs it after the quick run
def test_update_still_learns_when_the_predicted_distribution_is_saturated():
    """All mass predicted on the top atom, the target on another: the step must still move the prediction.

    Clipping probabilities to [1e-5, 1 - 1e-5] before the log gives such a batch a zero gradient, and a
    network that got there (CartPole's values reach v_max) stayed frozen: the loss works on log-softmax.
    """
    network = c51_jax.QNetwork(action_dim=2, n_atoms=3)
    atoms = np.array([0.0, 1.0, 2.0], np.float32)
    obs, next_obs = np.random.default_rng(0).normal(size=(2, 4, 4)).astype(np.float32)
    params = network.init(jax.random.PRNGKey(0), obs)
    bias = params["params"]["Dense_2"]["bias"]
    params["params"]["Dense_2"]["bias"] = bias + jnp.tile(jnp.array([0.0, 0.0, 40.0]), 2)  # every action: atom 2
    assert float(np.asarray(network.apply(params, obs))[..., 2].min()) > 1 - 1e-6
    state = c51_jax.QTrainState.create(apply_fn=network.apply, params=params, target_params=params, tx=optax.sgd(0.1))
    actions, rewards, dones = np.zeros(4, np.int32), np.zeros(4, np.float32), np.ones(4, np.float32)  # target: atom 0

    new_state, loss, _ = c51_jax.update(state, atoms, obs, actions, next_obs, rewards, dones, 0.99)
    assert float(loss) > 30  # -log p(atom 0), about 40: the true loss, not a clipped one
    before = np.asarray(network.apply(params, obs, log=True))[:, 0, 0]
    after = np.asarray(network.apply(new_state.params, obs, log=True))[:, 0, 0]
    assert np.all(after > before + 1)


def test_evaluate_rejects_bare_parameters(tmp_path):
    import flax

    network = c51_jax.QNetwork(action_dim=2, n_atoms=11)
    path = tmp_path / "bare.cleanrl_model"
    path.write_bytes(flax.serialization.to_bytes(network.init(jax.random.PRNGKey(0), np.zeros(4, np.float32))))
    with pytest.raises(ValueError, match="not a c51_jax.py model"):
        evaluate_c51(str(path), c51_jax.make_env, "CartPole-v1", 1, "ev", c51_jax.QNetwork, capture_video=False)
