"""What the local and the Slurm modes of the benchmark share: runs, errors and the W&B auto-tag."""

import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# How long stopped runs get to exit after SIGTERM before their process groups are killed.
STOP_GRACE_SECONDS = 5.0


class BadInput(Exception):
    """A problem reported as one `benchmark: error:` line and exit code 2: bad input, or Slurm refusing the job."""


@dataclass(frozen=True)
class RunSpec:
    """One run of the benchmark: the training command for one environment and seed."""

    index: int
    env_id: str
    seed: int
    argv: list[str]
    cwd: Path | None = None  # the folder the run starts in (None: the runner's own)
    name: str | None = None  # names its log file (None: from its index, env and seed)

    @property
    def command(self) -> str:
        """The command as a line a shell would split back into `argv`."""
        return shlex.join(self.argv)

    @property
    def log_name(self) -> str:
        if self.name:
            return f"{self.name}.log"
        # Env ids may hold characters that do not belong in file names (e.g. "ALE/Pong-v5").
        safe_env_id = re.sub(r"[^A-Za-z0-9._-]", "_", self.env_id)
        return f"{self.index:03d}__{safe_env_id}__seed{self.seed}.log"


def _git(*git_args: str) -> str | None:
    """Output of a git command in the current folder, or None when it fails (no git, no repo, no tag)."""
    output = _git_bytes(*git_args)
    return None if output is None else os.fsdecode(output).strip()


def _git_bytes(*git_args: str) -> bytes | None:
    try:
        proc = subprocess.run(["git", *git_args], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_tag(outside: Path | None = None) -> str | None:
    """The nearest git tag of HEAD, or `no-tag-<commit count>-g<short hash>` when there is none; `-dirty` appended
    when the tree differs from HEAD, so runs of uncommitted edits never share the clean commit's tag.

    The tree differs when a tracked file changed or a file git does not ignore is new anywhere in the repository
    (a new module a script imports counts), whichever subfolder this runs in; new files under `outside` (the
    benchmark's own log folder) do not.
    Unlike the reference project, the pull request number is not looked up: that needs GitHub's API.
    """
    described = _git("describe", "--tags")
    if not described:
        count, short_hash = _git("rev-list", "--count", "HEAD"), _git("rev-parse", "--short", "HEAD")
        if count is None or short_hash is None:
            return None
        described = f"no-tag-{count}-g{short_hash}"
    # `git diff --quiet HEAD` exits 1 (None here) when tracked files differ, in the whole working tree
    changed = _git("diff", "--quiet", "HEAD") is None
    # `:/` and --full-name: the whole repository, named from its top; -z: names as they are, never quoted
    listed = _git_bytes("ls-files", "--others", "--exclude-standard", "-z", "--full-name", ":/") or b""
    top = _git("rev-parse", "--show-toplevel")
    new_files = [Path(top or ".") / os.fsdecode(name) for name in listed.split(b"\0") if name]
    if outside is not None:
        skip = outside.resolve()
        new_files = [path for path in new_files if not path.resolve().is_relative_to(skip)]
    return described + ("-dirty" if changed or new_files else "")


def append_tag(existing: str | None, tag: str) -> str:
    """`WANDB_TAGS` is comma-separated; keep what the user set and add ours."""
    return f"{existing},{tag}" if existing else tag


def tagged_wandb_tags(existing: str | None, tag: str | None) -> str | None:
    """`existing` WANDB_TAGS with the git `tag` appended; None (after a warning) when there is no tag."""
    if tag is None:
        print("benchmark: warning: the current folder is not a git repository with commits; runs get no tag", file=sys.stderr)
        return None
    tags = append_tag(existing, tag)
    print(f"benchmark: tagging runs with {tag} (WANDB_TAGS={tags})", file=sys.stderr)
    return tags


def share_cores(env: dict[str, str], workers: int, cpus: int | None = None) -> dict[str, str]:
    """`env` for runs going `workers` at a time: each gets `OMP_NUM_THREADS` = its share of the CPUs (at least one).

    A run alone uses every core it is given (torch's default); runs side by side that each did so would have
    their threads wait on each other. An `OMP_NUM_THREADS` the user set is kept, as is the default for one worker.
    `cpus` defaults to the CPUs this process may run on (a `taskset` or a container's limit counts).
    """
    if workers <= 1 or "OMP_NUM_THREADS" in env:
        return env
    cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    return env | {"OMP_NUM_THREADS": str(max(1, cpus // workers))}


def describe_exit(returncode: int | None) -> str:
    """How a process ended, for an error message: `exit code N`, `killed by SIGNAME`, or (None) stopped by the benchmark."""
    if returncode is None:
        return "stopped by the benchmark"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"
