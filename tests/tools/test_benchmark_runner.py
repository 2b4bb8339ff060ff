"""`python -m cleanrl_utils.benchmark` runs a command per (seed, env), a few at a time, and reports what happened.

The runs are a tiny fake training script, so the whole file takes seconds.
"""

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cleanrl_utils.benchmark import build_runs, estimate_time_left
from tests.helpers import process_is_alive, run_benchmark, script_env

FAKE_TRAIN = """
import argparse, json, os, shutil, signal, subprocess, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--env-id")
parser.add_argument("--seed", type=int)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--record-dir")
parser.add_argument("--spawn-grandchild", action="store_true")
args = parser.parse_args()

start = time.time()
print(f"training {args.env_id} seed {args.seed}")
print("WANDB_TAGS=" + os.environ.get("WANDB_TAGS", "<unset>"))
print("OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "<unset>"))
if args.spawn_grandchild:
    # A grandchild that ignores SIGTERM: only a SIGKILL to the whole group ends it.
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"]
    )
    with open(os.path.join(args.record_dir, f"pids-{args.env_id}-{args.seed}.json"), "w") as f:
        json.dump([os.getpid(), grandchild.pid], f)
time.sleep(args.sleep)
if args.record_dir and not args.spawn_grandchild:
    with open(os.path.join(args.record_dir, f"times-{args.env_id}-{args.seed}.json"), "w") as f:
        json.dump([start, time.time()], f)
if args.env_id.startswith("RemoveLogs"):  # a file where the log folder was: nothing can be written there
    shutil.rmtree("logs")
    open("logs", "w").close()
if args.env_id.startswith("Fail"):
    print(f"error: {args.env_id} cannot be trained", file=sys.stderr)
    sys.exit(3)
"""


@pytest.fixture
def fake_train(tmp_path: Path) -> str:
    """The command string that runs the fake training script."""
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    return shlex.join([sys.executable, str(script)])


def run_with_logs(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The runner with `args`, its logs under cwd/logs, without the auto tag."""
    return run_benchmark(*args, "--log-dir", "logs", "--no-auto-tag", cwd=cwd, env=env)


def log_files(log_dir: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(log_dir.glob("*.log"))}


# --- the commands -------------------------------------------------------------------------


def test_runs_start_seed_by_seed_and_are_numbered_as_slurm_tasks():
    runs = build_runs(["python", "train.py"], ["A-v1", "B-v1"], [4, 5])
    assert [(run.env_id, run.seed) for run in runs] == [("A-v1", 4), ("B-v1", 4), ("A-v1", 5), ("B-v1", 5)]
    # numbered environment-major, as the job-array templates pick env i // len(seeds), seed i % len(seeds)
    assert [run.index for run in runs] == [0, 2, 1, 3]
    assert runs[1].argv == ["python", "train.py", "--env-id", "B-v1", "--seed", "4"]
    assert len({run.log_name for run in runs}) == len(runs)


def test_seed_stride_spaces_the_seeds_past_each_runs_sub_envs(tmp_path):
    # 4 sub-envs each: seeds 3, 7, 11 start sub-envs 3-6, 7-10, 11-14, none shared
    proc = run_benchmark(
        "--env-ids", "A-v1", "--command", "python -c 'print(1)'",
        "--num-seeds", "3", "--start-seed", "3", "--seed-stride", "4", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [shlex.split(line)[-1] for line in proc.stdout.splitlines()] == ["3", "7", "11"]


def test_log_names_are_file_names_and_never_collide():
    runs = build_runs(["train"], ["ALE/Pong-v5", "ALE_Pong-v5"], [1])
    assert [run.log_name for run in runs] == ["000__ALE_Pong-v5__seed1.log", "001__ALE_Pong-v5__seed1.log"]


def test_workers_0_only_prints_the_commands(tmp_path):
    proc = run_benchmark(
        "--env_ids", "A-v1", "B-v1",
        "--command", "python -c 'print(1)' --flag",
        "--num-seeds", "2",
        "--start-seed", "7",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [shlex.split(line) for line in lines] == [
        ["python", "-c", "print(1)", "--flag", "--env-id", env_id, "--seed", seed]
        for seed in ("7", "8")
        for env_id in ("A-v1", "B-v1")
    ]
    assert not (tmp_path / "benchmark_logs").exists(), "printing the commands must not run or log anything"


def test_runner_without_workers_is_refused(tmp_path):
    from cleanrl_utils.benchmark import LocalRunner, RunSpec

    runs = [RunSpec(0, "A-v1", 1, [sys.executable, "-c", "pass"])]
    with pytest.raises(ValueError, match="at least 1 worker, got 0"):  # a queue with no worker waits forever
        LocalRunner(runs, 0, tmp_path, {})


# --- running them -------------------------------------------------------------------------


def test_runs_every_command_at_most_workers_at_a_time(tmp_path, fake_train):
    record = tmp_path / "record"
    record.mkdir()
    proc = run_with_logs(
        tmp_path,
        "--env-ids", "A-v1", "B-v1",
        "--command", f"{fake_train} --sleep 0.8 --record-dir {record}",
        "--num-seeds", "2",
        "--workers", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr

    logs = log_files(tmp_path / "logs")
    assert sorted(logs) == ["000__A-v1__seed1.log", "001__A-v1__seed2.log", "002__B-v1__seed1.log", "003__B-v1__seed2.log"]
    assert "training B-v1 seed 2" in logs["003__B-v1__seed2.log"]
    assert "training A-v1 seed 1" not in logs["003__B-v1__seed2.log"]

    intervals = [json.loads(path.read_text()) for path in record.glob("times-*.json")]
    assert len(intervals) == 4
    most_at_once = max(sum(1 for s, e in intervals if s <= start < e) for start, _ in intervals)
    assert most_at_once == 2, f"expected exactly 2 runs at a time, saw {most_at_once}: {intervals}"

    assert "time left unknown" in proc.stderr
    assert "benchmark: 4 done, 0 failed, 0 running, 0 queued" in proc.stderr
    assert "finished 4 runs" in proc.stderr and "4 succeeded, 0 failed" in proc.stderr


def threads_seen(cwd: Path, command: str, workers: int, **env: str | None) -> set[str]:
    """The OMP_NUM_THREADS each run saw (`None` in `env` removes a variable from the runner's environment)."""
    runner_env = {k: v for k, v in (script_env() | env).items() if v is not None}
    cwd.mkdir()
    proc = run_with_logs(cwd, "--env-ids", "A-v1", "B-v1", "--command", command, "--workers", str(workers), env=runner_env)
    assert proc.returncode == 0, proc.stderr
    logs = log_files(cwd / "logs").values()
    return {line.removeprefix("OMP_NUM_THREADS=") for log in logs for line in log.splitlines() if "OMP_NUM_THREADS=" in line}


def test_runs_side_by_side_share_the_cores_and_a_run_alone_keeps_them(tmp_path, fake_train):
    cpus = len(os.sched_getaffinity(0))
    assert threads_seen(tmp_path / "two", fake_train, 2, OMP_NUM_THREADS=None) == {str(max(1, cpus // 2))}
    assert threads_seen(tmp_path / "one", fake_train, 1, OMP_NUM_THREADS=None) == {"<unset>"}  # torch's default: all
    assert threads_seen(tmp_path / "user", fake_train, 2, OMP_NUM_THREADS="3") == {"3"}  # what the user set wins


def test_the_cores_are_divided_among_the_workers_one_thread_at_least():
    from cleanrl_utils.benchmark.common import share_cores

    assert share_cores({}, 4, cpus=16) == {"OMP_NUM_THREADS": "4"}
    assert share_cores({}, 3, cpus=16) == {"OMP_NUM_THREADS": "5"}  # whole threads: never more than the cores
    assert share_cores({}, 4, cpus=2) == {"OMP_NUM_THREADS": "1"}
    assert share_cores({"OMP_NUM_THREADS": "2"}, 4, cpus=16) == {"OMP_NUM_THREADS": "2"}
    assert share_cores({}, 1, cpus=16) == {}


def test_a_failing_run_is_reported_and_the_others_still_run(tmp_path, fake_train):
    proc = run_with_logs(
        tmp_path, "--env-ids", "Fail-v0", "A-v1", "--command", fake_train, "--num-seeds", "2", "--workers", "1"
    )
    assert proc.returncode == 1, proc.stderr
    logs = log_files(tmp_path / "logs")
    assert len(logs) == 4 and all(f"seed {seed}" in logs[name] for name, seed in zip(sorted(logs), [1, 2, 1, 2]))

    report = proc.stderr[proc.stderr.index("failed run 1/2") :]
    assert f"command: {fake_train} --env-id Fail-v0 --seed 1" in report
    assert f"command: {fake_train} --env-id Fail-v0 --seed 2" in report
    assert "exit code 3" in report
    assert f"log: {Path('logs') / '000__Fail-v0__seed1.log'}" in report
    assert "| error: Fail-v0 cannot be trained" in report
    assert "A-v1" not in report, "a run that succeeded was listed as failed"
    assert "2 succeeded, 2 failed" in proc.stderr


def test_a_log_that_cannot_be_written_fails_that_run_only(tmp_path, fake_train):
    # the first run deletes the log folder: the later runs cannot open their logs
    proc = run_with_logs(
        tmp_path, "--env-ids", "RemoveLogs-v0", "A-v1", "--command", fake_train, "--num-seeds", "1", "--workers", "1"
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot write the log of" in proc.stderr and "1 succeeded, 1 failed" in proc.stderr


def test_an_error_handling_a_finished_run_fails_that_run_only(tmp_path, fake_train, capsys):
    """`on_success` (e.g. a benchmark summarising the run) raising is that run's failure: the others all run."""
    from cleanrl_utils.benchmark import LocalRunner

    runs = build_runs([*shlex.split(fake_train), "--sleep", "0.2"], ["A-v1", "Broken-v0", "B-v1"], [1])
    handled = []

    def on_success(spec):
        handled.append(spec.env_id)
        if spec.env_id == "Broken-v0":
            raise KeyError("charts/episodic_return")

    (tmp_path / "logs").mkdir()
    runner = LocalRunner(runs, 1, tmp_path / "logs", script_env(), on_success=on_success)
    assert runner.run() == 1
    assert handled == ["A-v1", "Broken-v0", "B-v1"], "the runs after the failed callback went on"
    assert [outcome.returncode for outcome in runner.outcomes] == [0, 0, 0]
    stderr = capsys.readouterr().err
    assert not any(line.startswith("Traceback") for line in stderr.splitlines())  # quoted from the log only
    assert "failed run 1/1: exit code 0, then handling its result failed: KeyError: 'charts/episodic_return'" in stderr
    assert "2 succeeded, 1 failed" in stderr
    broken_log = (tmp_path / "logs" / "001__Broken-v0__seed1.log").read_text()
    assert "training Broken-v0 seed 1" in broken_log and "Traceback" in broken_log  # the details, for whoever looks


# --- stopping them ------------------------------------------------------------------------


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# SIGTERM's case (6 s of one core) is `extended`: CI runs it after the quick run, which stops the runs with SIGINT
@pytest.mark.parametrize(
    ("signum", "exit_code"), [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.extended)]
)
def test_a_signal_stops_every_run_and_its_children(tmp_path, fake_train, signum, exit_code):
    record = tmp_path / "record"
    record.mkdir()
    runner = subprocess.Popen(
        [
            sys.executable, "-m", "cleanrl_utils.benchmark",
            "--env-ids", "A-v1", "B-v1",
            "--command", f"{fake_train} --sleep 120 --spawn-grandchild --record-dir {record}",
            "--num-seeds", "2",
            "--workers", "2",
            "--log-dir", "logs",
            "--no-auto-tag",
        ],
        cwd=tmp_path,
        env=script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a parent started in the background by a shell ignores SIGINT.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        wait_for(lambda: len(list(record.glob("pids-*.json"))) == 2, 30, "both runs to start their grandchildren")
        pids = [pid for path in record.glob("pids-*.json") for pid in json.loads(path.read_text())]
        assert all(process_is_alive(pid) for pid in pids)

        sent = time.monotonic()
        runner.send_signal(signum)
        _, stderr = runner.communicate(timeout=30)
        assert runner.returncode == exit_code, stderr
        # The grandchildren ignore SIGTERM, so this is the grace period plus a little.
        assert time.monotonic() - sent < 15, "the runner took too long to stop"

        wait_for(lambda: not any(process_is_alive(pid) for pid in pids), 5, f"runs and their children {pids} to end")
        assert f"{signal.Signals(signum).name} received; stopping 2 running runs" in stderr
        assert stderr.count("stopped: ") == 2 and "--env-id A-v1 --seed 1" in stderr
        assert "2 stopped, 2 never started" in stderr
        assert not list(record.glob("pids-*-2.json")), "queued runs were started after the signal"
    finally:
        # If the runner failed to clean up, do it here so a broken runner leaves nothing behind.
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for path in record.glob("pids-*.json"):
            for pid in json.loads(path.read_text()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


# --- the auto-tag -------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for message in ("first", "second"):
        git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return repo


def wandb_tags_seen(cwd: Path, command: str, *flags: str, **env: str) -> tuple[str, str]:
    """The WANDB_TAGS a run saw, and the runner's stderr."""
    log_dir = cwd / "logs" / str(len(list(cwd.glob("logs/*"))))  # a new benchmark each time
    proc = run_benchmark("--env-ids", "A-v1", "--command", command, "--num-seeds", "1", "--workers", "1", "--log-dir",
                         str(log_dir), *flags, cwd=cwd, env=script_env(**env))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (log,) = log_files(log_dir).values()
    return next(line for line in log.splitlines() if line.startswith("WANDB_TAGS=")).removeprefix("WANDB_TAGS="), proc.stderr


def test_auto_tag_appends_the_git_tag_to_wandb_tags(git_repo, fake_train):
    git(git_repo, "tag", "v9.9")
    tags, _ = wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine,yours")
    assert tags == "mine,yours,v9.9"


def test_auto_tag_without_a_tag_names_the_commit(git_repo, fake_train):
    tags, _ = wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine")
    assert tags == f"mine,no-tag-2-g{git(git_repo, 'rev-parse', '--short', 'HEAD')}"


def commit_a_file(repo: Path) -> Path:
    tracked = repo / "algo.py"
    tracked.write_text("lr = 2.5e-4\n")
    git(repo, "add", "algo.py")
    git(repo, "commit", "-q", "-m", "algo")
    return tracked


def test_auto_tag_marks_uncommitted_edits_dirty(git_repo, fake_train):
    """Runs of an edited tree must not join the clean commit's group: the tag ends in -dirty."""
    tracked = commit_a_file(git_repo)
    git(git_repo, "tag", "v9.9")
    assert wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine")[0] == "mine,v9.9"  # untracked logs do not count
    tracked.write_text("lr = 1e-3\n")
    assert wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine")[0] == "mine,v9.9-dirty"


def test_auto_tag_marks_a_new_file_dirty(git_repo, fake_train):
    """A new module a script imports changes what runs compute as much as an edit does; ignored files do not."""
    commit_a_file(git_repo)
    git(git_repo, "tag", "v9.9")
    (git_repo / ".gitignore").write_text("runs/\n")
    git(git_repo, "add", ".gitignore")
    git(git_repo, "commit", "-q", "-m", "ignore runs")
    (git_repo / "runs").mkdir()
    (git_repo / "runs" / "events").write_text("")
    assert wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine")[0] == "mine,v9.9-1-g" + git(
        git_repo, "rev-parse", "--short", "HEAD"
    )
    (git_repo / "helpers.py").write_text("lr = 1e-3\n")
    assert wandb_tags_seen(git_repo, fake_train, WANDB_TAGS="mine")[0].endswith("-dirty")


def test_auto_tag_without_a_tag_marks_uncommitted_edits_dirty(git_repo, fake_train):
    tracked = commit_a_file(git_repo)
    tracked.write_text("lr = 1e-3\n")
    tags, _ = wandb_tags_seen(git_repo, fake_train)
    assert tags == f"no-tag-3-g{git(git_repo, 'rev-parse', '--short', 'HEAD')}-dirty"


def test_no_auto_tag_leaves_wandb_tags_alone(git_repo, fake_train):
    git(git_repo, "tag", "v9.9")
    tags, _ = wandb_tags_seen(git_repo, fake_train, "--no-auto-tag", WANDB_TAGS="mine")
    assert tags == "mine"


def test_auto_tag_outside_a_git_repo_warns_and_goes_on(tmp_path, fake_train):
    folder = tmp_path / "plain"
    folder.mkdir()
    tags, stderr = wandb_tags_seen(folder, fake_train, GIT_CEILING_DIRECTORIES=str(tmp_path))
    assert tags == "<unset>"
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "not a git repository" in warnings[0]


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env-ids", "--command", "python x.py"], "--env-ids needs at least one environment id"),
        (["--env-ids", "A", "--command", "python x.py", "--num-seeds", "0"], "--num-seeds must be positive"),
        (["--env-ids", "A", "--command", "python x.py", "--workers", "-1"], "--workers must not be negative"),
        (["--env-ids", "A", "../B", "--command", "python x.py"], "--env-ids cannot be '..'"),
        (["--env-ids", "A", "--command", "python x.py", "--start-seed", str(2**31 - 2), "--num-seeds", "3"], "the last seed"),
        (["--env-ids", "A", "--command", "python x.py", "--num-seeds", "3", "--seed-stride", str(2**30)], "the last seed"),
        (["--env-ids", "A", "--command", "python x.py", "--seed-stride", "0"], "--seed-stride must be positive"),
        (["--env-ids", "A", "--command", "   "], "--command is empty"),
        (["--env-ids", "A", "--command", "no-such-program-4711 --x", "--workers", "1"], "cannot find the program"),
        (["--env-ids", "A", "--command", "python 'x.py"], "cannot split --command"),
        # the same env and seed twice: two runs of one name, their logs and models mixed
        (["--env-ids", "A", "B", "A", "--command", "python x.py"], "--env-ids names A more than once"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, args, message):
    proc = run_benchmark(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith("benchmark: error: ") and message in proc.stderr
    assert not (tmp_path / "benchmark_logs").exists()


# --- the estimate -------------------------------------------------------------------------


def test_time_left_is_unknown_until_a_run_finishes():
    assert estimate_time_left([], [1.0], queued=3, workers=2) is None


def test_time_left_shares_the_remaining_runs_among_the_workers():
    # Mean run 10 s; 4 queued runs and one running for 4 s: (40 + 6) s of work over 2 workers.
    assert estimate_time_left([8.0, 12.0], [4.0], queued=4, workers=2) == pytest.approx(23.0)
    # One run left is not shared: it takes what is left of a mean run.
    assert estimate_time_left([10.0], [], queued=1, workers=4) == pytest.approx(10.0)


# --- continuing a benchmark ----------------------------------------------------------------------

RESUMABLE_TRAIN = """
import argparse, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--env-id")
parser.add_argument("--seed", type=int)
parser.add_argument("--resume")
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()

name = f"{args.env_id}__fake__{args.seed}"
os.makedirs(f"runs/{name}/checkpoints", exist_ok=True)
with open(os.environ["CLEANRL_RUN_NAME_FILE"], "w") as f:
    f.write(name + "\\n")
print(f"resumed from {args.resume}" if args.resume else f"started {name}", flush=True)
print("OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "<unset>"), flush=True)
if args.env_id.startswith("Checkpointed"):
    with open(f"runs/{name}/checkpoints/checkpoint_100.pt", "w") as f:
        f.write("a checkpoint")  # not empty: an empty one is cut short, and the run then starts again
time.sleep(args.sleep)
if args.env_id.startswith("Fail") or (args.env_id.startswith("Checkpointed") and not args.resume):
    sys.exit(3)
"""


@pytest.fixture
def resumable_train(tmp_path: Path) -> str:
    script = tmp_path / "resumable_train.py"
    script.write_text(RESUMABLE_TRAIN)
    return shlex.join([sys.executable, str(script)])


def test_restarted_benchmark_skips_finished_runs_resumes_others(tmp_path, resumable_train):
    args = ("--env-ids", "A-v1", "Checkpointed-v1", "Fail-v1", "--command", resumable_train, "--workers", "2")
    first = run_with_logs(tmp_path, *args, "--num-seeds", "1")
    assert first.returncode == 1 and "1 succeeded, 2 failed" in first.stderr

    # a second start, with one seed more: the finished run is skipped, the checkpointed one resumed from its folder,
    # the failed one (no checkpoint) started again, the new seed's runs started afresh
    second = run_with_logs(tmp_path, *args, "--num-seeds", "2")
    assert "000__A-v1__seed1.log: finished earlier (runs/A-v1__fake__1), skipped" in second.stderr
    assert "001__Checkpointed-v1__seed1.log: failed; resuming from runs/Checkpointed-v1__fake__1" in second.stderr
    assert "Fail-v1__seed1.log: failed; starting again (runs/Fail-v1__fake__1 has no checkpoint" in second.stderr
    logs = log_files(tmp_path / "logs")
    assert logs["000__A-v1__seed1.log"].count("started A-v1") == 1  # not run again
    checkpointed = logs["001__Checkpointed-v1__seed1.log"]  # its name from the first start, where seeds were fewer
    assert checkpointed.index("started Checkpointed") < checkpointed.index(
        "resumed from runs/Checkpointed-v1__fake__1"
    )  # appended
    assert "started A-v1__fake__2" in logs["001__A-v1__seed2.log"]
    assert "2 succeeded, 3 failed" in second.stderr  # the Fail runs of both seeds

    ledger = json.loads((tmp_path / "logs" / "benchmark.json").read_text())["runs"]
    resumed = next(entry for command, entry in ledger.items() if "Checkpointed-v1 --seed 1" in command)
    assert resumed["status"] == "finished" and "--resume" not in json.dumps(list(ledger))

    third = run_with_logs(tmp_path, *args, "--num-seeds", "2")  # the new seed's checkpointed run resumes; Fail fails
    assert third.returncode == 1 and "finished 3 runs" in third.stderr and "1 succeeded, 2 failed" in third.stderr
    assert third.stderr.count("finished earlier") == 3


def test_a_log_folder_of_another_command_or_other_code_is_refused(tmp_path, resumable_train, git_repo):
    args = ("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1")
    assert run_with_logs(tmp_path, *args, "--command", resumable_train).returncode == 0
    other = run_with_logs(tmp_path, *args, "--command", resumable_train + " --sleep 0")
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert "logs holds a benchmark of another command" in other.stderr

    # the same command on edited code: continuing would mix runs of two versions
    args = ("--env-ids", "A-v1", "--command", resumable_train, "--num-seeds", "1", "--workers", "1", "--log-dir", "logs")
    assert run_benchmark(*args, cwd=git_repo).returncode == 0
    (git_repo / "new_module.py").write_text("x = 1\n")
    edited = run_benchmark(*args, cwd=git_repo)
    commit = git(git_repo, "rev-parse", "--short", "HEAD")
    assert edited.returncode == 2 and edited.stderr.count("\n") == 1, edited.stderr
    assert f"holds runs of the code at no-tag-2-g{commit}, and this folder is at no-tag-2-g{commit}-dirty" in edited.stderr
    # the line says how to continue: from a checkout of the commit the runs started on
    assert edited.stderr.strip().endswith(
        f"to continue it, start it again from a checkout of {commit} (git checkout {commit}), or give another --log-dir"
        " to start a new benchmark"
    )
    # edits that no commit holds cannot be checked out again
    (git_repo / "logs2").mkdir()
    dirty = run_benchmark(*args[:-1], "logs2", cwd=git_repo)
    assert dirty.returncode == 0, dirty.stderr
    (git_repo / "new_module.py").write_text("x = 2\n")
    git(git_repo, "add", "new_module.py")
    git(git_repo, "commit", "-q", "-m", "x")
    again = run_benchmark(*args[:-1], "logs2", cwd=git_repo)
    assert again.returncode == 2 and again.stderr.strip().endswith(
        "-dirty; give another --log-dir to start a new benchmark"
    ), again.stderr
    assert f"holds runs of the code at no-tag-2-g{commit}-dirty," in again.stderr


def test_a_second_runner_on_the_same_log_folder_is_refused_at_once(tmp_path, resumable_train):
    args = ("--env-ids", "A-v1", "--command", f"{resumable_train} --sleep 30", "--num-seeds", "1", "--workers", "1")
    first = subprocess.Popen([sys.executable, "-m", "cleanrl_utils.benchmark", *args, "--log-dir", "logs", "--no-auto-tag"],
                             cwd=tmp_path, env=script_env(), stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: (tmp_path / "logs" / "000__A-v1__seed1.run").exists(), 30, "the first run")
        started = time.monotonic()
        second = run_with_logs(tmp_path, *args)
        assert time.monotonic() - started < 5
        assert second.returncode == 2 and second.stderr.count("\n") == 1
        assert f"is in use by another benchmark (pid {first.pid})" in second.stderr
        assert "started A-v1" in (tmp_path / "logs" / "000__A-v1__seed1.log").read_text()  # the first one's log is whole
    finally:
        first.kill()
        first.wait()


def processes_naming(marker: str) -> list[str]:
    """`ps` lines of the live processes whose command line holds `marker`."""
    ps = subprocess.run(["ps", "-ww", "-e", "-o", "pid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if marker in line and " Z" not in line]


def test_runs_and_what_they_started_die_with_a_killed_runner(tmp_path, fake_train):
    record = tmp_path / "record"
    record.mkdir()
    command = f"{fake_train} --sleep 120 --spawn-grandchild --record-dir {record}"  # the grandchild ignores SIGTERM
    runner = subprocess.Popen([sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "A-v1", "--command", command,
                               "--num-seeds", "1", "--workers", "1", "--log-dir", "logs", "--no-auto-tag"],
                              cwd=tmp_path, env=script_env(), stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: any(record.glob("pids-*.json")), 30, "the run and its child")
        run, grandchild = json.loads(next(record.glob("pids-*.json")).read_text())
        assert len(processes_naming(str(tmp_path))) == 3  # the runner, the run and its supervisor
        runner.kill()  # SIGKILL: the runner cannot stop its runs itself
        runner.wait()
        # SIGTERM at once, SIGKILL after the grace period for the grandchild, which ignores SIGTERM
        wait_for(lambda: not process_is_alive(run), 5, "the run to die with its runner")
        wait_for(lambda: not process_is_alive(grandchild), 15, "the run's child to die with its runner")
        wait_for(lambda: not processes_naming(str(tmp_path)), 5, "the run's supervisor to end")
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for pid in (pid for path in record.glob("pids-*.json") for pid in json.loads(path.read_text())):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    ledger = json.loads((tmp_path / "logs" / "benchmark.json").read_text())["runs"]
    assert [entry["status"] for entry in ledger.values()] == ["running"]  # a later start resumes or restarts it
    assert (tmp_path / "logs" / "000__A-v1__seed1.exit").read_text() == f"{-signal.SIGTERM}\n"  # how it ended is known


def test_the_runner_and_the_runs_agree_on_the_run_name_variable():
    from cleanrl_utils.benchmark import ledger
    from cleanrl_utils.runtime import experiment

    assert ledger.RUN_NAME_FILE == experiment.RUN_NAME_FILE


# --- the ledger's fields, older ledgers, and what a re-run finds ----------------------------------------------


def one_run_ledger(log_dir: Path, **fields) -> Path:
    """A version-2 ledger of one failed run of `python x.py --env-id A-v1 --seed 1`, with `fields` changed."""
    log_dir.mkdir(parents=True, exist_ok=True)
    entry = {"log": "000__A-v1__seed1.log", "status": "failed", "returncode": 3, "threads": None}
    data = {
        "version": 2,
        "code": None,
        "cwd": str(log_dir.parent.resolve()),
        "runs": {"python x.py --env-id A-v1 --seed 1": entry},
    }
    for name, value in fields.items():
        (entry if name in entry else data)[name] = value
    (log_dir / "benchmark.json").write_text(json.dumps(data))
    return log_dir


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"status": "done"}, "has the status 'done', not one of finished, failed, stopped, running"),
        ({"returncode": "3"}, "has the return code '3', not a number"),
        ({"returncode": True}, "has the return code True, not a number"),
        ({"threads": "two"}, "has the threads 'two', not a number"),
        ({"log": ".hidden.log"}, "has the log '.hidden.log', not a file name ending in .log"),
        ({"log": "000__A-v1__seed1.txt"}, "not a file name ending in .log"),
        ({"version": 3}, "its version 3 is not one this runner reads (1 to 2): a newer runner wrote it"),
        ({"version": "2"}, "its version '2' is not one"),
        ({"cwd": "relative/folder"}, "its cwd is 'relative/folder', not an absolute path"),
        ({"code": 7}, "its code is 7, not a version"),
        ({"runs": []}, "it is not an object with runs"),
    ],
)
def test_every_field_of_the_ledger_is_checked(tmp_path, fields, problem):
    from cleanrl_utils.benchmark import BadInput
    from cleanrl_utils.benchmark.ledger import Ledger

    log_dir = one_run_ledger(tmp_path / "logs", **fields)
    with pytest.raises(BadInput) as refused:
        Ledger(log_dir)
    assert str(refused.value).startswith(f"cannot read {log_dir / 'benchmark.json'}: ")
    assert problem in str(refused.value) and str(refused.value).endswith("; fix it by hand or give another --log-dir")


def test_two_runs_of_one_log_in_the_ledger_are_refused(tmp_path):
    from cleanrl_utils.benchmark import BadInput
    from cleanrl_utils.benchmark.ledger import Ledger

    log_dir = one_run_ledger(tmp_path / "logs")
    data = json.loads((log_dir / "benchmark.json").read_text())
    data["runs"]["python y.py --env-id A-v1 --seed 1"] = dict(data["runs"]["python x.py --env-id A-v1 --seed 1"])
    (log_dir / "benchmark.json").write_text(json.dumps(data))
    with pytest.raises(BadInput, match="two runs have the log 000__A-v1__seed1.log"):
        Ledger(log_dir)


def test_resume_in_the_command_is_refused_in_one_line(tmp_path, resumable_train):
    for resume in ("--resume runs/x", "--resume=runs/x"):
        proc = run_with_logs(tmp_path, "--env-ids", "A-v1", "--workers", "1", "--command", f"{resumable_train} {resume}")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert (
            "--command must not hold --resume: to continue a benchmark, start it again with the same --log-dir" in proc.stderr
        )
    assert not (tmp_path / "logs").exists()


def checkpointed_run(cwd: Path, status: str, name: str = "Checkpointed-v1__fake__1") -> None:
    """The run folder and `.run` file that the resumable fake leaves for env Checkpointed-v1, seed 1."""
    (cwd / "runs" / name / "checkpoints").mkdir(parents=True)
    (cwd / "runs" / name / "checkpoints" / "checkpoint_100.pt").write_text("a checkpoint")
    (cwd / "logs" / "000__Checkpointed-v1__seed1.run").write_text(name + "\n")
    (cwd / "logs" / "000__Checkpointed-v1__seed1.log").write_text("$ earlier\n")


def test_a_ledger_of_the_previous_format_continues_on_its_own_code(git_repo, resumable_train):
    """benchmark.json as the runner before version 2 wrote it (c105263: no version, cwd or threads): its runs
    continue on the code it names, and the ledger is written anew in this format."""
    (git_repo / ".gitignore").write_text("logs/\nruns/\n")
    git(git_repo, "add", ".gitignore")
    git(git_repo, "commit", "-q", "-m", "ignore")
    code = f"no-tag-3-g{git(git_repo, 'rev-parse', '--short', 'HEAD')}"
    (git_repo / "logs").mkdir()
    command = f"{resumable_train} --env-id Checkpointed-v1 --seed 1"
    old = {
        "code": code,
        "runs": {command: {"log": "000__Checkpointed-v1__seed1.log", "status": "running", "returncode": None}},
    }
    (git_repo / "logs" / "benchmark.json").write_text(json.dumps(old, indent=1) + "\n")
    checkpointed_run(git_repo, "running")
    args = ("--env-ids", "Checkpointed-v1", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs", "--command")
    proc = run_benchmark(*args, resumable_train, cwd=git_repo)
    assert proc.returncode == 0, proc.stderr
    assert (
        "000__Checkpointed-v1__seed1.log: was running when the benchmark stopped; resuming from runs/Checkpointed-v1__fake__1"
        in proc.stderr
    )
    ledger = json.loads((git_repo / "logs" / "benchmark.json").read_text())
    assert ledger["version"] == 2 and ledger["code"] == code and ledger["cwd"] == str(git_repo.resolve())
    assert ledger["runs"][command]["status"] == "finished"

    # at another commit, the old ledger is refused with a line that says how to continue
    (git_repo / "logs" / "benchmark.json").write_text(json.dumps(old | {"code": "no-tag-520-gc105263"}) + "\n")
    refused = run_benchmark(*args, resumable_train, cwd=git_repo)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.strip().endswith(
        f"holds runs of the code at no-tag-520-gc105263, and this folder is at {code}; to continue it, start it again"
        " from a checkout of c105263 (git checkout c105263), or give another --log-dir to start a new benchmark"
    )


def test_old_unversioned_ledger_takes_this_format_and_says_so(tmp_path, resumable_train):
    (tmp_path / "logs").mkdir()
    command = f"{resumable_train} --env-id A-v1 --seed 1"
    old = {"code": None, "runs": {command: {"log": "000__A-v1__seed1.log", "status": "failed", "returncode": 3}}}
    (tmp_path / "logs" / "benchmark.json").write_text(json.dumps(old))
    proc = run_with_logs(tmp_path, "--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1", "--command", resumable_train)
    assert proc.returncode == 0, proc.stderr
    assert "(an older runner's, with --no-auto-tag) does not say which code its runs ran; taken as None" in proc.stderr


def test_a_run_noted_running_is_taken_as_its_exit_file_says(tmp_path, resumable_train):
    """The runner was killed; its run's supervisor noted how the run ended (or it did not, or its note is garbage)."""
    args = ("--env-ids", "Checkpointed-v1", "--num-seeds", "1", "--workers", "1", "--command", resumable_train)
    (tmp_path / "logs").mkdir()
    checkpointed_run(tmp_path, "running")
    command = f"{resumable_train} --env-id Checkpointed-v1 --seed 1"
    entry = {"log": "000__Checkpointed-v1__seed1.log", "status": "running", "returncode": None, "threads": None}
    ledger = {"version": 2, "code": None, "cwd": str(tmp_path.resolve()), "runs": {command: entry}}
    for note, found in [
        ("-15\n", "was running when the benchmark stopped, then ended (killed by SIGTERM); resuming from"),
        ("garbage\n", "was running when the benchmark stopped; resuming from"),
        ("0\n", "finished earlier (runs/Checkpointed-v1__fake__1), skipped, its end noted after the benchmark stopped"),
    ]:
        (tmp_path / "logs" / "benchmark.json").write_text(json.dumps(ledger))
        (tmp_path / "logs" / "000__Checkpointed-v1__seed1.exit").write_text(note)
        proc = run_with_logs(tmp_path, *args)
        assert proc.returncode == 0 and f"000__Checkpointed-v1__seed1.log: {found}" in proc.stderr, (note, proc.stderr)
        assert json.loads((tmp_path / "logs" / "benchmark.json").read_text())["runs"][command]["status"] == "finished"
        assert (tmp_path / "logs" / "000__Checkpointed-v1__seed1.exit").read_text() == "0\n"  # this start's own note


def test_a_continued_run_keeps_its_thread_count_and_says_so(tmp_path, resumable_train):
    args = ("--env-ids", "Checkpointed-v1", "--num-seeds", "1", "--command", resumable_train)
    env = {k: v for k, v in script_env().items() if k != "OMP_NUM_THREADS"}
    first = run_with_logs(tmp_path, *args, "--workers", "1", env=env | {"OMP_NUM_THREADS": "3"})
    assert first.returncode == 1, first.stderr
    second = run_with_logs(tmp_path, *args, "--workers", "1", env=env)
    assert second.returncode == 0, second.stderr
    assert "resuming from runs/Checkpointed-v1__fake__1, with OMP_NUM_THREADS=3 as it started" in second.stderr


# --- the supervisor and the lock ----------------------------------------------------------------------------------


def supervise(tmp_path: Path, code: str, grace: float = 1.0) -> tuple[subprocess.CompletedProcess, Path]:
    """Run `python -c code` under the supervisor; its result and the exit file."""
    from cleanrl_utils.benchmark.local import SUPERVISOR

    exit_path = tmp_path / "run.exit"
    argv = [sys.executable, "-I", str(SUPERVISOR), str(exit_path), str(grace), "--", sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=tmp_path), exit_path


def test_the_supervisor_notes_the_exit_status_and_stops_what_the_run_left(tmp_path):
    # the run starts a helper that ignores SIGTERM, notes its pid and exits 4 without stopping it
    code = (
        "import subprocess, sys\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, "
        'signal.SIG_IGN); open("ready", "w").close(); time.sleep(300)\'])\n'
        "import os, time\n"
        "while not os.path.exists('ready'): time.sleep(0.01)\n"
        "open('helper.pid', 'w').write(str(helper.pid))\n"
        "sys.exit(4)\n"
    )
    started = time.monotonic()
    proc, exit_path = supervise(tmp_path, code, grace=1.0)
    helper = int((tmp_path / "helper.pid").read_text())
    try:
        assert proc.returncode == 0 and exit_path.read_text() == "4\n", proc.stdout + proc.stderr
        assert not process_is_alive(helper), "the helper outlived its run's supervisor"
        assert time.monotonic() - started < 10  # SIGKILL after the 1 s grace
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)


def test_supervisor_notes_a_signalled_run_and_one_that_cannot_start(tmp_path):
    proc, exit_path = supervise(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert proc.returncode == 0 and exit_path.read_text() == f"{-signal.SIGKILL}\n"
    from cleanrl_utils.benchmark.local import SUPERVISOR

    missing = subprocess.run([sys.executable, "-I", str(SUPERVISOR), str(exit_path), "1", "--", str(tmp_path / "none")],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert exit_path.read_text() == "127\n" and "could not start the command" in missing.stdout
    assert not list(tmp_path.glob("*.tmp")), "a temporary exit file was left"


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def hold_lock(folder: Path, seconds: float) -> subprocess.Popen:
    """A process that holds `folder`'s lock for `seconds`, as the supervisors of a killed runner do."""
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(folder / ".benchmark.lock"), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "locked\n"
    return holder


def test_folder_locked_by_killed_runners_runs_is_awaited_then_taken(tmp_path, capsys):
    from cleanrl_utils.benchmark import BadInput
    from cleanrl_utils.benchmark.ledger import DirectoryLock

    dead = dead_pid()
    (tmp_path / ".benchmark.lock").write_text(f"{dead}\n")
    holder = hold_lock(tmp_path, 1.0)
    try:
        started = time.monotonic()
        lock = DirectoryLock(tmp_path, wait_for_killed=20)
        assert 0.3 < time.monotonic() - started < 15
        assert f"the runs of a killed benchmark (pid {dead}) are stopping; waiting" in capsys.readouterr().err
        assert (tmp_path / ".benchmark.lock").read_text() == f"{os.getpid()}\n"
        lock.release()
    finally:
        holder.kill()
        holder.wait()

    holder = hold_lock(tmp_path, 60)
    (tmp_path / ".benchmark.lock").write_text(f"{dead}\n")
    try:
        with pytest.raises(BadInput, match=rf"still locked by the runs of a killed benchmark \(pid {dead}\) after 0.5 s"):
            DirectoryLock(tmp_path, wait_for_killed=0.5)
        (tmp_path / ".benchmark.lock").write_text(f"{holder.pid}\n")  # a live holder: refused at once
        started = time.monotonic()
        with pytest.raises(BadInput, match=rf"in use by another benchmark \(pid {holder.pid}\)"):
            DirectoryLock(tmp_path, wait_for_killed=20)
        assert time.monotonic() - started < 1
    finally:
        holder.kill()
        holder.wait()


# --- priority -------------------------------------------------------------------------------------------


def test_a_niced_runner_keeps_its_runs_niced_in_their_own_sessions(tmp_path):
    """Each run gets a session of its own, and so (Linux) a scheduling autogroup of its own, which the scheduler
    weighs at nice 0 whatever its processes' niceness: the runner gives it the niceness it was started with."""
    switch = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not switch.is_file() or switch.read_text().strip() != "1":
        pytest.skip("this kernel does not group sessions for the scheduler (sched_autogroup_enabled is off)")
    command = "sh -c 'cat /proc/self/autogroup' sh"  # the runner's --env-id and --seed become sh's $1..$4
    args = ("--env-ids", "A-v1", "--num-seeds", "1", "--workers", "1", "--command", command, "--log-dir", "logs")
    proc = subprocess.run(
        ["nice", "-n", "19", sys.executable, "-m", "cleanrl_utils.benchmark", *args],
        cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (log,) = log_files(tmp_path / "logs").values()
    assert re.search(r"^/autogroup-\d+ nice 19$", log, re.MULTILINE), log
