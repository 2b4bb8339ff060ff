"""Local mode of the benchmark: the runs as subprocesses, a few at a time, with progress and a clean stop."""

import os
import signal
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType

from cleanrl_utils.benchmark.common import (
    STOP_GRACE_SECONDS,
    BadInput,
    RunSpec,
    describe_exit,
    share_cores,
    tagged_wandb_tags,
)
from cleanrl_utils.benchmark.ledger import (
    FAILED,
    FINISHED,
    RUN_NAME_FILE,
    RUNNING,
    STOPPED,
    Ledger,
    exit_file,
    read_exit_file,
    run_name_file,
)
from cleanrl_utils.benchmark.supervise import die_with, group_exists, signal_group

POLL_SECONDS = 0.1
PROGRESS_EVERY_SECONDS = 10.0
# Each run goes through this small stdlib-only script (see its docstring): it notes the run's exit status and stops
# the run's whole process group when the runner stops or dies.
SUPERVISOR = Path(__file__).with_name("supervise.py")
# How long a supervisor may take past its grace period before the runner kills it (its run then gets SIGTERM).
SUPERVISOR_MARGIN_SECONDS = 5.0
FAILURE_TAIL_LINES = 20
DEFAULT_LOG_ROOT = "benchmark_logs"


@dataclass
class Outcome:
    """What became of a run that was started: its exit code (None when stopped by the benchmark), and the error of
    its `on_success` callback when that raised."""

    spec: RunSpec
    log_path: Path
    returncode: int | None
    seconds: float
    callback_error: str | None = None

    @property
    def failed(self) -> bool:
        return self.returncode not in (0, None) or self.callback_error is not None

    def describe(self) -> str:
        if self.callback_error is not None:
            return f"exit code 0, then handling its result failed: {self.callback_error}"
        return describe_exit(self.returncode)


def run_environment(tag: str | None, auto_tag: bool = True) -> dict[str, str]:
    """Environment for the runs: ours, plus the git `tag` (with `auto_tag`), and unbuffered Python so logs can be
    followed live."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if auto_tag:
        tags = tagged_wandb_tags(env.get("WANDB_TAGS"), tag)
        if tags is not None:
            env["WANDB_TAGS"] = tags
    return env


def new_log_dir(requested: str | None) -> Path:
    """The requested folder, or a fresh timestamped one under benchmark_logs/ that no earlier benchmark used."""
    if requested is not None:
        path = Path(requested)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise BadInput(f"cannot create --log-dir {requested!r}: {error}") from None
        return path
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        path = Path(DEFAULT_LOG_ROOT) / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise BadInput(f"cannot create a new log folder under {DEFAULT_LOG_ROOT}/")


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def estimate_time_left(finished_seconds: list[float], running_elapsed: list[float], queued: int, workers: int) -> float | None:
    """Rough time left: the mean duration of finished runs for each run still to do, shared among the workers.

    Runs already going are counted for what is left of a mean run. None until a run has finished.
    """
    if not finished_seconds:
        return None
    mean = sum(finished_seconds) / len(finished_seconds)
    remaining = len(running_elapsed) + queued
    if remaining == 0:
        return 0.0
    work_left = queued * mean + sum(max(mean - elapsed, 0.0) for elapsed in running_elapsed)
    return work_left / min(workers, remaining)


def log_tail(path: Path, lines: int = FAILURE_TAIL_LINES) -> list[str]:
    """The last lines of a log file, reading only its end (training logs can be long)."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(log.tell() - 64 * 1024, 0))
            text = log.read().decode(errors="replace")
    except OSError as error:
        return [f"(cannot read the log: {error})"]
    return text.splitlines()[-lines:]


def stop_process_group(process: subprocess.Popen, grace_seconds: float) -> None:
    """Stop a process started with `start_new_session` and everything it started: SIGTERM to its group, SIGKILL
    to what is left after `grace_seconds`; the process is reaped."""
    signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        process.poll()  # a finished leader is reaped, so that only live members keep the group
        if not group_exists(process.pid):
            break
        time.sleep(POLL_SECONDS)
    signal_group(process.pid, signal.SIGKILL)  # also reaches children still alive after their parent exited
    process.wait()


@dataclass
class _Running:
    spec: RunSpec
    process: subprocess.Popen  # the run's supervisor
    log_path: Path
    exit_path: Path  # where the supervisor writes the run's exit status
    started: float

    def returncode(self) -> int | None:
        """The run's exit status once its supervisor has ended: from the exit file, else the supervisor's own."""
        noted = read_exit_file(self.exit_path)
        return noted if noted is not None else self.process.returncode


class LocalRunner:
    """Runs the commands as local subprocesses, at most `workers` at a time.

    Each run goes through a supervisor (`supervise.py`) in a session of its own, and runs in a process group of its
    own: a Ctrl-C at the terminal reaches only the runner, which then has every supervisor stop its run together with
    whatever the run started. The supervisors keep `keep_fds` (the log folder's lock) open until their runs have
    stopped, and stop them by themselves when the runner dies.
    """

    def __init__(
        self,
        runs: list[RunSpec],
        workers: int,
        log_dir: Path,
        env: dict[str, str],
        on_success: Callable[[RunSpec], None] | None = None,
        ledger: Ledger | None = None,
        keep_fds: tuple[int, ...] = (),
    ):
        if workers < 1:  # with none, the queue would wait forever
            raise ValueError(f"LocalRunner needs at least 1 worker, got {workers}")
        self.queue = deque(runs)
        self.on_success = on_success  # called as each run exits with 0 (e.g. to summarise it before the next ends)
        self.ledger = ledger  # what a later start of the same benchmark continues from
        self.keep_fds = keep_fds
        self.total = len(runs)
        self.workers = workers
        self.log_dir = log_dir
        self.env = share_cores(env, workers)  # torch threads: each run its share of the cores
        self.running: dict[int, _Running] = {}
        self.outcomes: list[Outcome] = []
        self.signals: list[int] = []
        self.started = time.monotonic()
        self._last_progress: tuple[int, ...] | None = None
        self._last_progress_time = 0.0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only note it: the main loop stops the runs at a point where its bookkeeping is consistent.
        self.signals.append(signum)

    def install_signal_handlers(self) -> None:
        # Set explicitly: a runner started in the background by a script inherits SIGINT ignored.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)

    def run(self) -> int:
        """Run everything; returns the exit code for the benchmark."""
        print(
            f"benchmark: {self.total} runs, up to {self.workers} at a time, logs in {self.log_dir}/"
            + (f" (OMP_NUM_THREADS={self.env['OMP_NUM_THREADS']})" if "OMP_NUM_THREADS" in self.env else ""),
            file=sys.stderr,
        )
        try:
            while self.queue or self.running:
                if self.signals:
                    return self._stop(self.signals[0])
                self._collect_finished()
                while self.queue and len(self.running) < self.workers and not self.signals:
                    self._launch(self.queue.popleft())
                self._report_progress()
                time.sleep(POLL_SECONDS)
        finally:
            # Never leave runs behind, whatever made the loop end: SIGUSR1 has the supervisors kill their runs now.
            stopping = list(self.running.values())
            for run in stopping:
                signal_process(run.process, signal.SIGUSR1)
            self._wait_for_supervisors(stopping, SUPERVISOR_MARGIN_SECONDS)
        return self._final_report()

    def _launch(self, spec: RunSpec) -> None:
        log_path = self.log_dir / spec.log_name
        exit_path = exit_file(self.log_dir, spec).resolve()
        env = self.env
        try:
            exit_path.unlink(missing_ok=True)  # an earlier start's: gone before the ledger says "running" again
        except OSError:
            pass  # the log cannot be written either: that failure is reported below
        if self.ledger is not None:
            env = self.ledger.run_env(spec, env) | {RUN_NAME_FILE: str(run_name_file(self.log_dir, spec).resolve())}
            # noted before the log is made: a log folder never holds a log that its ledger does not know
            self.ledger.record(spec, RUNNING, threads=env.get("OMP_NUM_THREADS"))
        try:
            # a continued benchmark's log goes on after what the earlier start wrote
            log = log_path.open("a" if self.ledger is not None else "w")
        except OSError as error:  # e.g. the log folder was removed mid-benchmark: this run fails, the rest go on
            print(f"benchmark: cannot write the log of {spec.command}: {error}", file=sys.stderr)
            self._not_started(spec, log_path)
            return
        with log:
            log.write(f"$ {spec.command}\n")
            log.flush()
            try:
                process = subprocess.Popen(
                    [sys.executable, "-I", str(SUPERVISOR), str(exit_path), str(STOP_GRACE_SECONDS), "--", *spec.argv],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=spec.cwd,
                    start_new_session=True,
                    pass_fds=self.keep_fds,
                    preexec_fn=die_with(os.getpid()),  # a killed runner leaves no run: each stops as on Ctrl-C
                )
            except OSError as error:
                log.write(f"benchmark: could not start the command: {error}\n")
                self._not_started(spec, log_path)
                return
        self.running[process.pid] = _Running(spec, process, log_path, exit_path, time.monotonic())

    def _not_started(self, spec: RunSpec, log_path: Path) -> None:
        self.outcomes.append(Outcome(spec, log_path, 127, 0.0))
        if self.ledger is not None:
            self.ledger.record(spec, FAILED, 127)

    def _collect_finished(self) -> None:
        for pid, run in list(self.running.items()):
            if run.process.poll() is not None:
                del self.running[pid]
                returncode = run.returncode()
                outcome = Outcome(run.spec, run.log_path, returncode, time.monotonic() - run.started)
                if returncode == 0 and self.on_success is not None:
                    outcome.callback_error = self._call_on_success(run)
                self.outcomes.append(outcome)
                if self.ledger is not None:
                    self.ledger.record(run.spec, FAILED if outcome.failed else FINISHED, returncode)

    def _call_on_success(self, run: _Running) -> str | None:
        """Call `on_success` for a run that succeeded; its error, if any, as one line (the traceback goes to the log).

        An error there (a summary that cannot be written, a run that logged nothing to summarise) fails this
        run only: the other runs go on.
        """
        assert self.on_success is not None
        try:
            self.on_success(run.spec)
        except Exception as error:
            message = " ".join(f"{type(error).__name__}: {error}".split())
            try:
                with run.log_path.open("a") as log:
                    log.write(f"benchmark: handling the finished run failed:\n{traceback.format_exc()}")
            except OSError:
                pass
            print(f"benchmark: run {run.spec.command} finished, but handling its result failed: {message}", file=sys.stderr)
            return message
        return None

    def _counts(self) -> tuple[int, int, int, int]:
        """Succeeded, failed, running and queued runs (runs stopped by the benchmark are in none of them)."""
        succeeded = sum(1 for outcome in self.outcomes if outcome.returncode == 0 and not outcome.failed)
        failed = sum(1 for outcome in self.outcomes if outcome.failed)
        return succeeded, failed, len(self.running), len(self.queue)

    def _report_progress(self) -> None:
        """A progress line when the counts change, and every few seconds while they do not."""
        counts = self._counts()
        now = time.monotonic()
        if counts == self._last_progress and now - self._last_progress_time < PROGRESS_EVERY_SECONDS:
            return
        self._last_progress, self._last_progress_time = counts, now
        succeeded, failed, running, queued = counts
        time_left = estimate_time_left(
            [outcome.seconds for outcome in self.outcomes],
            [now - run.started for run in self.running.values()],
            queued,
            self.workers,
        )
        left = "unknown" if time_left is None else f"~{format_duration(time_left)}"
        print(
            f"benchmark: {succeeded} done, {failed} failed, {running} running, {queued} queued"
            f" | elapsed {format_duration(now - self.started)}, time left {left}",
            file=sys.stderr,
            flush=True,
        )

    def _stop(self, signum: int) -> int:
        """Stop every run and its children: each supervisor sends SIGTERM to its run's process group and SIGKILL to
        what is left after the grace period; a second signal to the runner has them kill at once."""
        name = signal.Signals(signum).name
        stopping = list(self.running.values())
        print(f"benchmark: {name} received; stopping {len(stopping)} running runs", file=sys.stderr, flush=True)
        for run in stopping:
            signal_process(run.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS + SUPERVISOR_MARGIN_SECONDS
        signals_seen = len(self.signals)
        while time.monotonic() < deadline and any(run.process.poll() is None for run in stopping):
            if len(self.signals) > signals_seen:  # a second Ctrl-C means "now"
                signals_seen = len(self.signals)
                for run in stopping:
                    signal_process(run.process, signal.SIGUSR1)
            time.sleep(POLL_SECONDS)
        for run in stopping:
            signal_process(run.process, signal.SIGUSR1)
        self._wait_for_supervisors(stopping, SUPERVISOR_MARGIN_SECONDS)
        for run in stopping:
            returncode = run.returncode()
            # a run that got to its end meanwhile finished; the others were stopped
            finished = returncode == 0
            self.outcomes.append(Outcome(run.spec, run.log_path, 0 if finished else None, time.monotonic() - run.started))
            if self.ledger is not None:
                self.ledger.record(run.spec, FINISHED if finished else STOPPED, returncode)
        self.running.clear()

        for run in stopping:
            print(f"benchmark: stopped: {run.spec.command}  (log: {run.log_path})", file=sys.stderr)
        succeeded, failed, _, queued = self._counts()
        print(
            f"benchmark: interrupted after {format_duration(time.monotonic() - self.started)}: {succeeded} done,"
            f" {failed} failed, {len(stopping)} stopped, {queued} never started (of {self.total})",
            file=sys.stderr,
        )
        return 128 + signum

    @staticmethod
    def _wait_for_supervisors(runs: list[_Running], seconds: float) -> None:
        """Reap the supervisors of `runs`; one still there after `seconds` is killed (its run then gets SIGTERM)."""
        deadline = time.monotonic() + seconds
        for run in runs:
            try:
                run.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                run.process.kill()
                run.process.wait()

    def _final_report(self) -> int:
        failures = [outcome for outcome in self.outcomes if outcome.failed]
        for number, outcome in enumerate(failures, start=1):
            print(f"\nbenchmark: failed run {number}/{len(failures)}: {outcome.describe()}", file=sys.stderr)
            print(f"  command: {outcome.spec.command}", file=sys.stderr)
            print(f"  log: {outcome.log_path}", file=sys.stderr)
            print("  last lines of the log:", file=sys.stderr)
            for line in log_tail(outcome.log_path):
                print(f"  | {line}", file=sys.stderr)
        succeeded = len(self.outcomes) - len(failures)
        print(
            f"benchmark: finished {self.total} runs in {format_duration(time.monotonic() - self.started)}:"
            f" {succeeded} succeeded, {len(failures)} failed; logs in {self.log_dir}/",
            file=sys.stderr,
        )
        return 1 if failures else 0


def signal_process(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        try:
            process.send_signal(signum)
        except ProcessLookupError:
            pass


def print_commands(runs: list[RunSpec]) -> None:
    for run in runs:
        print(run.command)
