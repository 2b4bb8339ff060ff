"""What a benchmark's log folder remembers, so that running the same benchmark again continues it.

The runner keeps `benchmark.json` in its log folder: the code version and the folder the benchmark was started in,
and each run's command, log name, how it ended and the OMP_NUM_THREADS it was started with. Each run also writes the
name of the run folder it made (`runs/<name>`) into `<log name>.run` beside its log (`CLEANRL_RUN_NAME_FILE`), and
its supervisor writes its exit status into `<log name>.exit` when it ends. Started again with the same `--log-dir`,
the benchmark

- skips a run that finished (exit code 0, in the ledger or, when the runner was killed first, in its `.exit`),
- resumes a run that did not (stopped, killed, failed, or still "running" because the runner itself was
  killed) from its run folder's newest checkpoint: `<command> --resume runs/<name>`, with its thread count,
- starts again from scratch a run that left no whole checkpoint (its command has no `--checkpoint-frequency`,
  it stopped before the first one, or the only ones it left are cut short), leaving the old run folder as it was.

It refuses, in one line: a ledger that is not what the runner writes (cut short, or hand-edited into another
shape); a folder with run logs and no ledger; another command's runs; runs of another code version; and a start
from another folder than the first one (the commands' paths and run folders are relative to it).

A log folder has one runner at a time: `DirectoryLock` holds an exclusive `flock` on `.benchmark.lock` for
the runner's whole life, and the runs' supervisors inherit it, so the folder stays locked until the last run of a
killed runner has stopped. A second runner on the same folder is refused at once instead of overwriting the first
one's logs; one started right after a runner was killed waits for its runs to stop.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cleanrl_utils.benchmark.common import STOP_GRACE_SECONDS, BadInput, RunSpec, describe_exit
from cleanrl_utils.runtime import atomic

LEDGER_NAME = "benchmark.json"
LOCK_NAME = ".benchmark.lock"
FINISHED, FAILED, STOPPED, RUNNING = "finished", "failed", "stopped", "running"
STATUSES = (FINISHED, FAILED, STOPPED, RUNNING)
# 1: written before the version was (code, runs: log, status, returncode); 2: adds cwd and each run's threads
VERSION = 2
# A log name as RunSpec makes it: a plain file name in the log folder
LOG_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.log")
# The variable naming the file a run writes its folder name into: experiment.RUN_NAME_FILE, written out here so
# that the runner does not import torch and Gymnasium (a test checks the two agree).
RUN_NAME_FILE = "CLEANRL_RUN_NAME_FILE"
# How long a runner started on a folder still locked by the runs of a killed one waits for them to stop
WAIT_FOR_KILLED_SECONDS = STOP_GRACE_SECONDS + 5.0


class DirectoryLock:
    """An exclusive lock on a log folder for as long as this process lives (or until `release`), and the runs'
    supervisors, which inherit `fd`."""

    def __init__(self, folder: Path, wait_for_killed: float = WAIT_FOR_KILLED_SECONDS) -> None:
        self.path = folder / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not self._take():
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "unknown"
            if holder.isdigit() and not process_alive(int(holder)):
                # the runner was killed: its runs' supervisors hold the lock until the runs have stopped
                print(f"benchmark: the runs of a killed benchmark (pid {holder}) are stopping; waiting", file=sys.stderr)
                deadline = time.monotonic() + wait_for_killed
                while not self._take() and time.monotonic() < deadline:
                    time.sleep(0.1)
                if not self._take():
                    os.close(self.fd)
                    raise BadInput(
                        f"{folder} is still locked by the runs of a killed benchmark (pid {holder}) after"
                        f" {wait_for_killed:g} s; stop them (ps -ef | grep supervise.py) or give another --log-dir"
                    )
            else:
                os.close(self.fd)
                raise BadInput(f"{folder} is in use by another benchmark (pid {holder}); give this one another --log-dir")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def _take(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        os.close(self.fd)


def process_alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def run_name_file(log_dir: Path, spec: RunSpec) -> Path:
    """Where the run of `spec` writes its run folder's name."""
    return (log_dir / spec.log_name).with_suffix(".run")


def exit_file(log_dir: Path, spec: RunSpec) -> Path:
    """Where the supervisor of the run of `spec` writes its exit status."""
    return (log_dir / spec.log_name).with_suffix(".exit")


def read_exit_file(path: Path) -> int | None:
    """The exit status a supervisor wrote to `path` (negative: killed by that signal); None when there is none."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if re.fullmatch(r"-?[0-9]{1,3}", text) else None


@dataclass
class Plan:
    """The runs to start now, and a line for each run that was found from an earlier start."""

    runs: list[RunSpec]
    found: list[str]


class Ledger:
    """`benchmark.json` of a log folder: for each run, by its command, its log name and how it stands."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.path = log_dir / LEDGER_NAME
        self.entries: dict[str, dict[str, Any]] = {}
        self.code: str | None = None  # the git version of the code the runs ran (None: not in a git repository)
        self.cwd: str | None = None  # the folder the benchmark started in (None: a version-1 ledger, which had none)
        self.version = VERSION
        self.warned = False
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError) as error:
                raise BadInput(f"cannot read {self.path} ({error!r}); give another --log-dir") from None
            if problem := self._take(data):
                raise BadInput(f"cannot read {self.path}: {problem}; fix it by hand or give another --log-dir")
        elif logs := sorted(path.name for pattern in ("*.log", "*.run", "*.exit") for path in log_dir.glob(pattern)):
            raise BadInput(
                f"{log_dir} holds run logs ({logs[0]}...) but no {LEDGER_NAME}, so what they are cannot be told;"
                " give another --log-dir"
            )

    def _take(self, data: Any) -> str | None:
        """Take what `data` (the parsed ledger) says, field by field; what is wrong with it, if anything."""
        if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
            return "it is not an object with runs"
        version = data.get("version", 1)
        if type(version) is not int or not 1 <= version <= VERSION:
            return f"its version {version!r} is not one this runner reads (1 to {VERSION}): a newer runner wrote it"
        code, cwd = data.get("code"), data.get("cwd")
        if not isinstance(code, (str, type(None))):
            return f"its code is {code!r}, not a version"
        if version >= 2 and not (isinstance(cwd, str) and os.path.isabs(cwd)):
            return f"its cwd is {cwd!r}, not an absolute path"
        logs: set[str] = set()
        for command, entry in data["runs"].items():
            if not isinstance(entry, dict):
                return f"the run {command!r} is {entry!r}, not an object"
            log, status, returncode = entry.get("log"), entry.get("status"), entry.get("returncode")
            if not isinstance(log, str) or not LOG_NAME.fullmatch(log):
                return f"the run {command!r} has the log {log!r}, not a file name ending in .log"
            if log in logs:
                return f"two runs have the log {log}"
            if status not in STATUSES:
                return f"the run {command!r} has the status {status!r}, not one of {', '.join(STATUSES)}"
            if returncode is not None and type(returncode) is not int:
                return f"the run {command!r} has the return code {returncode!r}, not a number"
            if "threads" in entry and not (
                entry["threads"] is None or (isinstance(entry["threads"], str) and entry["threads"].isdigit())
            ):
                return f"the run {command!r} has the threads {entry['threads']!r}, not a number"
            logs.add(log)
        self.version, self.code, self.cwd = version, code, cwd
        self.entries = {command: dict(entry) for command, entry in data["runs"].items()}
        return None

    def require_cwd(self, cwd: Path) -> None:
        """Refuse to go on from another folder than the benchmark started in: its commands' paths and its run
        folders are relative to that one."""
        if self.entries and self.cwd is not None and not same_folder(cwd, Path(self.cwd)):
            raise BadInput(
                f"{self.log_dir} holds a benchmark started in {self.cwd}, and this is {cwd.resolve()};"
                " start it again from there (its commands and run folders are relative to it)"
            )
        self.cwd = self.cwd if self.entries and self.cwd is not None else str(cwd.resolve())

    def require_code(self, code: str | None) -> list[str]:
        """Refuse to go on with runs that other code made: a benchmark continues only on the code it started with.

        The version is checked whether or not the runs are tagged with it. A version-1 ledger written with
        --no-auto-tag knows none: its runs are taken as this code's, which the returned line says."""
        if not self.entries:
            self.code = code
            return []
        if self.version == 1 and self.code is None:
            self.code = code
            return [
                f"{self.path} (an older runner's, with --no-auto-tag) does not say which code its runs ran; taken as {code}"
            ]
        if code != self.code:
            raise BadInput(
                f"{self.log_dir} holds runs of the code at {self.code or 'no git version'}, and this folder is at"
                f" {code or 'no git version'}; {how_to_continue(self.code)}"
            )
        return []

    def record(self, spec: RunSpec, status: str, returncode: int | None = None, **fields: Any) -> None:
        """Note how the run of `spec` stands now, on disk at once (the runner may be killed any time); `fields`
        (threads) are kept for the later notes."""
        entry = self.entries.setdefault(key(spec), {})
        entry.update(log=spec.log_name, status=status, returncode=returncode, **fields)
        self.save()

    def save(self) -> None:
        data = {"version": VERSION, "code": self.code, "cwd": self.cwd, "runs": self.entries}
        try:
            atomic.write_text(self.path, json.dumps(data, indent=1) + "\n")
        except OSError as error:  # the runs go on; only a later start cannot continue them
            if not self.warned:
                print(f"benchmark: warning: cannot write {self.path}: {error}", file=sys.stderr)
            self.warned = True

    def run_env(self, spec: RunSpec, env: dict[str, str]) -> dict[str, str]:
        """`env` for the run of `spec`, with the OMP_NUM_THREADS it was first started with (torch's numbers can
        depend on the thread count): a continued run computes as it began, whatever --workers is now."""
        entry = self.entries.get(key(spec))
        if entry is None or "threads" not in entry:  # a new run, or a version-1 ledger's, which did not say
            return env
        rest = {name: value for name, value in env.items() if name != "OMP_NUM_THREADS"}
        return rest if entry["threads"] is None else rest | {"OMP_NUM_THREADS": entry["threads"]}

    def run_folder(self, log_name: str) -> Path | None:
        """The run folder that the run logged as `log_name` made (relative to where it starts), if it said."""
        try:
            name = (self.log_dir / log_name).with_suffix(".run").read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not name or "/" in name or "\0" in name or name in (".", ".."):
            return None
        return Path("runs") / name

    def plan(self, runs: list[RunSpec], env: dict[str, str] | None = None) -> Plan:
        """Which of `runs` to start, and how (fresh, or resumed), from what the earlier starts left; `env` is the
        runs' environment, to say where a continued run keeps another thread count."""
        logs = {entry["log"]: command for command, entry in self.entries.items()}
        for spec in runs:
            if logs.get(spec.log_name, key(spec)) != key(spec):  # same log name, other command: its log would go
                raise BadInput(
                    f"{self.log_dir} holds a benchmark of another command ({logs[spec.log_name]}); give another --log-dir"
                )
        to_start, found = [], []
        for spec in runs:
            entry = self.entries.get(key(spec))
            if entry is None:
                to_start.append(spec)
                continue
            folder = self.run_folder(entry["log"])
            where = f" ({folder})" if folder else ""
            status = entry["status"]
            noted = read_exit_file((self.log_dir / entry["log"]).with_suffix(".exit")) if status == RUNNING else None
            if status == FINISHED or noted == 0:
                late = ", its end noted after the benchmark stopped" if status != FINISHED else ""
                if status != FINISHED:
                    entry.update(status=FINISHED, returncode=0)
                found.append(f"{spec.log_name}: finished earlier{where}, skipped{late}")
                continue
            ended = "was running when the benchmark stopped" if status == RUNNING else status
            if noted is not None:  # its supervisor saw it end after the runner was gone
                ended += f", then ended ({describe_exit(noted)})"
            spec = replace(spec, name=entry["log"].removesuffix(".log"))  # its log goes on (numbers shift with more seeds)
            threads = ""
            if env is not None and "threads" in entry and entry["threads"] != env.get("OMP_NUM_THREADS"):
                threads = f", with OMP_NUM_THREADS={entry['threads'] or '<unset>'} as it started"
            cwd = spec.cwd or Path.cwd()
            usable, cut_short = whole_checkpoints(cwd / folder / "checkpoints") if folder else (False, [])
            if usable:
                found.append(f"{spec.log_name}: {ended}; resuming from {folder}{threads}")
                to_start.append(replace(spec, argv=[*spec.argv, "--resume", str(folder)]))
                continue
            if cut_short:
                why = f"{folder} has only checkpoints cut short ({', '.join(cut_short)})"
            else:
                why = f"{folder} has no checkpoint" if folder else "it made no run folder"
            found.append(
                f"{spec.log_name}: {ended}; starting again ({why}; --checkpoint-frequency makes runs resumable){threads}"
            )
            to_start.append(spec)
        if left := len(set(self.entries) - {key(spec) for spec in runs}):
            found.append(f"{left} runs of an earlier start are not part of this benchmark; left as they are")
        return Plan(to_start, found)


def whole_checkpoints(folder: Path) -> tuple[bool, list[str]]:
    """Whether `folder` holds a checkpoint that `--resume` would take (one that is not cut short), and the names
    of those cut short. A file of another format counts: `--resume` refuses it, an error the user must see."""
    from cleanrl_utils.runtime import plain_data  # NumPy, only when there is a run folder to look into

    names = sorted(folder.glob("checkpoint_*.pt")) if folder.is_dir() else []
    cut_short = []
    for path in names:
        try:
            plain_data.peek_text(path, "run_name")
        except plain_data.CutShort:
            cut_short.append(path.name)
        except (plain_data.FormatError, OSError):
            pass
    return len(cut_short) < len(names), cut_short


def same_folder(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def how_to_continue(code: str | None) -> str:
    """What to do with a log folder of runs of the code at `code`, which is not the code here."""
    new = "give another --log-dir to start a new benchmark"
    if code is None or code.endswith("-dirty"):  # edits that no commit holds
        return new
    match = re.fullmatch(r"(?:.*-)?g([0-9a-f]{4,40})", code)
    revision = match.group(1) if match else code
    return f"to continue it, start it again from a checkout of {revision} (git checkout {revision}), or {new}"


def key(spec: RunSpec) -> str:
    """A run's identity in the ledger: its command, without the `--resume` a continued run is given."""
    argv = spec.argv[:-2] if spec.argv[-2:-1] == ["--resume"] else spec.argv
    return shlex.join(argv)
