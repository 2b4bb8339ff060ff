"""The JAX twins of the Atari DQN family beyond the contract tests: dqn_atari_jax.py, c51_atari_jax.py and
qdagger_dqn_atari_jax_impalacnn.py against their PyTorch twins, the JAX QDagger's teacher, the evaluators."""

import flax
import gymnasium as gym
import jax
import numpy as np
import pytest
import torch

from cleanrl import c51_atari, c51_atari_jax, dqn_atari, dqn_atari_jax, qdagger_dqn_atari_impalacnn
from cleanrl import qdagger_dqn_atari_jax_impalacnn as qdagger_jax
from cleanrl_utils.runtime.evals import jax as jax_evals
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer
from tests.fixtures.teachers import save_jax_teacher, teach_a_student
from tests.helpers import run_in_process
from tests.runtime.test_frame_replay import FRAME, STACK

BREAKOUT = "BreakoutNoFrameskip-v4"


def random_frames(batch: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (batch, STACK, *FRAME), dtype=np.uint8)


@pytest.mark.extended  # 16 s of one core: CI runs it after the quick run
def test_a_model_saved_by_dqn_atari_jax_teaches_the_jax_student(tmp_path):
    # the IMPALA CNN's updates are most of the run's time, so on small batches: 8, as in the smoke run of
    # tests/contract/test_script_contract.py, whose compiled updates the test session's JAX cache then holds
    teacher_path = teach_a_student(
        "dqn_atari_jax.py", "qdagger_dqn_atari_jax_impalacnn.py", "--batch-size", "8", cwd=tmp_path, timeout_s=900
    )

    # the re-declared teacher reads dqn_atari_jax.py's file and computes what dqn_atari_jax.py's network does
    env = qdagger_jax.make_env(BREAKOUT, 0, False, "unused")()
    teacher, params = qdagger_jax.load_teacher(str(teacher_path), "dqn_atari_jax", env)
    original = dqn_atari_jax.QNetwork(action_dim=env.action_space.n)
    original_params = jax_evals.load_params(str(teacher_path), original, env.observation_space.sample())
    env.close()
    np.testing.assert_allclose(teacher.apply(params, random_frames()), original.apply(original_params, random_frames()))


# another game's teacher (13 s of one core: a Pong model offered to the Breakout student) is `extended`: CI runs it after the quick run
@pytest.mark.parametrize(
    "case", ["not a model file", "a PyTorch model", pytest.param("another game's teacher", marks=pytest.mark.extended)]
)
def test_bad_local_teachers_are_one_clear_line(case, tmp_path):
    path = tmp_path / "teacher.cleanrl_model"
    if case == "not a model file":
        path.write_text("not a model\n")
        expected = "is not a model file saved by dqn_atari_jax.py"
    elif case == "a PyTorch model":  # dqn_atari.py's file: the PyTorch twin's teacher, not this one's
        env = dqn_atari.make_env(BREAKOUT, 0, False, "unused")()
        torch.save(dqn_atari.QNetwork(env).state_dict(), path)
        env.close()
        expected = "is not a model file saved by dqn_atari_jax.py"
    else:  # Pong has 6 actions, Breakout 4
        save_jax_teacher(path, "PongNoFrameskip-v4")
        expected = f"does not fit {BREAKOUT}: its parameter shapes differ"
    env = qdagger_jax.make_env(BREAKOUT, 0, False, "unused")()
    with pytest.raises(ValueError) as error:  # the script ends with it as its one line
        qdagger_jax.load_teacher(str(path), "dqn_atari_jax", env)
    env.close()
    assert expected in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_projection_matches_the_pytorch_twin():
    rng = np.random.default_rng(0)
    atoms = np.linspace(-10, 10, 51, dtype=np.float32)
    next_pmfs = rng.dirichlet(np.ones(51), size=64).astype(np.float32)
    rewards, dones = rng.choice([-1.0, 0.0, 1.0], size=(64, 1)), rng.random((64, 1)) < 0.3
    next_atoms = (rewards + 0.99 * atoms * (1 - dones)).astype(np.float32)
    next_atoms[:4] += 30.0  # beyond the support: clamped to its last atom
    got = c51_atari_jax.project(next_atoms, next_pmfs, atoms)
    expected = c51_atari.project(*(torch.from_numpy(a) for a in (next_atoms, next_pmfs, atoms)))
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(np.asarray(got).sum(-1), 1.0, atol=1e-5)


def test_distillation_loss_matches_the_pytorch_twin():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(8, 4)).astype(np.float32)
    for temperature in (1.0, 0.5):
        got = qdagger_jax.kl_divergence_with_logits(teacher / temperature, student / temperature)
        expected = qdagger_dqn_atari_impalacnn.kl_divergence_with_logits(
            torch.from_numpy(teacher / temperature), torch.from_numpy(student / temperature)
        )
        assert float(got) == pytest.approx(expected.item(), rel=1e-5)
    assert float(qdagger_jax.kl_divergence_with_logits(teacher, teacher)) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.extended  # 14 s of one core: CI runs it after the quick run
def test_networks_have_the_twins_shapes():
    frames = random_frames()
    # shapes only (jax.eval_shape): nothing is compiled for the IMPALA CNN and the Nature CNN
    student = qdagger_jax.QNetwork(action_dim=4)
    params = jax.eval_shape(student.init, jax.random.PRNGKey(0), frames)
    assert jax.eval_shape(student.apply, params, frames).shape == (3, 4)
    assert params["params"]["Dense_0"]["kernel"].shape == (32 * 11 * 11, 256)  # 84 -> 42 -> 21 -> 11
    assert [params["params"][f"ConvSequence_{i}"]["Conv_0"]["kernel"].shape[-1] for i in range(3)] == [16, 32, 32]
    dqn = dqn_atari_jax.QNetwork(action_dim=4)
    assert jax.eval_shape(dqn.init, jax.random.PRNGKey(0), frames)["params"]["Dense_0"]["kernel"].shape == (3136, 512)
    c51 = c51_atari_jax.QNetwork(action_dim=4, n_atoms=11, v_min=-5, v_max=5)
    c51_params = jax.jit(c51.init)(jax.random.PRNGKey(0), frames)
    pmfs = c51.apply(c51_params, frames, method="pmfs")
    assert pmfs.shape == (3, 4, 11) and np.allclose(pmfs.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(c51.apply(c51_params, frames), (pmfs * np.linspace(-5, 5, 11)).sum(-1), rtol=1e-5)


@pytest.mark.extended  # 16 s of one core: CI runs it after the quick run
def test_evaluators_play_saved_params_and_refuse_files_that_do_not_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save_jax_teacher(tmp_path / "pong.cleanrl_model", "PongNoFrameskip-v4")  # 6 actions: not a Breakout model
    with pytest.raises(ValueError, match="do not fit this network"):
        jax_evals.evaluate_dqn_atari(
            str(tmp_path / "pong.cleanrl_model"),
            dqn_atari_jax.make_env,
            BREAKOUT,
            1,
            "ev",
            dqn_atari_jax.QNetwork,
            capture_video=False,
        )
    # C51: the support comes from the saved args; bare params (no args) are refused
    env = c51_atari_jax.make_env(BREAKOUT, 0, False, "unused")()
    support = {"n_atoms": 11, "v_min": -5.0, "v_max": 5.0}
    params = c51_atari_jax.QNetwork(action_dim=4, **support).init(jax.random.PRNGKey(0), env.observation_space.sample()[None])
    env.close()
    (tmp_path / "c51.cleanrl_model").write_bytes(flax.serialization.to_bytes({"model_weights": params, "args": support}))
    (tmp_path / "bare.cleanrl_model").write_bytes(flax.serialization.to_bytes(params))
    returns = jax_evals.evaluate_c51_atari(
        "c51.cleanrl_model",
        c51_atari_jax.make_env,
        BREAKOUT,
        2,
        "ev",
        c51_atari_jax.QNetwork,
        device="cpu",
        capture_video=False,
    )
    assert len(returns) == 2 and all(r >= 0 for r in returns)
    with pytest.raises(ValueError, match="not a c51_atari_jax.py model"):
        jax_evals.evaluate_c51_atari(
            "bare.cleanrl_model", c51_atari_jax.make_env, BREAKOUT, 1, "ev", c51_atari_jax.QNetwork, capture_video=False
        )


def test_the_env_factory_is_the_twins():
    env, twin = dqn_atari_jax.make_env(BREAKOUT, 0, False, "x")(), dqn_atari.make_env(BREAKOUT, 0, False, "x")()
    assert env.observation_space == twin.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    np.testing.assert_array_equal(env.reset(seed=3)[0], twin.reset(seed=3)[0])
    env.close()
    twin.close()


@pytest.fixture
def memory_paying(monkeypatch):
    """Every transition the frame memory hands out pays `reward` and does not end the episode."""

    def pay(reward: float) -> None:
        fetch = FrameReplayBuffer.fetch

        def fetch_paying(self, slots):
            batch = fetch(self, slots)
            return batch._replace(rewards=np.full_like(batch.rewards, reward), dones=np.zeros_like(batch.dones))

        monkeypatch.setattr(FrameReplayBuffer, "fetch", fetch_paying)

    return pay


# the QDagger student's case compiles its IMPALA CNN (17 s of one core): `extended`, which CI runs after the quick run
@pytest.mark.parametrize(
    "script", ["dqn_atari_jax.py", pytest.param("qdagger_dqn_atari_jax_impalacnn.py", marks=pytest.mark.extended)]
)
def test_td_targets_are_the_sampled_rewards_when_gamma_is_0(script, memory_paying, tmp_path):
    """Rewards of 1000, no termination, γ = 0: each TD target is 1000, so the first loss is about 1000², whatever
    the fresh network's (small) Q-values. Taking the batch's termination flags for its rewards gives about 0."""
    memory_paying(1000.0)
    budget = ("--buffer-size", "200", "--gamma", "0", "--learning-starts", "96", "--total-timesteps", "101")
    if script.startswith("qdagger"):  # the offline phase's first update: one game scores the teacher, 50 steps fill its memory
        budget = (*budget, "--teacher-model-path", str(save_jax_teacher(tmp_path / "teacher.cleanrl_model")))
        budget = (*budget, "--teacher-eval-episodes", "1", "--teacher-steps", "50", "--offline-steps", "1")
    run = run_in_process(script, *budget, cwd=tmp_path, timeout_s=900)
    assert run.returncode == 0, run.stderr[-3000:]
    tag = "charts/offline/q_loss" if script.startswith("qdagger") else "losses/td_loss"
    first_loss = run.scalars()[tag][0][1]
    assert first_loss == pytest.approx(1000.0**2, rel=0.05)


@pytest.mark.extended  # 26 s of one core: CI runs it after the quick run
def test_c51_target_distribution_sits_on_the_sampled_rewards(memory_paying, tmp_path):
    """Two atoms, 0 and 1; every reward 1, no termination, γ = 0: the target puts all mass on atom 1, so the
    predicted mean (losses/q_values) climbs from about 0.5 towards 1. Termination flags taken for rewards sink it."""
    memory_paying(1.0)
    support = ("--n-atoms", "2", "--v-min", "0", "--v-max", "1", "--gamma", "0", "--learning-rate", "0.01")
    budget = ("--buffer-size", "200", "--learning-starts", "96", "--train-frequency", "1", "--total-timesteps", "301")
    run = run_in_process("c51_atari_jax.py", *support, *budget, cwd=tmp_path, timeout_s=900)
    assert run.returncode == 0, run.stderr[-3000:]
    q_values = [value for _, value in run.scalars()["losses/q_values"]]
    assert len(q_values) == 3 and q_values[-1] > 0.9, q_values
