"""dqn_jax.py's compiled update against a TD target worked out by hand (truncation against termination:
tests/contract/test_truncation.py)."""

import jax
import numpy as np
import optax
import pytest

from cleanrl import dqn_jax


def forward(params, obs):
    """The Q-network's forward pass in NumPy: 120 -> 84 -> actions, ReLU."""
    layers = params["params"]
    x = obs
    for name in ("Dense_0", "Dense_1"):
        x = np.maximum(x @ np.asarray(layers[name]["kernel"]) + np.asarray(layers[name]["bias"]), 0)
    return x @ np.asarray(layers["Dense_2"]["kernel"]) + np.asarray(layers["Dense_2"]["bias"])


def test_update_regresses_on_the_hand_computed_td_target():
    rng = np.random.default_rng(0)
    network = dqn_jax.QNetwork(action_dim=3)
    obs, next_obs = rng.normal(size=(2, 4, 5)).astype(np.float32)  # 4 transitions, 5 numbers each
    params = network.init(jax.random.PRNGKey(0), obs)
    target_params = network.init(jax.random.PRNGKey(1), obs)  # another network: the target must come from it
    state = dqn_jax.QTrainState.create(apply_fn=network.apply, params=params, target_params=target_params, tx=optax.sgd(1e-3))
    actions = np.array([0, 2, 1, 2], np.int32)
    rewards = np.array([1.0, -0.5, 0.0, 2.0], np.float32)
    dones = np.array([0.0, 1.0, 0.0, 1.0], np.float32)  # terminations; a truncated step is stored as 0
    gamma = 0.9

    # by hand: r + gamma * max_a' Q_target(s', a'), without the bootstrap after a termination
    next_q = forward(target_params, next_obs)
    q = forward(params, obs)
    targets = [r + (0.0 if d else gamma * next_q[i].max()) for i, (r, d) in enumerate(zip(rewards, dones))]
    predicted = [q[i, a] for i, a in enumerate(actions)]
    expected_loss = np.mean([(t - p) ** 2 for t, p in zip(targets, predicted)])

    new_state, loss, q_values = dqn_jax.update(state, obs, actions, next_obs, rewards, dones, gamma)
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    assert float(q_values) == pytest.approx(np.mean(predicted), rel=1e-5)
    # one gradient step towards the targets: the same batch has a lower loss afterwards, the target is untouched
    assert int(new_state.step) == 1
    _, loss_after, _ = dqn_jax.update(new_state, obs, actions, next_obs, rewards, dones, gamma)
    assert float(loss_after) < float(loss)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(new_state.target_params), jax.tree.leaves(target_params)))


def test_target_update_blends_with_tau():
    network = dqn_jax.QNetwork(action_dim=2)
    obs = np.zeros(4, np.float32)
    online, target = network.init(jax.random.PRNGKey(0), obs), network.init(jax.random.PRNGKey(1), obs)
    state = dqn_jax.QTrainState.create(apply_fn=network.apply, params=online, target_params=target, tx=optax.sgd(0.1))
    blended = dqn_jax.update_target(state, 0.25).target_params
    for b, o, t in zip(jax.tree.leaves(blended), jax.tree.leaves(online), jax.tree.leaves(target)):
        np.testing.assert_allclose(b, 0.25 * np.asarray(o) + 0.75 * np.asarray(t), rtol=1e-6)
    copied = dqn_jax.update_target(state, 1.0).target_params
    assert all(np.array_equal(c, o) for c, o in zip(jax.tree.leaves(copied), jax.tree.leaves(online)))
