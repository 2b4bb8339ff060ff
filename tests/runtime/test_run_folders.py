"""Run folders: names never collide, even between processes racing for one; a folder has one writer at a time; a
run never writes through a symbolic link planted in a folder it was handed."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from cleanrl_utils.runtime import experiment, run_folder
from cleanrl_utils.runtime.experiment import Experiment
from tests.helpers import REPO, script_env
from tests.runtime.test_experiment import SCRIPT, Args, fails_with

NOW = 1_796_000_000


@pytest.fixture
def same_second(tmp_path, monkeypatch):
    """Runs start in a scratch folder, all in the same second."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(experiment.time, "time", lambda: NOW + 0.5)
    yield
    monkeypatch.undo()  # time again, before the writers are closed


def test_a_second_run_in_the_same_second_gets_a_folder_of_its_own(same_second, tmp_path):
    first = Experiment(Args(seed=3), SCRIPT)
    second = Experiment(Args(seed=3), SCRIPT)
    (tmp_path / "videos" / f"CartPole-v1__algo__3__{NOW}-3").mkdir(parents=True)  # a video folder counts too
    third = Experiment(Args(seed=3), SCRIPT)
    base = f"CartPole-v1__algo__3__{NOW}"
    assert (first.run_name, second.run_name, third.run_name) == (base, f"{base}-2", f"{base}-4")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [base, f"{base}-2", f"{base}-4"]
    # the documented name keeps its four parts: the suffix rides on the time
    assert second.run_name.split("__")[:3] == ["CartPole-v1", "algo", "3"]


RACE = """
import sys
import time as clock
from cleanrl_utils.runtime import experiment
from cleanrl_utils.runtime.experiment import Experiment
from tests.runtime.test_experiment import SCRIPT, Args
experiment.time.time = lambda: {now} + 0.5  # the same second for all
start = float(sys.argv[1])
while clock.monotonic() < start:  # all start claiming together
    pass
exp = Experiment(Args(seed=3), SCRIPT)
exp.start_logging()
exp.writer.close()
print(exp.run_name)
"""


def test_processes_racing_for_one_name_each_get_their_own_folder(tmp_path):
    """Runs started together with the same env id, exp name and seed (two benchmark runners on one experiment):
    each makes a folder of its own, none is refused or lost."""
    start = time.monotonic() + 3  # the interpreters start first, then all claim at once
    code = RACE.format(now=NOW)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(start)],
            cwd=tmp_path,
            env={**script_env(), "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(4)
    ]
    names = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        names.append(out.strip())
    assert len(set(names)) == 4
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(names)
    assert all(any(p.name.startswith("events.") for p in (tmp_path / "runs" / name).iterdir()) for name in names)


def test_a_folder_claimed_and_left_for_bad_input_is_removed(same_second, tmp_path, capsys):
    exp = Experiment(Args(seed=3), SCRIPT)
    assert (tmp_path / "runs" / exp.run_name).is_dir()
    fails_with(capsys, lambda: exp.require(False, "bad input found after the Experiment was made"))
    assert not (tmp_path / "runs").exists()  # nor is the runs/ folder it made left behind
    (tmp_path / "runs").mkdir()
    worker = Experiment(Args(seed=3), SCRIPT)  # a worker process of a multi-process run gives its folder up
    assert worker.start_logging(log=False) is None and list((tmp_path / "runs").iterdir()) == []


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    holder = run_folder.lock(tmp_path / "runs" / "r")
    started = time.monotonic()
    with pytest.raises(run_folder.RunFolderError) as refused:
        run_folder.lock(tmp_path / "runs" / "r")
    assert time.monotonic() - started < 1
    assert f"is being written by another run (pid {os.getpid()})" in str(refused.value)
    holder.release()
    run_folder.lock(tmp_path / "runs" / "r").release()  # free again once let go (a process that ends lets go too)


@pytest.mark.parametrize("link", ["runs/r", "runs/r/.writer.lock"])
def test_a_link_where_a_run_writes_is_refused(tmp_path, monkeypatch, link):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("keep me\n")
    (tmp_path / "runs" / "r").mkdir(parents=True, exist_ok=True) if link != "runs/r" else (tmp_path / "runs").mkdir()
    os.symlink(target / "precious" if link.endswith("lock") else target, tmp_path / link)
    with pytest.raises(run_folder.RunFolderError, match="symbolic link"):
        run_folder.lock(tmp_path / "runs" / "r")
    assert (target / "precious").read_text() == "keep me\n" and os.listdir(target) == ["precious"]


def wait_for(condition, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_two_resumes_of_one_folder_the_second_refused_at_once(tmp_path):
    """Real processes: a run killed after a checkpoint, resumed; a second resume of the folder meanwhile is refused
    in one line naming the first one's pid, within a second of the script's start (its imports done), and writes
    nothing."""
    from tests.contract.test_resume import start_in_background, wait_for_checkpoints

    args = ("--total-timesteps", "500000", "--num-steps", "128", "--checkpoint-frequency", "2")
    first = start_in_background("ppo.py", *args, cwd=tmp_path)
    wait_for_checkpoints(tmp_path, 1, first)
    first.kill()
    first.wait(timeout=60)
    (run_dir,) = (tmp_path / "runs").iterdir()
    lock = run_dir / run_folder.LOCK_FILE

    resumed = start_in_background("ppo.py", "--resume", f"runs/{run_dir.name}", cwd=tmp_path)
    try:
        wait_for(lambda: lock.read_text().strip() == str(resumed.pid) or resumed.poll() is not None)
        assert resumed.poll() is None, "the first resume ended before holding the folder"

        # the second resume, its clock started once torch, Gymnasium and cleanrl_utils are imported (the imports
        # are not the refusal; on a busy machine they alone vary by seconds)
        clock_file = tmp_path / "seconds.txt"
        code = (
            "import runpy, sys, time; import torch, gymnasium, tyro, cleanrl_utils.runtime.experiment; start = time.monotonic()\n"
            f"sys.argv = [{str(REPO / 'cleanrl' / 'ppo.py')!r}, '--resume', 'runs/{run_dir.name}']\n"
            f"try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            f"finally:\n    open({str(clock_file)!r}, 'w').write(str(time.monotonic() - start))\n"
        )
        second = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 2
        assert second.stderr.strip().splitlines() == [
            f"ppo.py: error: runs/{run_dir.name} is being written by another run (pid {resumed.pid}); "
            "one run at a time writes a run folder"
        ]
        assert float(clock_file.read_text()) < 1.0
        assert resumed.poll() is None, "the first resume goes on"
        events = [p.name for p in run_dir.glob("events.out.tfevents.*")]  # named after the pid of their writer
        assert all(name.split(".")[-2] in (str(first.pid), str(resumed.pid)) for name in events), events
    finally:
        resumed.kill()
        resumed.wait(timeout=60)


def test_a_resume_of_a_folder_with_a_linked_checkpoints_folder_is_refused(tmp_path, monkeypatch, capsys):
    """A handed-over run folder whose checkpoints/ points elsewhere: the resume writes nothing there."""
    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.runtime import plain_data

    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "checkpoint_1.pt").write_text("someone's file named like a checkpoint\n")
    exp = Experiment(Args(checkpoint_frequency=1), SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    saved = tmp_path / "saved.pt"
    saved.write_bytes(plain_data.dumps(ckpt.read(ckpt.find(f"runs/{exp.run_name}"))))
    shutil.rmtree(f"runs/{exp.run_name}/checkpoints")
    os.symlink(elsewhere, f"runs/{exp.run_name}/checkpoints")
    assert f"runs/{exp.run_name}/checkpoints is a symbolic link" in fails_with(
        capsys, lambda: Experiment(Args(resume=str(saved)), SCRIPT)
    )
    assert os.listdir(elsewhere) == ["checkpoint_1.pt"]
    with pytest.raises(ckpt.CheckpointError, match="symbolic link"):  # nor does a save write through it
        ckpt.save(f"runs/{exp.run_name}", 20, {"args": {}})


def test_a_second_writer_is_refused_before_the_checkpoint_is_read(tmp_path, monkeypatch, capsys):
    """The run name comes from the checkpoint's header alone: a resume of a folder held by another run is refused
    without reading the checkpoint's arrays (a replay memory can be gigabytes)."""
    from cleanrl_utils.runtime import checkpoint as ckpt

    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(checkpoint_frequency=1), SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    holder = run_folder.lock(f"runs/{exp.run_name}")
    monkeypatch.setattr(ckpt, "load", lambda path: pytest.fail("the checkpoint was read"))
    line = fails_with(capsys, lambda: Experiment(Args(resume=f"runs/{exp.run_name}"), SCRIPT))
    assert f"is being written by another run (pid {os.getpid()})" in line
    holder.release()


def test_a_second_writer_is_refused_before_the_slow_imports(tmp_path, monkeypatch):
    """`check_command_line` looks at the folder's lock before torch, JAX and Gymnasium are imported (each made
    unimportable here): the second resume of a folder is one line naming the holder's pid, at once, and the lock
    file still names the holder (the look writes nothing)."""
    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(checkpoint_frequency=1), SCRIPT)
    with exp:
        exp.start_logging()
        exp.save_checkpoint(10, {})
    holder = run_folder.lock(f"runs/{exp.run_name}")
    blocked = tmp_path / "blocked"
    for package in ("torch", "jax", "gymnasium", "envpool", "stable_baselines3"):
        (blocked / package).mkdir(parents=True)
        (blocked / package / "__init__.py").write_text(f"raise ImportError('{package} is imported')\n")
    env = script_env()
    env["PYTHONPATH"] = f"{blocked}{os.pathsep}{env['PYTHONPATH']}"
    try:
        for script in ("ppo.py", "td3_continuous_action_jax.py"):
            second = subprocess.run(
                [sys.executable, str(REPO / "cleanrl" / script), "--resume", f"runs/{exp.run_name}"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 2 and second.stderr.strip().splitlines() == [
                f"{script}: error: runs/{exp.run_name} is being written by another run (pid {os.getpid()}); "
                "one run at a time writes a run folder"
            ], second.stderr[-2000:]
        assert (tmp_path / "runs" / exp.run_name / run_folder.LOCK_FILE).read_text().strip() == str(os.getpid())
    finally:
        holder.release()
    assert run_folder.writer_of(f"runs/{exp.run_name}") is None  # let go: no writer, and the look takes nothing
    assert run_folder.writer_of("runs/no-such-run") is None and not (tmp_path / "runs" / "no-such-run").exists()


def test_a_nested_run_name_is_made_and_given_up_whole(tmp_path, monkeypatch):
    """Env ids such as dm_control/cartpole-balance-v0 put the run folder one level down: its parent is made for it,
    and a claim given up unused leaves neither behind."""
    monkeypatch.chdir(tmp_path)
    name, writer_lock = run_folder.claim("dm_control/cartpole-balance-v0__ppo__1__1")
    assert name == "dm_control/cartpole-balance-v0__ppo__1__1" and (tmp_path / "runs" / name).is_dir()
    run_folder.release_if_unused(name, writer_lock)
    assert not (tmp_path / "runs").exists()
