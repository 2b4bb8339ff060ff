"""qdagger_dqn_atari_impalacnn.py beyond the contract tests: its teacher (a dqn_atari.py model, local or from
the Hub), the distillation pieces, the networks and the size of its two memories."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from cleanrl import dqn_atari
from cleanrl import qdagger_dqn_atari_impalacnn as qdagger
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer
from tests.fixtures.fake_hub import FakeHub
from tests.fixtures.teachers import TEACHER_MODEL, save_teacher, teach_a_student
from tests.helpers import run_script, script_env

ENV_ID = "BreakoutNoFrameskip-v4"
HUB_REPO = f"cleanrl/{ENV_ID}-dqn_atari-seed1"  # the default teacher of Breakout
# a teacher score from one game, then a short online phase: enough to see the teacher at work
QUICK = ("--teacher-eval-episodes", "1", "--buffer-size", "1000", "--learning-starts", "100")
FAKE_ENV = type("E", (), {"action_space": gym.spaces.Discrete(4), "observation_space": gym.spaces.Box(0, 255, (4, 84, 84))})()


def frames(batch: int = 3) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)


@pytest.mark.extended  # 15 s of one core: CI runs it after the quick run
def test_a_model_saved_by_dqn_atari_teaches_the_student(tmp_path):
    # the IMPALA CNN's updates are most of the run's time, so on batches of 4
    teacher_path = teach_a_student(
        "dqn_atari.py", "qdagger_dqn_atari_impalacnn.py", "--batch-size", "4", cwd=tmp_path, timeout_s=600
    )

    # the re-declared teacher class reads dqn_atari.py's file and computes what dqn_atari.py's network does
    env = qdagger.make_env(ENV_ID, 0, False, "unused")()
    teacher = qdagger.load_teacher(str(teacher_path), "dqn_atari", env, "cpu")
    original = dqn_atari.QNetwork(env)
    original.load_state_dict(torch.load(teacher_path, weights_only=True))
    env.close()
    with torch.no_grad():
        torch.testing.assert_close(teacher(frames()), original(frames()))


@pytest.fixture
def hub():
    hub = FakeHub().start()
    yield hub
    hub.stop()


def hub_env(hub: FakeHub, tmp_path, **extra: str) -> dict[str, str]:
    return script_env(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf_home"), **extra)


@pytest.mark.extended  # 21 s of one core: CI runs it after the quick run
def test_default_teacher_comes_from_the_hub_then_from_the_offline_cache(hub, tmp_path):
    hub.repos[HUB_REPO] = {"dqn_atari.cleanrl_model": TEACHER_MODEL.read_bytes()}
    args = (*QUICK, "--teacher-steps", "0", "--offline-steps", "0", "--total-timesteps", "5")
    online = run_script("qdagger_dqn_atari_impalacnn.py", *args, cwd=tmp_path / "a", env=hub_env(hub, tmp_path))
    assert online.returncode == 0, online.stderr[-3000:]
    assert ("GET", f"/{HUB_REPO}/resolve/main/dqn_atari.cleanrl_model") in hub.requests

    hub.stop()  # the Hub gone, HF_HUB_OFFLINE=1: the cached teacher, the same score
    offline = run_script(
        "qdagger_dqn_atari_impalacnn.py", *args, cwd=tmp_path / "b", env=hub_env(hub, tmp_path, HF_HUB_OFFLINE="1")
    )
    assert offline.returncode == 0, offline.stderr[-3000:]
    teacher_scores = [r.scalars()["charts/teacher/avg_episodic_return"] for r in (online, offline)]
    assert teacher_scores[0] == teacher_scores[1]


@pytest.mark.parametrize(
    ("args", "offline", "expected"),
    [
        # these two (5 s each of one core) are `extended`: CI runs them after the quick run
        pytest.param(
            (),
            False,
            f"teacher: Hub repo {HUB_REPO} not found (or private without a token): give --teacher-model-path",
            marks=pytest.mark.extended,
        ),
        pytest.param((), True, "HF_HUB_OFFLINE is set and it is not in the local Hub cache", marks=pytest.mark.extended),
        (("--teacher-model-path", "a/b/c"), False, "neither a model file nor a Hub repo id"),
    ],
    ids=["no such repo", "offline and not cached", "not a repo id"],
)
def test_hub_teacher_errors_are_one_clear_line(hub, tmp_path, args, offline, expected):
    extra = {"HF_HUB_OFFLINE": "1"} if offline else {}
    run = run_script("qdagger_dqn_atari_impalacnn.py", *args, cwd=tmp_path, env=hub_env(hub, tmp_path, **extra))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qdagger_dqn_atari_impalacnn.py: error: ") and expected in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("case", ["not a model file", "another game's teacher", "not a Q-network"])
def test_local_teacher_errors_are_one_clear_line(case, tmp_path):
    path = tmp_path / "teacher.cleanrl_model"
    if case == "not a model file":
        path.write_text("not a model\n")
        expected = "is not a model file saved by dqn_atari.py"
    elif case == "another game's teacher":  # Pong has 6 actions, Breakout 4
        save_teacher(path, "PongNoFrameskip-v4")
        expected = f"does not fit {ENV_ID}: Error(s) in loading state_dict"
    else:
        torch.save([1, 2, 3], path)
        expected = f"does not fit {ENV_ID}"
    env = qdagger.make_env(ENV_ID, 0, False, "unused")()
    with pytest.raises(ValueError) as error:  # the script ends with it as its one line
        qdagger.load_teacher(str(path), "dqn_atari", env, "cpu")
    env.close()
    assert expected in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_distillation_coefficient_follows_the_student_to_the_teacher():
    assert qdagger.distill_coefficient([5.0] * 9, 10.0) == 1.0  # fewer than 10 games: full distillation
    assert qdagger.distill_coefficient([5.0] * 10, 10.0) == pytest.approx(0.5)
    assert qdagger.distill_coefficient([2.0, 4.0] * 5, 10.0) == pytest.approx(0.7)
    assert qdagger.distill_coefficient([12.0] * 10, 10.0) == 0.0  # better than the teacher: none
    assert qdagger.distill_coefficient([3.0] * 10, 0.0) == 0.0  # a teacher that never scores


def test_distillation_loss_is_the_kl_of_the_tempered_policies():
    torch.manual_seed(0)
    teacher, student = torch.randn(8, 4), torch.randn(8, 4, requires_grad=True)
    for temperature in (1.0, 0.5):
        expected = kl_divergence(Categorical(logits=teacher / temperature), Categorical(logits=student / temperature)).mean()
        torch.testing.assert_close(qdagger.kl_divergence_with_logits(teacher / temperature, student / temperature), expected)
    assert qdagger.kl_divergence_with_logits(teacher, teacher).item() == pytest.approx(0.0, abs=1e-6)
    optimizer = torch.optim.Adam([student], lr=0.1)
    first = qdagger.kl_divergence_with_logits(teacher, student).item()
    for _ in range(100):
        loss = qdagger.kl_divergence_with_logits(teacher, student)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first / 20  # the gradient pulls the student's policy toward the teacher's


def test_student_is_an_impala_cnn_on_frames_divided_by_255():
    student = qdagger.QNetwork(FAKE_ENV)
    obs = frames()
    assert student(obs).shape == (3, 4)
    torch.testing.assert_close(student(obs), student.network(obs.float() / 255.0))
    flat = next(m for m in student.network if isinstance(m, torch.nn.Linear))
    assert flat.in_features == 32 * 11 * 11 and flat.out_features == 256  # 84 -> 42 -> 21 -> 11
    assert [seq.conv.out_channels for seq in student.network if isinstance(seq, qdagger.ConvSequence)] == [16, 32, 32]


def test_both_default_memories_fit_in_24_gib():
    rb = FrameReplayBuffer(1000, (84, 84), 4)
    per_slot = rb.nbytes / rb.capacity
    assert per_slot == 84 * 84 + 8
    args = qdagger.Args()
    assert args.buffer_size == 1_000_000
    total = 2 * (args.buffer_size + 2 * 4) * per_slot  # the student's memory and the teacher's
    assert total < 14 * 2**30 and np.isclose(total / 2**30, 13.16, atol=0.01)
