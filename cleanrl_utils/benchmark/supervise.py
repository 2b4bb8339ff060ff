"""The supervisor of one benchmark run: starts the run, notes how it ended, and leaves nothing of it behind.

    python -I supervise.py EXIT_FILE GRACE_SECONDS -- COMMAND...

The runner starts one per run, in a session of its own, with its parent-death signal set to SIGTERM and the log
folder's lock among its open files. The supervisor starts COMMAND in a process group of its own (output where the
supervisor's goes), waits for it, and writes its exit status (`Popen.returncode`: negative for a signal) to
EXIT_FILE, whole or not at all. So

- a run's end is known even when the runner was killed before it saw it (the next start reads EXIT_FILE);
- a runner killed by SIGKILL leaves no run: each supervisor gets SIGTERM from the system and stops its run's whole
  process group, which the run's own parent-death signal alone would not reach;
- the log folder stays locked until every run of the runner has stopped, so a benchmark started again at once
  never overlaps a run that is still stopping.

Signals: SIGTERM, SIGINT or SIGHUP stop the run (SIGTERM to its group, SIGKILL to what is left after
GRACE_SECONDS); a second one, or SIGUSR1, kills it at once. After the run ends, whatever it started that is still
in its group gets the same treatment. Only the standard library is imported (`-I`: no site packages, no
PYTHONPATH), so a supervisor costs a bare interpreter's start.
"""

import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.05
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def write_whole(path: str, text: str) -> None:
    """`text` to `path` through a temporary file and a rename: a reader sees all of it or no file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)


class Supervisor:
    def __init__(self, grace_seconds: float) -> None:
        self.grace_seconds = grace_seconds
        self.pgid: int | None = None  # the run's process group, once started
        self.stop_requested = False
        self.kill_deadline: float | None = None  # when what is left of the group gets SIGKILL

    def on_signal(self, signum: int, frame: object) -> None:
        now = signum == signal.SIGUSR1 or self.stop_requested
        self.stop_requested = True
        if self.pgid is None:
            return
        if now:
            self.kill_deadline = time.monotonic()
            signal_group(self.pgid, signal.SIGKILL)
        else:
            self.kill_deadline = time.monotonic() + self.grace_seconds
            signal_group(self.pgid, signal.SIGTERM)

    def run(self, argv: list[str]) -> int | None:
        """Start `argv`, wait for it, and return its exit status (None when it could not be started)."""
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with(os.getpid())
            )
        except OSError as error:
            print(f"benchmark: could not start the command: {error}", flush=True)
            return None
        self.pgid = process.pid
        if self.stop_requested:  # a stop that came while it was starting
            self.kill_deadline = time.monotonic() + self.grace_seconds
            signal_group(self.pgid, signal.SIGTERM)
        while process.returncode is None:
            for pid, status in reap():
                if pid == process.pid:
                    process.returncode = os.waitstatus_to_exitcode(status)
            self.kill_when_due()
            time.sleep(POLL_SECONDS)
        return process.returncode

    def kill_when_due(self) -> None:
        if self.pgid is not None and self.kill_deadline is not None and time.monotonic() >= self.kill_deadline:
            signal_group(self.pgid, signal.SIGKILL)

    def clear_group(self) -> None:
        """Stop what the run left in its group: SIGTERM, then SIGKILL after the grace period (or at once)."""
        reap()
        if self.pgid is None or not group_exists(self.pgid):
            return
        if self.kill_deadline is None:
            self.kill_deadline = time.monotonic() + self.grace_seconds
            signal_group(self.pgid, signal.SIGTERM)
        while group_exists(self.pgid) and time.monotonic() < self.kill_deadline:
            time.sleep(POLL_SECONDS)
            reap()
        signal_group(self.pgid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while group_exists(self.pgid) and time.monotonic() < deadline:  # the killed are reaped, not left as zombies
            time.sleep(POLL_SECONDS)
            reap()


def reap() -> list[tuple[int, int]]:
    """Wait for every child that has ended, the run and what it left behind alike (this process is their
    subreaper): (pid, wait status) of each. Reaped, they no longer count as members of the run's group."""
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def become_subreaper() -> None:
    """Orphans of the run (a helper whose parent, the run, ended) become this process's children, not init's, so
    that they are reaped here at once; Linux only."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # 36: PR_SET_CHILD_SUBREAPER


def keep_niceness() -> None:
    """Give the new session's scheduling autogroup this process's niceness. Linux weighs each session's autogroup as a
    whole at nice 0, so without this `nice -n 19 python -m cleanrl_utils.benchmark` would not make its runs, each in
    a session of its own, yield the CPU to other work."""
    niceness = os.nice(0)
    if niceness > 0:
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(niceness))
        except OSError:  # not Linux, or autogroups off: nice applies to the process alone
            pass


def die_with(parent: int):
    """For Popen's preexec_fn (which runs after `start_new_session`'s setsid): SIGTERM to the child when `parent`
    dies, even by SIGKILL (Linux's PR_SET_PDEATHSIG), and the parent's niceness kept in the child's new session."""

    def set_parent_death_signal() -> None:
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)
        keep_niceness()

    return set_parent_death_signal


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: supervise.py EXIT_FILE GRACE_SECONDS -- COMMAND...", file=sys.stderr)
        return 2
    exit_file, grace, command = argv[0], float(argv[1]), argv[3:]
    supervisor = Supervisor(grace)
    become_subreaper()
    for signum in (*STOP_SIGNALS, signal.SIGUSR1):
        signal.signal(signum, supervisor.on_signal)
    returncode = supervisor.run(command)
    try:
        # before the group is cleared: a supervisor killed meanwhile still leaves the run's end known
        write_whole(exit_file, f"{127 if returncode is None else returncode}\n")
    except OSError as error:
        print(f"benchmark: cannot write {exit_file}: {error}", flush=True)
    supervisor.clear_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
