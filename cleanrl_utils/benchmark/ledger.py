"""What a benchmark's log folder remembers, so that running the same benchmark again continues it.

The runner keeps `benchmark.json` in its log folder: each run's command and how it ended. Each run
also writes the name of the run folder it made (`runs/<name>`) into `<log name>.run` beside its log
(`CLEANRL_RUN_NAME_FILE`). Started again with the same `--log-dir`, the benchmark

- skips a run that finished (exit code 0),
- resumes a run that did not (stopped, killed, failed, or still "running" because the runner itself was
  killed) from its run folder's newest checkpoint: `<command> --resume runs/<name>`,
- starts again from scratch a run that left no checkpoint (its command has no `--checkpoint-frequency`,
  or it stopped before the first one), leaving the old run folder as it was.

A log folder has one runner at a time: `DirectoryLock` holds an exclusive `flock` on `.benchmark.lock` for
the runner's whole life, so a second runner on the same folder is refused at once instead of overwriting
the first one's logs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cleanrl_utils import atomic
from cleanrl_utils.benchmark.common import BadInput, RunSpec

LEDGER_NAME = "benchmark.json"
LOCK_NAME = ".benchmark.lock"
FINISHED, FAILED, STOPPED, RUNNING = "finished", "failed", "stopped", "running"
# The variable naming the file a run writes its folder name into: experiment.RUN_NAME_FILE, written out here so
# that the runner does not import torch and Gymnasium (a test checks the two agree).
RUN_NAME_FILE = "CLEANRL_RUN_NAME_FILE"


class DirectoryLock:
    """An exclusive lock on a log folder for as long as this process lives (or until `release`)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            raise BadInput(
                f"{folder} is in use by another benchmark (pid {holder}); give this one another --log-dir"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        os.close(self.fd)


def run_name_file(log_dir: Path, spec: RunSpec) -> Path:
    """Where the run of `spec` writes its run folder's name."""
    return (log_dir / spec.log_name).with_suffix(".run")


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
        self.code: str | None = None  # the git tag of the code the runs ran (None: not tagged)
        self.warned = False
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                self.code = data.get("code")
                self.entries = {str(command): dict(entry) for command, entry in data["runs"].items()}
                for entry in self.entries.values():
                    str(entry["log"]), str(entry["status"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
                raise BadInput(f"cannot read {self.path} ({error!r}); give another --log-dir") from None

    def require_code(self, code: str | None) -> None:
        """Refuse to go on with runs that other code made: a benchmark continues only on the code it started with."""
        if self.entries and code is not None and self.code is not None and code != self.code:
            raise BadInput(
                f"{self.log_dir} holds runs of the code at {self.code}, and this folder is at {code};"
                " give another --log-dir to start a new benchmark"
            )
        self.code = self.code or code

    def record(self, spec: RunSpec, status: str, returncode: int | None = None) -> None:
        """Note how the run of `spec` stands now, on disk at once (the runner may be killed any time)."""
        self.entries[key(spec)] = {"log": spec.log_name, "status": status, "returncode": returncode}
        try:
            atomic.write_text(self.path, json.dumps({"code": self.code, "runs": self.entries}, indent=1) + "\n")
        except OSError as error:  # the runs go on; only a later start cannot continue them
            if not self.warned:
                print(f"benchmark: warning: cannot write {self.path}: {error}", file=sys.stderr)
            self.warned = True

    def run_folder(self, log_name: str) -> Path | None:
        """The run folder that the run logged as `log_name` made (relative to where it starts), if it said."""
        try:
            name = (self.log_dir / log_name).with_suffix(".run").read_text().strip()
        except OSError:
            return None
        if not name or "/" in name or name in (".", ".."):
            return None
        return Path("runs") / name

    def plan(self, runs: list[RunSpec]) -> Plan:
        """Which of `runs` to start, and how (fresh, or resumed), from what the earlier starts left."""
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
            if entry["status"] == FINISHED:
                found.append(f"{spec.log_name}: finished earlier{where}, skipped")
                continue
            ended = "was running when the benchmark stopped" if entry["status"] == RUNNING else entry["status"]
            spec = replace(spec, name=entry["log"].removesuffix(".log"))  # its log goes on (numbers shift with more seeds)
            cwd = spec.cwd or Path.cwd()
            if folder is not None and any((cwd / folder / "checkpoints").glob("checkpoint_*.pt")):
                found.append(f"{spec.log_name}: {ended}; resuming from {folder}")
                to_start.append(replace(spec, argv=[*spec.argv, "--resume", str(folder)]))
            else:
                why = f"{folder} has no checkpoint" if folder else "it made no run folder"
                found.append(f"{spec.log_name}: {ended}; starting again ({why}; --checkpoint-frequency makes runs resumable)")
                to_start.append(spec)
        if left := len(set(self.entries) - {key(spec) for spec in runs}):
            found.append(f"{left} runs of an earlier start are not part of this benchmark; left as they are")
        return Plan(to_start, found)


def key(spec: RunSpec) -> str:
    """A run's identity in the ledger: its command, without the `--resume` a continued run is given."""
    argv = spec.argv[:-2] if spec.argv[-2:-1] == ["--resume"] else spec.argv
    return shlex.join(argv)
