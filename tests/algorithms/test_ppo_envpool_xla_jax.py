"""ppo_atari_envpool_xla_jax(_scan).py: the scan GAE, the in-graph episode statistics, envpool's reset steps, the saved layout.

The contract table (tests/contract/test_script_contract.py) runs both scripts end to end; here the pieces that a
short run cannot check are tested on their own, against plain Python bookkeeping.
"""

import importlib

import numpy as np
import pytest

envpool = pytest.importorskip("envpool")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

SCRIPTS = ("ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan")


def loop_gae(rewards, values, next_value, terminations, dones, gamma, gae_lambda):
    """GAE as a plain backward loop over the steps, in float64."""
    num_steps = len(rewards)
    advantages = np.zeros_like(values, dtype=np.float64)
    lastgaelam = np.zeros_like(next_value, dtype=np.float64)
    for t in reversed(range(num_steps)):
        next_values = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_values * (1.0 - terminations[t]) - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages


def test_scan_gae_equals_a_python_loop():
    from cleanrl.ppo_atari_envpool_xla_jax_scan import compute_gae

    rng = np.random.default_rng(0)
    num_steps, num_envs = 33, 5
    rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    next_value = rng.normal(size=num_envs).astype(np.float32)
    terminations = rng.random((num_steps, num_envs)) < 0.08
    truncations = (rng.random((num_steps, num_envs)) < 0.05) & ~terminations
    terminations[-1, 0] = truncations[-1, 1] = True  # episode ends on the last step too
    dones = terminations | truncations
    assert terminations[:-1].any() and truncations[:-1].any()
    args = (rewards, values, next_value, terminations.astype(np.float32), dones.astype(np.float32))
    got = np.asarray(jax.jit(compute_gae, static_argnums=(5, 6))(*map(jnp.asarray, args), 0.99, 0.95))
    np.testing.assert_allclose(got, loop_gae(*args, 0.99, 0.95), rtol=1e-5, atol=1e-5)

    # at an episode end nothing flows back from the next episode: a termination bootstraps nothing,
    # a time-limit cut bootstraps from the value of its last observation (the next step's value)
    t, e = np.argwhere(terminations[:-1])[0]
    np.testing.assert_allclose(got[t, e], rewards[t, e] - values[t, e], rtol=1e-5)
    t, e = np.argwhere(truncations[:-1])[0]
    np.testing.assert_allclose(got[t, e], rewards[t, e] + 0.99 * values[t + 1, e] - values[t, e], rtol=1e-5)


def random_xla_steps(num_envs: int, max_episode_steps: int, steps: int, seed: int = 3):
    """Step a real envpool Breakout through its XLA interface (as the scripts do) with random actions."""
    from cleanrl.ppo_atari_envpool_xla_jax import make_env

    settings = {"num_envs": num_envs, "seed": seed, "episodic_life": True, "reward_clip": True}
    envs = envpool.make("Breakout-v5", env_type="gymnasium", max_episode_steps=max_episode_steps, **settings)
    # the scripts' own settings, besides the time limit
    assert {k: v for k, v in envs.spec.config._asdict().items() if k != "max_episode_steps"} == {
        k: v for k, v in make_env("Breakout-v5", seed, num_envs)().spec.config._asdict().items() if k != "max_episode_steps"
    }
    handle, _, _, step_env = envs.xla()
    envs.reset()
    step = jax.jit(step_env)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        handle, out = step(handle, jnp.asarray(rng.integers(0, envs.action_space.n, num_envs), jnp.int32))
        yield out
    envs.close()


# the time-limit case (10 s of one core) is `extended`, which CI runs after the quick run; the game-overs case stays in it
@pytest.mark.parametrize(
    "max_episode_steps", [pytest.param(40, marks=pytest.mark.extended), 27000], ids=["time-limit cuts", "game overs"]
)
@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_episode_statistics_follow_whole_games(max_episode_steps):
    modules = [importlib.import_module(f"cleanrl.{name}") for name in SCRIPTS]
    num_envs = 4
    stats = [module.EpisodeStatistics.zeros(num_envs) for module in modules]
    updates = [jax.jit(lambda s, info, trunc: s.update(info, trunc)) for _ in modules]
    running_return, running_length = np.zeros(num_envs), np.zeros(num_envs, np.int64)
    last_return, last_length = np.zeros(num_envs), np.zeros(num_envs, np.int64)
    ended_before, life_lost_before = np.zeros(num_envs, bool), np.zeros(num_envs, bool)
    previous_elapsed = np.zeros(num_envs, np.int64)
    cuts = game_overs = lives_lost = 0
    for _obs, _reward, terminated, truncated, info in random_xla_steps(num_envs, max_episode_steps, 800):
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        elapsed, lives, raw = np.asarray(info["elapsed_step"]), np.asarray(info["lives"]), np.asarray(info["reward"])
        np.testing.assert_array_equal(np.asarray(info["env_id"]), np.arange(num_envs))  # envs come back in order
        # envpool's next-step autoreset, which the scripts rely on: exactly the step after a game end starts the
        # next game (elapsed_step 0); the step after a lost life resets the life within the game (elapsed_step
        # stays). Both ignore the action; the scripts learn from neither.
        np.testing.assert_array_equal(elapsed == 0, ended_before)
        np.testing.assert_array_equal(elapsed[life_lost_before], previous_elapsed[life_lost_before])
        playing = ~ended_before & ~life_lost_before
        np.testing.assert_array_equal(elapsed[playing], previous_elapsed[playing] + 1)
        game_over = truncated | (terminated & (lives == 0))
        np.testing.assert_array_equal(game_over, truncated | (np.asarray(info["terminated"]) == 1))

        running_return = np.where(ended_before, 0.0, running_return + raw)
        running_length = np.where(ended_before, 0, running_length + 1)
        last_return = np.where(game_over, running_return, last_return)
        last_length = np.where(game_over, running_length, last_length)
        for i, update in enumerate(updates):
            stats[i] = update(stats[i], info, truncated)
            np.testing.assert_allclose(np.asarray(stats[i].returned_episode_returns), last_return)
            np.testing.assert_array_equal(np.asarray(stats[i].returned_episode_lengths), last_length)

        cuts, game_overs = cuts + truncated.sum(), game_overs + (game_over & ~truncated).sum()
        lives_lost += (terminated & ~game_over).sum()
        ended_before, life_lost_before, previous_elapsed = game_over, terminated & ~game_over, elapsed
    # the run went through what it is meant to test
    assert lives_lost >= num_envs
    if max_episode_steps == 40:
        assert cuts >= 2 * num_envs
        assert last_length.min() >= 40  # a cut game counts its 40 game steps and the steps that reset lost lives
    else:
        assert game_overs >= num_envs and cuts == 0 and last_return.max() > 0


@pytest.mark.extended  # 7 s of one core: CI runs it after the quick run
def test_saved_layout_is_the_references_and_is_read_back(tmp_path):
    """[args, [network, actor, critic]], each {"params": ...} with the reference's layer names; other files are refused."""
    import flax

    from cleanrl.ppo_atari_envpool_xla_jax_scan import Agent
    from cleanrl_utils.runtime.evals.jax import load_agent_params

    obs = np.zeros((4, 84, 84), np.uint8)
    params = Agent(action_dim=4).init(jax.random.PRNGKey(1), obs[None])["params"]
    assert {name: sorted(params[name]) for name in params} == {
        "network": ["Conv_0", "Conv_1", "Conv_2", "Dense_0"],
        "actor": ["Dense_0"],
        "critic": ["Dense_0"],
    }
    saved = tmp_path / "model.cleanrl_model"
    parts = [{"params": params[name]} for name in ("network", "actor", "critic")]
    saved.write_bytes(flax.serialization.to_bytes([{"env_id": "Breakout-v5", "target_kl": None}, parts]))
    restored = load_agent_params(str(saved), Agent(action_dim=4), obs)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves({"params": params}), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

    with pytest.raises(ValueError, match="do not fit"):  # a model of a game with 6 actions
        load_agent_params(str(saved), Agent(action_dim=6), obs)
    saved.write_bytes(flax.serialization.to_bytes({"params": params}))  # the bare parameters
    with pytest.raises(ValueError, match=r"does not hold \[args, \[network, actor, critic\]\]"):
        load_agent_params(str(saved), Agent(action_dim=4), obs)
