"""Red team of `Experiment.fail` closing what a run opened: a refused --resume (or any bad input found after logging
started) closes the TensorBoard writer and the envs, lets the folder's lock go, says one line and exits with code 2;
and the suite's guard (`no_event_writer_left_open`, tests/conftest.py) fails a test that leaves a writer open.

Each test here was first a break of that claim (an envs close that raises, a full disk at the last flush, a video
recorder restored mid-clip, a refused resume's purge step hiding later steps, a tracked refusal re-sending videos, an
empty video folder left, a writer leaked by a module fixture), kept once fixed. A test that finds a writer left open
closes it itself before asserting, so that the guard reports the break here, not as a teardown error.
"""

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import plain_data, run_folder
from cleanrl_utils.runtime.experiment import Experiment
from cleanrl_utils.tensorboard_reader import read_texts
from tests.helpers import REPO, event_writer_threads, read_wandb_history_keys, run_in_process, stop_wandb_service
from tests.runtime.test_experiment import SCRIPT, Args, Closable


def refused(run, script: str = "ppo.py") -> str:
    assert run.returncode == 2, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith(f"{script}: error: ")]
    assert len(errors) == 1, run.stderr
    return errors[0]


def lock_is_free(folder: Path) -> bool:
    try:
        run_folder.lock(folder).release()
    except run_folder.RunFolderError:
        return False
    return True


def record_video_layer(snapshot) -> dict:
    """The RecordVideo layer of a checkpoint's env snapshot."""
    if isinstance(snapshot, dict):
        if str(snapshot.get("class", "")).endswith("RecordVideo"):
            return snapshot
        children = snapshot.values()
    elif isinstance(snapshot, list):
        children = snapshot
    else:
        return {}
    return next((found for child in children if (found := record_video_layer(child))), {})


# ---------------------------------------------------------------- a real script refusing its checkpoint


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A ppo.py run filming env 0, a checkpoint each iteration (steps 8 and 16: the first saved while episode 0 is
    being filmed): its cwd, run folder, and a copy of that folder as the run left it. ~3 s."""
    cwd = tmp_path_factory.mktemp("filmed")
    args = ("--total-timesteps", "16", "--num-steps", "8", "--num-envs", "1", "--checkpoint-frequency", "1")
    run = run_in_process("ppo.py", *args, "--capture-video", cwd=cwd, timeout_s=240)
    assert run.returncode == 0, run.stderr[-2000:]
    pristine = tmp_path_factory.mktemp("pristine") / run.run_dir.name
    shutil.copytree(run.run_dir, pristine)
    return cwd, run.run_dir, pristine


def tampered(run_dir: Path, to: Path) -> Path:
    """The run's first checkpoint with an iteration no run reaches: refused by `exp.saved_iteration`, after
    `start_logging` and `restore_run_state` (envs restored)."""
    state = ckpt.read(ckpt.checkpoints(run_dir / "checkpoints")[0])
    state["iteration"] = 10**6
    to.write_bytes(plain_data.dumps(state))
    return to


def test_refused_resume_closes_the_writer_lets_the_folder_go_and_keeps_the_events(trained, tmp_path):
    """Refused after start_logging (the snapshot's video folder is not this cwd's): one line, exit 2, no writer
    thread left, the lock free for the next attempt."""
    _, run_dir, _ = trained
    checkpoint = tmp_path / "checkpoint_8.pt"
    shutil.copy(ckpt.checkpoints(run_dir / "checkpoints")[0], checkpoint)
    before = event_writer_threads()
    run = run_in_process("ppo.py", "--resume", str(checkpoint), cwd=tmp_path)
    assert run.stderr.splitlines() == [refused(run)] and "RecordVideo.video_folder" in run.stderr
    assert not event_writer_threads() - before
    assert lock_is_free(tmp_path / "runs" / run_dir.name)


def test_refusing_a_checkpoint_saved_mid_clip_says_nothing_after_its_line(trained):
    cwd, run_dir, _ = trained
    assert record_video_layer(ckpt.read(ckpt.checkpoints(run_dir / "checkpoints")[0])["envs"])["values"]["recording"]
    with warnings.catch_warnings():  # printed on stderr, as in a process of its own (pytest records them)
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )
        run = run_in_process("ppo.py", "--resume", str(tampered(run_dir, cwd / "bad.pt")), cwd=cwd)
    line = refused(run)
    assert "iteration (1000000)" in line
    assert run.stderr.splitlines()[-1] == line, run.stderr  # (a warning of make_envs may come before it)


def test_refused_resume_leaves_the_runs_tensorboard_view_as_it_was(trained, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, _, pristine = trained
    run_dir = tmp_path / "runs" / pristine.name
    shutil.copytree(pristine, run_dir)

    def steps_shown() -> list[int]:
        view = EventAccumulator(str(run_dir))
        view.Reload()
        return [event.step for event in view.Scalars("losses/value_loss")]

    assert steps_shown() == [8, 16]
    refused(run_in_process("ppo.py", "--resume", str(tampered(run_dir, tmp_path / "bad.pt")), cwd=tmp_path))
    assert steps_shown() == [8, 16]


# ---------------------------------------------------------------- Experiment in-process


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fails_in_one_line(capsys, call) -> str:
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("algo.py: error: "), lines
    return lines[0]


class CloseFails(Closable):
    def close(self):
        raise RuntimeError("the env's close failed")


def test_fail_closes_the_writer_when_closing_the_envs_raises(scratch, capsys):
    exp = Experiment(Args(), SCRIPT)
    exp.envs = CloseFails()
    before = event_writer_threads()
    exp.start_logging()
    fails_in_one_line(capsys, lambda: exp.fail("--resume: refused"))
    left = len(event_writer_threads() - before)  # writers still running
    exp.writer.close()  # (closed here, so that the guard does not report it too)
    assert left == 0


def test_a_run_whose_envs_fail_to_close_still_closes_the_writer_and_lets_the_folder_go(scratch):
    exp = Experiment(Args(), SCRIPT)
    exp.envs = CloseFails()
    before = event_writer_threads()
    with pytest.raises(RuntimeError, match="close failed"), exp:
        exp.start_logging()
    left, free = len(event_writer_threads() - before), not exp.writer_lock.held
    exp.writer.close()
    exp.writer_lock.release()
    assert left == 0 and free


def test_fail_stops_the_writer_thread_when_its_last_flush_meets_a_full_disk(scratch, capsys, monkeypatch):
    from tensorboard.summary.writer import record_writer

    real_flush = record_writer.RecordWriter.flush

    def full_in_the_run_thread(self):  # the writer's thread flushes its first event, the disk is full after
        if threading.current_thread() is threading.main_thread():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_flush(self)

    exp = Experiment(Args(), SCRIPT)
    before = event_writer_threads()
    exp.start_logging()
    monkeypatch.setattr(record_writer.RecordWriter, "flush", full_in_the_run_thread)
    fails_in_one_line(capsys, lambda: exp.fail("--resume: refused"))
    left = len(event_writer_threads() - before)  # writers still running
    monkeypatch.undo()
    with contextlib.suppress(OSError):  # "Writer is closed" once the fix has stopped it
        exp.writer.close()
    assert left == 0


def test_fail_before_logging_closes_the_envs_and_removes_the_folder(scratch, capsys):
    exp = Experiment(Args(), SCRIPT)
    envs = exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]), "CartPole-v1")
    fails_in_one_line(capsys, lambda: exp.fail("bad input"))
    assert envs.closed and not (scratch / "runs").exists()


def test_fail_before_logging_with_a_video_recorder_leaves_no_folder(scratch, capsys):
    exp = Experiment(Args(), SCRIPT)

    def filmed():
        env = gym.wrappers.RecordVideo(gym.make("CartPole-v1", render_mode="rgb_array"), f"videos/{exp.run_name}")
        return gym.vector.SyncVectorEnv([lambda: env])

    exp.make_envs(filmed, "CartPole-v1")
    fails_in_one_line(capsys, lambda: exp.fail("bad input"))
    assert not (scratch / "runs").exists()
    assert not (scratch / "videos").exists(), "nor videos/ with the recorder's empty folder in it"


def test_fail_before_logging_keeps_the_other_runs_videos(scratch, capsys):
    (scratch / "videos" / "earlier_run").mkdir(parents=True)
    exp = Experiment(Args(), SCRIPT)
    exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.wrappers.RecordVideo(
        gym.make("CartPole-v1", render_mode="rgb_array"), f"videos/{exp.run_name}")]), "CartPole-v1")  # fmt: skip
    fails_in_one_line(capsys, lambda: exp.fail("bad input"))
    assert [p.name for p in (scratch / "videos").iterdir()] == ["earlier_run"]


@pytest.fixture
def offline_wandb(scratch, monkeypatch) -> Path:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield scratch
    stop_wandb_service()


def test_fail_inside_the_with_block_of_a_tracked_run_closes_once_and_exits_2(offline_wandb, capsys):
    """An UploadError after training: fail() closes and finishes W&B, then __exit__ closes nothing twice."""
    import wandb

    exp = Experiment(Args(track=True), SCRIPT)
    envs = exp.make_envs(lambda: gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]), "CartPole-v1")
    before = event_writer_threads()

    def upload_fails():
        with exp:
            exp.start_logging().add_scalar("charts/x", 1.0, 1)
            exp.fail("upload to the Hub failed")

    assert "upload to the Hub failed" in fails_in_one_line(capsys, upload_fails)
    assert envs.closed and not event_writer_threads() - before
    assert wandb.run is None and wandb.patched["tensorboard"] == []
    assert "|env_id|CartPole-v1|" in read_texts(offline_wandb / "runs" / exp.run_name)["hyperparameters"]
    assert lock_is_free(offline_wandb / "runs" / exp.run_name)


def test_tracked_refusal_sends_no_videos_to_wandb(offline_wandb, capsys):
    exp = Experiment(Args(track=True), SCRIPT)
    videos = offline_wandb / "videos" / exp.run_name  # the resumed run's, filmed before its checkpoint
    videos.mkdir(parents=True)
    (videos / "rl-video-episode-0.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    exp.start_logging().add_scalar("charts/x", 1.0, 1)
    fails_in_one_line(capsys, lambda: exp.fail("--resume: refused"))
    stop_wandb_service()  # the offline run file written whole
    (run_file,) = offline_wandb.glob("wandb/offline-run-*/run-*.wandb")
    assert not {key for key in read_wandb_history_keys(run_file) if key.startswith("videos")}


# ---------------------------------------------------------------- the suite's guard, in a pytest of its own

LEAKS = """
import pytest
from tensorboard.summary.writer.event_file_writer import EventFileWriter


@pytest.fixture(scope="module")
def module_writer(tmp_path_factory):
    return EventFileWriter(str(tmp_path_factory.mktemp("m")))  # never closed: a run made in a shared fixture


def test_leaks_in_its_body(tmp_path):
    EventFileWriter(str(tmp_path))


def test_closes_its_writer(tmp_path):
    EventFileWriter(str(tmp_path)).close()


def test_uses_a_module_fixture_that_leaks(module_writer):
    pass
"""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> dict[str, set[str]]:
    """Outcomes (call and teardown) of each test of LEAKS run under tests/conftest.py's guard (a pytest process of its own, ~2 s)."""
    folder = tmp_path_factory.mktemp("guarded")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")  # the suite's own
    (folder / "test_leaks.py").write_text(textwrap.dedent(LEAKS))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:randomly", "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            outcomes.setdefault(rest.split("::")[1].split(" ")[0], set()).add(word)
    assert len(outcomes) == 3, proc.stdout[-3000:] + proc.stderr[-2000:]
    return outcomes


def test_guard_fails_a_test_that_leaves_a_writer_open(guarded):
    assert "ERROR" in guarded["test_leaks_in_its_body"]
    assert guarded["test_closes_its_writer"] == {"PASSED"}


def test_guard_reports_a_writer_left_open_by_a_module_fixture(guarded):
    assert guarded["test_uses_a_module_fixture_that_leaks"] != {"PASSED"}
