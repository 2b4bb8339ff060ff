"""Red-team checks of the benchmark runner's continuation (`--log-dir` again) and of its process hygiene.

Each test attacks one claim of docs/get-started/benchmark-utility.md ("Stopping it", "Continuing a stopped
benchmark", "Auto-tag"). A finding the runner gets wrong is marked `xfail(strict=True)` with the finding as its
reason, so that the fix flips it; every finding so far is fixed, and its test now guards the fix. Most runs are a
small fake training script; the two real-script checks are `extended`.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cleanrl_utils.benchmark import build_runs
from tests.helpers import REPO, process_is_alive, run_benchmark, script_env

FAKE = r"""
import argparse, os, signal, subprocess, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--env-id")
parser.add_argument("--seed", type=int)
parser.add_argument("--resume")
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--record")  # a folder for the pids this run wants the test to know
parser.add_argument("--fail-fresh", action="store_true")  # leaves a checkpoint and fails; resumed, it succeeds
parser.add_argument("--cut-short", action="store_true")  # the checkpoint it leaves is empty: cut short
parser.add_argument("--slow-stop", type=float, default=0.0)  # seconds it takes to stop on SIGTERM
parser.add_argument("--ignore-term", action="store_true")
parser.add_argument("--grandchild", action="store_true")  # starts `sleep`, which it never stops itself
parser.add_argument("--exit-then-kill-runner", action="store_true")
args = parser.parse_args()

name = f"{args.env_id}__fake__{args.seed}"
os.makedirs(f"runs/{name}/checkpoints", exist_ok=True)
with open(os.environ["CLEANRL_RUN_NAME_FILE"], "w") as f:
    f.write(name + "\n")
print(f"resumed from {args.resume}" if args.resume else f"started {name}", flush=True)
print("OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "<unset>"), flush=True)
if args.record:
    pid_file = os.path.join(args.record, f"run-{args.seed}.pid")
    if args.resume and os.path.exists(pid_file):
        old = int(open(pid_file).read())
        try:
            alive = open(f"/proc/{old}/stat").read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            alive = False
        print(f"overlap: the earlier run {old} is still alive" if alive else "no overlap", flush=True)
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
if args.slow_stop:
    def stop(*_):
        time.sleep(args.slow_stop)
        print("stopped", flush=True)
        sys.exit(130)
    signal.signal(signal.SIGTERM, stop)
if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if args.fail_fresh or args.cut_short:
    with open(f"runs/{name}/checkpoints/checkpoint_100.pt", "w") as f:
        f.write("" if args.cut_short else "a checkpoint")
if args.grandchild:
    grandchild = subprocess.Popen(["sleep", "60"])
    with open(os.path.join(args.record, f"grandchild-{args.seed}.pid"), "w") as f:
        f.write(str(grandchild.pid))
if args.exit_then_kill_runner and not args.resume:
    # the runner is killed after this run exited with 0 and before it noted so: a watcher in a session of its own
    # SIGKILLs the runner once this run has ended; the runner is stopped meanwhile, so it cannot note the end first.
    # The runner is the nearest ancestor started as `-m cleanrl_utils.benchmark` (a supervisor may stand between)
    runner = os.getppid()
    while b"\0cleanrl_utils.benchmark\0" not in open(f"/proc/{runner}/cmdline", "rb").read():
        runner = int(open(f"/proc/{runner}/stat").read().rsplit(")", 1)[1].split()[1])
        assert runner > 1, "no runner among this run's ancestors"
    watcher = (
        "import os, signal, sys, time\n"
        "def ended(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] == 'Z'\n"
        "    except OSError:\n"
        "        return True\n"
        "while not ended(sys.argv[1]):\n"
        "    time.sleep(0.001)\n"
        "os.kill(int(sys.argv[2]), signal.SIGKILL)\n"
    )
    subprocess.Popen([sys.executable, "-c", watcher, str(os.getpid()), str(runner)], start_new_session=True)
    os.kill(runner, signal.SIGSTOP)
    print("finished", flush=True)
    sys.exit(0)
time.sleep(0 if args.resume else args.sleep)  # a resumed run ends at once
if args.fail_fresh and not args.resume:
    sys.exit(3)
if args.cut_short and not args.resume:
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.fixture
def fake(tmp_path: Path) -> str:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    return shlex.join([sys.executable, str(script)])


def bench(cwd: Path, command: str, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One start of a one-run benchmark (env A-v1, seed 1) with its logs in cwd/logs, untagged unless flags say."""
    flags = flags if any("auto-tag" in flag for flag in flags) else (*flags, "--no-auto-tag")
    return run_benchmark("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs",
                         "--command", command, *flags, cwd=cwd, env=env)  # fmt: skip


def start_bench(cwd: Path, command: str, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1",
         "--log-dir", "logs", "--no-auto-tag", "--command", command, *flags],
        cwd=cwd, env=env or script_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def log_of(cwd: Path) -> str:
    return (cwd / "logs" / "000__A-v1__seed1.log").read_text()


def ledger_statuses(cwd: Path) -> list[str]:
    return [entry["status"] for entry in json.loads((cwd / "logs" / "benchmark.json").read_text())["runs"].values()]


def kill_pids_in(record: Path, pattern: str) -> None:
    """SIGKILL what this test's runs started and left (pids they wrote under `record`)."""
    for path in record.glob(pattern):
        try:
            os.kill(int(path.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


# --- claim 1: started again, finished runs are skipped, the others resumed or restarted -----------------------


def test_run_exited_0_just_before_runner_was_killed_is_not_rerun(tmp_path, fake):
    command = f"{fake} --exit-then-kill-runner"
    runner = start_bench(tmp_path, command)
    try:
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == -signal.SIGKILL
    assert "finished" in log_of(tmp_path)  # the run got to its end and exited with 0
    second = bench(tmp_path, command)
    assert "000__A-v1__seed1.log: finished earlier" in second.stderr, second.stderr
    assert log_of(tmp_path).count("$ ") == 1, "the finished run was started a second time"


def test_a_run_whose_only_checkpoint_is_cut_short_starts_again(tmp_path, fake):
    from cleanrl_utils.runtime import checkpoint

    command = f"{fake} --cut-short"
    assert bench(tmp_path, command).returncode == 1
    with pytest.raises(checkpoint.CheckpointError, match="cut short"):  # what a real script's --resume makes of it
        checkpoint.load(tmp_path / "runs" / "A-v1__fake__1")
    second = bench(tmp_path, command)
    assert "000__A-v1__seed1.log: failed; starting again" in second.stderr, second.stderr


@pytest.mark.parametrize("content", ["", "..", "../", "/tmp", "runs/A-v1__fake__1", None])
def test_a_run_file_that_names_no_plain_run_folder_means_starting_again(tmp_path, fake, monkeypatch, content):
    """A `.run` file missing, empty, `..`, a path or an absolute path: never resumed from anywhere but runs/<name>."""
    from cleanrl_utils.benchmark.ledger import Ledger

    command = f"{fake} --fail-fresh"
    assert bench(tmp_path, command).returncode == 1
    run_file = tmp_path / "logs" / "000__A-v1__seed1.run"
    if content is None:
        run_file.unlink()
    else:
        run_file.write_text(content + "\n")
    monkeypatch.chdir(tmp_path)
    plan = Ledger(Path("logs")).plan(build_runs([*shlex.split(command)], ["A-v1"], [1]))
    assert "--resume" not in plan.runs[0].argv
    assert plan.found == [
        "000__A-v1__seed1.log: failed; starting again (it made no run folder; --checkpoint-frequency makes runs resumable)"
    ]


def test_a_run_folder_deleted_between_starts_means_starting_again(tmp_path, fake):
    command = f"{fake} --fail-fresh"
    assert bench(tmp_path, command).returncode == 1
    (tmp_path / "runs" / "A-v1__fake__1" / "checkpoints" / "checkpoint_100.pt").unlink()
    (tmp_path / "runs" / "A-v1__fake__1" / "checkpoints").rmdir()
    (tmp_path / "runs" / "A-v1__fake__1").rmdir()
    second = bench(tmp_path, command)
    assert "000__A-v1__seed1.log: failed; starting again (runs/A-v1__fake__1 has no checkpoint" in second.stderr
    assert "resumed from" not in log_of(tmp_path)


@pytest.mark.parametrize("content", ["", '{"code": null, "runs": {"x": {"log": '])
def test_a_truncated_ledger_is_refused_in_one_line(tmp_path, fake, content):
    assert bench(tmp_path, fake).returncode == 0
    (tmp_path / "logs" / "benchmark.json").write_text(content)
    second = bench(tmp_path, fake)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert "cannot read logs/benchmark.json" in second.stderr


@pytest.mark.parametrize("log", [None, 5, "../escaped.log", "/ABS/escaped.log"])
def test_a_hand_edited_ledger_log_name_is_refused_in_one_line(tmp_path, fake, log):
    assert bench(tmp_path, fake).returncode == 0
    ledger = tmp_path / "logs" / "benchmark.json"
    data = json.loads(ledger.read_text())
    (entry,) = data["runs"].values()
    entry.update(log=log.replace("/ABS", str(tmp_path)) if isinstance(log, str) else log, status="failed")
    ledger.write_text(json.dumps(data))
    second = bench(tmp_path, fake)
    assert not list(tmp_path.glob("escaped.*")), "the runner wrote outside its log folder"
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr


def test_a_log_folder_whose_ledger_was_deleted_is_not_taken_for_a_new_one(tmp_path, fake):
    assert bench(tmp_path, fake).returncode == 0
    (tmp_path / "logs" / "benchmark.json").unlink()
    other = bench(tmp_path, f"{fake} --sleep 0")
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert log_of(tmp_path).count("$ ") == 1


def test_continued_elsewhere_does_not_restart_checkpointed_runs(tmp_path, fake):
    first_cwd, other_cwd = tmp_path / "first", tmp_path / "other"
    first_cwd.mkdir(), other_cwd.mkdir()
    command = f"{fake} --fail-fresh"
    assert bench(first_cwd, command).returncode == 1
    args = ("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1", "--no-auto-tag", "--command", command)
    second = run_benchmark(*args, "--log-dir", str(first_cwd / "logs"), cwd=other_cwd)
    assert second.returncode == 2 or "resuming from" in second.stderr, second.stderr


# --- claim 1: the code version (auto-tag) --------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository tagged v1, whose runs/ and logs/ are ignored, with a subfolder `sub`."""
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / ".gitignore").write_text("runs/\nlogs/\n")
    (repo / "sub" / "keep.txt").write_text("")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "tag", "v1")
    return repo


def test_runs_started_without_auto_tag_are_not_continued_on_other_code(repo, fake):
    command = f"{fake} --fail-fresh"
    assert bench(repo, command, "--no-auto-tag").returncode == 1
    (repo / "algo.py").write_text("lr = 1e-3\n")
    edited = bench(repo, command, "--auto-tag")
    assert edited.returncode == 2 and "holds runs of the code at" in edited.stderr, edited.stderr


def test_runs_are_not_continued_on_edited_code_without_the_tag(repo, fake):
    command = f"{fake} --fail-fresh"
    assert bench(repo, command, "--auto-tag").returncode == 1
    (repo / "algo.py").write_text("lr = 1e-3\n")
    edited = bench(repo, command, "--no-auto-tag")
    assert edited.returncode == 2 and "holds runs of the code at v1" in edited.stderr, edited.stderr


def test_auto_tag_from_a_subfolder_sees_a_new_file_elsewhere(repo, monkeypatch):
    from cleanrl_utils.benchmark import git_tag

    (repo / "helpers.py").write_text("lr = 1e-3\n")
    monkeypatch.chdir(repo)
    assert git_tag() == "v1-dirty"  # from the root, it is seen
    monkeypatch.chdir(repo / "sub")
    assert git_tag() == "v1-dirty"


@pytest.mark.parametrize("name", ["résultats", 'lo"gs'])
def test_auto_tag_does_not_count_its_own_log_folder_of_any_name(repo, monkeypatch, name):
    from cleanrl_utils.benchmark import git_tag

    monkeypatch.chdir(repo)
    (repo / name).mkdir()
    (repo / name / ".benchmark.lock").write_text("")  # what the runner writes before it computes the tag
    assert git_tag(outside=Path(name)) == "v1"


def test_auto_tag_does_not_count_its_own_log_folder_given_through_a_link(repo, monkeypatch):
    from cleanrl_utils.benchmark import git_tag

    monkeypatch.chdir(repo)
    (repo / "bench").mkdir()
    (repo / "bench" / "benchmark.json").write_text("{}")
    (repo.parent / "link").symlink_to(repo / "bench")
    assert git_tag(outside=repo.parent / "link") == "v1"
    assert git_tag(outside=Path("bench")) == "v1"


# --- claim 2: one benchmark per log folder ------------------------------------------------------------------


def test_the_lock_holds_whatever_path_names_the_log_folder(tmp_path, fake):
    """Relative, absolute, with a trailing slash, through a symbolic link, or from a subfolder: the same folder."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to("logs")
    first = start_bench(tmp_path, f"{fake} --sleep 30")
    try:
        wait_for(lambda: (tmp_path / "logs" / "000__A-v1__seed1.run").exists(), 30, "the first run")
        args = ("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1", "--no-auto-tag", "--command", f"{fake} --sleep 30")
        for cwd, log_dir in [(tmp_path, "logs/"), (tmp_path, str(tmp_path / "logs")), (tmp_path, "link"),
                             (tmp_path / "sub", "../logs"), (tmp_path / "sub", str(tmp_path / "link"))]:  # fmt: skip
            second = run_benchmark(*args, "--log-dir", log_dir, cwd=cwd)
            assert second.returncode == 2 and f"in use by another benchmark (pid {first.pid})" in second.stderr, log_dir
        assert log_of(tmp_path).count("$ ") == 1
    finally:
        first.kill()
        first.wait()


def test_restart_after_a_kill_does_not_overlap_runs_still_stopping(tmp_path, fake):
    record = tmp_path / "record"
    record.mkdir()
    command = f"{fake} --fail-fresh --slow-stop 12 --sleep 60 --record {record}"
    runner = start_bench(tmp_path, command)
    first_run = None
    try:
        wait_for(lambda: (record / "run-1.pid").exists(), 30, "the run")
        time.sleep(0.3)  # its SIGTERM handler is set
        first_run = int((record / "run-1.pid").read_text())
        runner.kill()
        runner.wait()
        second = bench(tmp_path, command)
        log = log_of(tmp_path)
        assert "resumed from" in log or second.returncode == 2, second.stderr
        assert second.returncode == 2 or "overlap:" not in log, log  # the fake says "no overlap" when there is none
    finally:
        runner.kill() if runner.poll() is None else None
        kill_pids_in(record, "*.pid")
        if first_run is not None and process_is_alive(first_run):
            os.kill(first_run, signal.SIGKILL)


# --- claim 3: a killed runner leaves no run behind ---------------------------------------------------------------


def test_a_killed_runner_leaves_no_grandchild_behind(tmp_path, fake):
    record = tmp_path / "record"
    record.mkdir()
    runner = start_bench(tmp_path, f"{fake} --grandchild --sleep 60 --record {record}")
    try:
        wait_for(lambda: (record / "grandchild-1.pid").exists(), 30, "the run's child")
        grandchild = int((record / "grandchild-1.pid").read_text())
        runner.kill()
        runner.wait()
        wait_for(lambda: not process_is_alive(grandchild), 10, f"the run's child {grandchild} to end")
    finally:
        runner.kill() if runner.poll() is None else None
        kill_pids_in(record, "*.pid")


def test_a_second_sigterm_stops_runs_that_ignore_the_first_at_once(tmp_path, fake):
    record = tmp_path / "record"
    record.mkdir()
    runner = start_bench(tmp_path, f"{fake} --ignore-term --sleep 60 --record {record}")
    try:
        wait_for(lambda: (record / "run-1.pid").exists(), 30, "the run")
        run = int((record / "run-1.pid").read_text())
        runner.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        sent = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=30)
        assert runner.returncode == 143 and time.monotonic() - sent < 3, stderr
        assert not process_is_alive(run)
        assert ledger_statuses(tmp_path) == ["stopped"]
    finally:
        runner.kill() if runner.poll() is None else None
        kill_pids_in(record, "*.pid")


# --- claim 5: exact continuation ---------------------------------------------------------------------------------


def test_a_continued_run_keeps_the_thread_count_it_started_with(tmp_path, fake):
    env = {k: v for k, v in script_env().items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    command = f"{fake} --fail-fresh"
    run_benchmark("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "2", "--log-dir", "logs", "--no-auto-tag",
                  "--command", command, cwd=tmp_path, env=env)  # fmt: skip
    assert bench(tmp_path, command, env=env).returncode == 0  # --workers 1 now
    seen = [line for line in log_of(tmp_path).splitlines() if line.startswith("OMP_NUM_THREADS=")]
    assert len(seen) == 2 and seen[0] == seen[1], seen


def real_benchmark(cwd: Path, command: str, workers: int, env: dict[str, str], cpus=None) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "CartPole-v1", "--num-seeds", "1",
         "--workers", str(workers), "--log-dir", "logs", "--no-auto-tag", "--command", command],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )  # fmt: skip


def interrupted_and_reference(tmp_path: Path, command: str, checkpoint: str, workers: tuple[int, int], env, cpus=None):
    """Scalars of a run whose runner is SIGKILLed once `checkpoint` exists and is started again (with workers[1]),
    and of the same run uninterrupted (started with workers[0]), both through the benchmark, side by side."""
    from cleanrl_utils.tensorboard_reader import read_scalars

    reference = real_benchmark(tmp_path / "reference", command, workers[0], env, cpus)
    interrupted = real_benchmark(tmp_path / "interrupted", command, workers[0], env, cpus)
    try:
        runs = tmp_path / "interrupted" / "runs"
        wait_for(lambda: any(runs.glob(f"*/checkpoints/{checkpoint}")), 60, f"the run's {checkpoint}")
        interrupted.kill()
        interrupted.wait()
        again = real_benchmark(tmp_path / "interrupted", command, workers[1], env, cpus)
        _, stderr = again.communicate(timeout=120)
        # its supervisor stopped it when the runner was killed, and noted how it ended (130: interrupted)
        found = "was running when the benchmark stopped, then ended (exit code 130); resuming from runs/"
        assert again.returncode == 0 and found in stderr, stderr
        _, stderr = reference.communicate(timeout=120)
        assert reference.returncode == 0, stderr
    finally:
        for process in (reference, interrupted):
            if process.poll() is None:
                process.kill()
                process.wait()
    (resumed,), (whole,) = (list((tmp_path / name / "runs").iterdir()) for name in ("interrupted", "reference"))
    return read_scalars(resumed), read_scalars(whole)


@pytest.mark.extended  # ~30 s on a loaded 2-core machine: two short DQN runs side by side and a resume
def test_run_killed_with_runner_then_continued_logs_as_uninterrupted(tmp_path):
    dqn = shlex.join([sys.executable, str(REPO / "cleanrl" / "dqn.py")])
    command = f"{dqn} --total-timesteps 3000 --learning-starts 500 --checkpoint-frequency 1000"
    resumed, whole = interrupted_and_reference(tmp_path, command, "checkpoint_1000.pt", (1, 1), script_env())
    for tag in ("charts/episodic_return", "losses/td_loss", "losses/q_values"):
        assert resumed[tag] == whole[tag], tag
    assert max(step for step, _ in whole["losses/td_loss"]) > 2000  # the comparison reaches past the resume


@pytest.mark.extended  # ~25 s of one core: two short PPO runs and a resume
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 4, reason="needs 4 CPUs: --workers 2 then gives each run 2 threads")
def test_run_continued_with_other_workers_logs_as_uninterrupted(tmp_path):
    """Not run on a 2-CPU machine: there --workers 2 gives OMP_NUM_THREADS=1, which ppo.py also takes without it.
    PPO on CartPole with 1 and 2 threads logs other losses/approx_kl from its first update (checked by hand)."""
    env = {k: v for k, v in script_env().items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    ppo = shlex.join([sys.executable, str(REPO / "cleanrl" / "ppo.py")])
    cpus = set(sorted(os.sched_getaffinity(0))[:4])
    resumed, whole = interrupted_and_reference(
        tmp_path, f"{ppo} --total-timesteps 6144 --checkpoint-frequency 4", "checkpoint_2048.pt", (2, 1), env, cpus
    )
    losses = sorted(tag for tag in whole if tag.startswith("losses/"))
    assert {tag: resumed[tag] for tag in losses} == {tag: whole[tag] for tag in losses}
