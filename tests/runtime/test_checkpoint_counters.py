"""Counters that disagree and replay memories out of shape, in real checkpoints of the scripts (issue 51).

A script's checkpoint holds counters that depend on each other (an iteration and the step count it took, critic
updates and the steps after learning starts) and replay memories with a position that says where the next
transition goes. Each attack below changes one of them in a real checkpoint (a tiny run, resumed from its older
checkpoint so that the resumed run trains) to a value the run never writes, as an attacker would: the resumed run
must refuse it in one line on stderr with exit code 2, before training. The unchanged checkpoints resume (exit 0),
so the checks refuse nothing a run writes, with more than one env too.
"""

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import plain_data
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.fixtures.teachers import TEACHER_MODEL
from tests.helpers import run_in_process

# each attack resumes a small run (a few minutes in all on one core): CI runs them after the quick run
pytestmark = pytest.mark.extended

PENDULUM_OFF_POLICY = ("--env-id", "Pendulum-v1", "--batch-size", "16", "--checkpoint-frequency", "200")
# each run writes two checkpoints; the older one is resumed, so the resumed run trains on after it
RUNS = {
    # two envs, learning from step 101 on: the critic updates are counted per iteration of 2 steps
    "td3_continuous_action_jax.py": (
        *PENDULUM_OFF_POLICY,
        *("--num-envs", "2", "--total-timesteps", "420", "--learning-starts", "101", "--buffer-size", "300"),
    ),
    # a memory that has not wrapped at its older checkpoint (200 of 500 rows)
    "sac_continuous_action_jax.py": (
        *PENDULUM_OFF_POLICY,
        *("--total-timesteps", "420", "--learning-starts", "100", "--buffer-size", "500"),
    ),
    "sac_continuous_action.py": (
        *PENDULUM_OFF_POLICY,
        *("--total-timesteps", "420", "--learning-starts", "100", "--buffer-size", "500"),
    ),
    "ddpg_continuous_action.py": (
        *PENDULUM_OFF_POLICY,
        *("--total-timesteps", "420", "--learning-starts", "100", "--buffer-size", "500"),
    ),
    "ppo_continuous_action.py": (
        *("--env-id", "Pendulum-v1", "--total-timesteps", "512", "--num-steps", "128", "--checkpoint-frequency", "2"),
        *("--update-epochs", "1", "--num-minibatches", "2"),
    ),
    # Breakout: the frame memory of 300 transitions has not wrapped at the older checkpoint (step 150)
    "dqn_atari.py": (
        *("--total-timesteps", "320", "--learning-starts", "100", "--buffer-size", "300", "--batch-size", "16"),
        *("--train-frequency", "5", "--target-network-frequency", "100", "--checkpoint-frequency", "150"),
    ),
    # Breakout with an untrained teacher: 100 steps of its play, 60 offline steps, 240 online ones, a checkpoint
    # every 25 steps: the older one (275) is in the online phase
    "qdagger_dqn_atari_impalacnn.py": (
        *("--teacher-model-path", str(TEACHER_MODEL), "--teacher-eval-episodes", "1", "--teacher-steps", "100"),
        *("--offline-steps", "60", "--offline-eval-frequency", "0", "--buffer-size", "300", "--learning-starts", "100"),
        *("--total-timesteps", "240", "--train-frequency", "5", "--batch-size", "8", "--checkpoint-frequency", "25"),
    ),
    "ppo_atari_lstm.py": (
        *("--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2", "--total-timesteps", "256"),
        *("--update-epochs", "1", "--checkpoint-frequency", "2"),
    ),
}


@pytest.fixture(scope="module")
def older_checkpoint(tmp_path_factory):
    """script -> the state of its run's older checkpoint, each run made once for the module, when first asked for."""
    made: dict[str, dict] = {}

    def older(script: str) -> dict:
        if script not in made:
            cwd = tmp_path_factory.mktemp(script.removesuffix(".py"))
            run = run_in_process(script, *RUNS[script], cwd=cwd, timeout_s=300)
            assert run.returncode == 0, run.stderr[-2000:]
            found = ckpt.checkpoints(run.run_dir / "checkpoints")
            assert len(found) == 2, found
            made[script] = ckpt.read(found[0])
        return copy.deepcopy(made[script])

    return older


def resumed(script: str, state: dict, tmp_path: Path):
    path = tmp_path / "checkpoint_1.pt"
    path.write_bytes(plain_data.dumps(state))
    return run_in_process(script, "--resume", str(path), cwd=tmp_path, timeout_s=300)


def assert_refused_in_one_line(run, script: str, says: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, (run.returncode, run.stderr[-1500:])
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: --resume"), run.stderr[-1500:]
    assert says in lines[0], lines[0]
    assert "SPS" not in run.stdout, "refused before it trained"


@pytest.mark.parametrize("script", list(RUNS))
def test_the_unchanged_older_checkpoint_resumes_to_the_end(script, older_checkpoint, tmp_path):
    """The control: every check below takes what the run wrote (two envs, a memory not yet full, the LSTM run)."""
    run = resumed(script, older_checkpoint(script), tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert ckpt.checkpoints(run.run_dir / "checkpoints"), "it trained on to its next checkpoint"


# ---------------------------------------------------------------- counters that disagree


def test_ppo_continuous_iteration_behind_its_step_count(older_checkpoint, tmp_path):
    # iteration 2 of 128 steps, global_step 256: iteration 1 (in range) would have run on to step 640 of 512
    state = older_checkpoint("ppo_continuous_action.py")
    assert (state["iteration"], state["global_step"]) == (2, 256)
    state["iteration"] = 1
    run = resumed("ppo_continuous_action.py", state, tmp_path)
    assert_refused_in_one_line(run, "ppo_continuous_action.py", "global_step (256) is not 1 iterations' steps")


def test_ppo_atari_lstm_step_count_off_its_iterations(older_checkpoint, tmp_path):
    # a step count a rollout never ends on: the logs and checkpoints would be named off by 7 from then on
    state = older_checkpoint("ppo_atari_lstm.py")
    state["global_step"] += 7
    assert_refused_in_one_line(resumed("ppo_atari_lstm.py", state, tmp_path), "ppo_atari_lstm.py", "is not 2 iterations'")


@pytest.mark.parametrize("off_by", [-2, 1])
def test_td3_jax_critic_updates_that_disagree_with_the_steps(off_by, older_checkpoint, tmp_path):
    # steps 0, 2, ..., 198 taken, updates after step 101: 49 (102 to 198); another count shifts the actor's cadence
    state = older_checkpoint("td3_continuous_action_jax.py")
    assert (state["global_step"], state["num_updates"]) == (198, 49)
    state["num_updates"] += off_by
    run = resumed("td3_continuous_action_jax.py", state, tmp_path)
    assert_refused_in_one_line(run, "td3_continuous_action_jax.py", "num_updates")


def test_ddpg_critic_updates_that_disagree_with_the_steps(older_checkpoint, tmp_path):
    state = older_checkpoint("ddpg_continuous_action.py")
    assert (state["global_step"], state["num_updates"]) == (199, 99)
    state["num_updates"] = 0
    run = resumed("ddpg_continuous_action.py", state, tmp_path)
    assert_refused_in_one_line(run, "ddpg_continuous_action.py", "num_updates (0) is not in 99 to 99")


def test_sac_alpha_follows_log_alpha_whatever_alpha_the_checkpoint_holds(older_checkpoint, tmp_path):
    # was: a saved alpha of 1000 beside log alpha 0.03 was the temperature until the next alpha update (with
    # --no-autotune: for the whole run, whatever --alpha said); alpha is exp(log alpha) or --alpha, never read
    state = older_checkpoint("sac_continuous_action.py")
    runs = []
    for name, changed in (("honest", state), ("crafted", state | {"alpha": torch.tensor(1000.0)})):
        (tmp_path / name).mkdir()
        runs.append(resumed("sac_continuous_action.py", changed, tmp_path / name))
        assert runs[-1].returncode == 0, runs[-1].stderr[-2000:]
    honest, crafted = (read_scalars(run.run_dir)["losses/alpha"] for run in runs)
    assert crafted == honest and max(value for _, value in crafted) < 2


# ---------------------------------------------------------------- the JAX scripts' ring memory


def with_column(data: np.ndarray, column: int, value: float) -> np.ndarray:
    data = data.copy()
    data[0, column] = value
    return data


# Pendulum rows: obs (3) | action (1) | reward | termination | next obs (3)
RING_ATTACKS = {
    "nan reward": (lambda rb: rb | {"data": with_column(rb["data"], 4, math.nan)}, "a nan, an infinity"),
    "infinite next obs": (lambda rb: rb | {"data": with_column(rb["data"], 8, math.inf)}, "a nan, an infinity"),
    "termination 0.5": (lambda rb: rb | {"data": with_column(rb["data"], 5, 0.5)}, "termination flag"),
    "action beyond the bounds": (lambda rb: rb | {"data": with_column(rb["data"], 3, 2.5)}, "action bounds"),
    "position not at the size": (lambda rb: rb | {"pos": rb["pos"] + 1}, "is not where its next step goes"),
    "negative position": (lambda rb: rb | {"pos": -1}, "position (-1)"),
    "bool position": (lambda rb: rb | {"pos": True, "size": True}, "its size (True)"),
    "size beyond the memory": (lambda rb: rb | {"size": 501}, "its size (501)"),
    "rows of another width": (lambda rb: rb | {"data": rb["data"][:, :5]}, "are not 200 of this memory's"),
    "float64 rows": (lambda rb: rb | {"data": rb["data"].astype(np.float64)}, "float32 rows"),
    "rows fewer than the size": (lambda rb: rb | {"data": rb["data"][:10]}, "are not 200 of"),
    "no generator": (lambda rb: {k: v for k, v in rb.items() if k != "rng"}, "replay_buffer does not fit"),
    "another generator": (lambda rb: rb | {"rng": {"bit_generator": "MT19937"}}, "replay_buffer does not fit"),
}


@pytest.mark.parametrize("attack", list(RING_ATTACKS))
def test_sac_jax_ring_memory_out_of_shape(attack, older_checkpoint, tmp_path):
    change, says = RING_ATTACKS[attack]
    state = older_checkpoint("sac_continuous_action_jax.py")
    assert (state["replay_buffer"]["pos"], state["replay_buffer"]["size"]) == (200, 200)
    state["replay_buffer"] = change(state["replay_buffer"])
    run = resumed("sac_continuous_action_jax.py", state, tmp_path)
    assert_refused_in_one_line(run, "sac_continuous_action_jax.py", says)


def test_td3_jax_position_between_two_steps_of_its_envs(older_checkpoint, tmp_path):
    # two envs write two rows a step: a full ring's position is even, or the next step splits across the wrap
    state = older_checkpoint("td3_continuous_action_jax.py")
    assert state["replay_buffer"]["size"] == 200
    state["replay_buffer"] |= {"size": 300, "pos": 101, "data": np.zeros((300, 9), np.float32)}
    run = resumed("td3_continuous_action_jax.py", state, tmp_path)
    assert_refused_in_one_line(run, "td3_continuous_action_jax.py", "position (101)")


# ---------------------------------------------------------------- the Atari scripts' frame memory


FRAME_ATTACKS = {
    "nan reward": (lambda rb: rb | {"rewards": np.full_like(rb["rewards"], math.nan)}, "rewards hold a nan"),
    "position not at the size": (lambda rb: rb | {"pos": rb["pos"] - 1}, "position is not where its next frame"),
    "current frame not the newest": (lambda rb: rb | {"last": 0}, "current frame is not its newest"),
    "actions the game does not have": (lambda rb: rb | {"actions": np.full_like(rb["actions"], 7)}, "actions"),
}


@pytest.mark.parametrize("attack", list(FRAME_ATTACKS))
def test_dqn_atari_frame_memory_out_of_shape(attack, older_checkpoint, tmp_path):
    change, says = FRAME_ATTACKS[attack]
    state = older_checkpoint("dqn_atari.py")
    assert state["replay_buffer"]["pos"] == state["replay_buffer"]["size"] > 150 and state["replay_buffer"]["last"]
    state["replay_buffer"] = change(state["replay_buffer"])
    assert_refused_in_one_line(resumed("dqn_atari.py", state, tmp_path), "dqn_atari.py", says)


def test_qdagger_online_phase_without_its_observation(older_checkpoint, tmp_path):
    # was: accepted as an offline checkpoint's (obs None), then a TypeError when the online step stored None
    state = older_checkpoint("qdagger_dqn_atari_impalacnn.py")
    assert state["global_step"] == 275 and state["obs"] is not None
    state["obs"] = None
    run = resumed("qdagger_dqn_atari_impalacnn.py", state, tmp_path)
    assert_refused_in_one_line(run, "qdagger_dqn_atari_impalacnn.py", "obs")


def test_qdagger_offline_phase_with_an_empty_teacher_memory(older_checkpoint, tmp_path):
    # was: a ValueError traceback at the first batch drawn from nothing
    state = older_checkpoint("qdagger_dqn_atari_impalacnn.py")
    teacher = state["teacher_replay_buffer"]
    empty = {name: teacher[name][:0] for name in FrameReplayBuffer.ARRAYS}
    state |= {"global_step": 30, "teacher_replay_buffer": empty | {"pos": 0, "size": 0, "last": None}}
    run = resumed("qdagger_dqn_atari_impalacnn.py", state, tmp_path)
    assert_refused_in_one_line(run, "qdagger_dqn_atari_impalacnn.py", "teacher's memory is empty")


def test_qdagger_offline_phase_with_no_whole_transition_in_the_teacher_memory(older_checkpoint, tmp_path):
    # was: accepted; the offline phase adds nothing, so the first batch redrew its slots forever (the run hung)
    state = older_checkpoint("qdagger_dqn_atari_impalacnn.py")
    teacher = state["teacher_replay_buffer"]
    state |= {"global_step": 30, "teacher_replay_buffer": teacher | {"valid": np.zeros_like(teacher["valid"])}}
    run = resumed("qdagger_dqn_atari_impalacnn.py", state, tmp_path)
    assert_refused_in_one_line(run, "qdagger_dqn_atari_impalacnn.py", "holds no whole transition")


def filled_frame_memory(transitions: int, capacity: int = 10) -> FrameReplayBuffer:
    memory = FrameReplayBuffer(capacity, (2, 2), 2)
    frames = [np.full((2, 2, 2), i, np.uint8) for i in range(transitions + 1)]
    for i in range(transitions):
        memory.add(frames[i], frames[i + 1], 1, 1.0, False, episode_end=i % 5 == 4)
    return memory


@pytest.mark.parametrize("transitions", [0, 3, 5, 13, 40])
def test_frame_memory_takes_its_own_state_at_every_fill(transitions):
    """Before it wraps, when it has, at an episode's end (no current frame) and in one: what it saves, it takes."""
    memory = filled_frame_memory(transitions)
    restored = FrameReplayBuffer(10, (2, 2), 2)
    restored.load_state_dict(plain_data.loads(plain_data.dumps(memory.state_dict())))
    assert (restored.pos, restored.size, restored.last) == (memory.pos, memory.size, memory.last)
    assert np.array_equal(restored.frames, memory.frames) and np.array_equal(restored.valid, memory.valid)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"pos": 2}, "position is not where its next frame goes"),
        ({"last": 1}, "current frame is not its newest"),
        ({"rewards": np.full(9, math.inf, np.float32)}, "rewards hold a nan or an infinity"),
        ({"valid": np.zeros(9, bool)}, "holds no whole transition"),
    ],
)
def test_frame_memory_refuses_counters_that_disagree_and_leaves_itself_as_it_was(change, says):
    state = filled_frame_memory(7).state_dict()
    assert (state["pos"], state["size"], state["last"]) == (9, 9, 8)  # two episodes' frames, not wrapped, in the 2nd
    state |= change
    memory = filled_frame_memory(2)
    before = memory.state_dict()
    with pytest.raises(ValueError, match=says):
        memory.load_state_dict(state)
    assert (memory.pos, memory.size, memory.last) == (before["pos"], before["size"], before["last"])
