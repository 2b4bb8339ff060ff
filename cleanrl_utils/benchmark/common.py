"""What the local and the Slurm modes of the benchmark share: runs, errors and the W&B auto-tag."""

import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


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
    try:
        proc = subprocess.run(["git", *git_args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_tag() -> str | None:
    """The nearest git tag of HEAD, or `no-tag-<commit count>-g<short hash>` when there is none; `-dirty` appended
    when tracked files differ from HEAD, so runs of uncommitted edits never share the clean commit's tag.

    Unlike the reference project, the pull request number is not looked up: that needs GitHub's API.
    """
    described = _git("describe", "--tags", "--dirty")
    if described:
        return described
    count, short_hash = _git("rev-list", "--count", "HEAD"), _git("rev-parse", "--short", "HEAD")
    if count is None or short_hash is None:
        return None
    # `git diff --quiet HEAD` exits 1 (None here) when tracked files differ, as `describe --dirty` counts them
    dirty = "" if _git("diff", "--quiet", "HEAD") is not None else "-dirty"
    return f"no-tag-{count}-g{short_hash}{dirty}"


def append_tag(existing: str | None, tag: str) -> str:
    """`WANDB_TAGS` is comma-separated; keep what the user set and add ours."""
    return f"{existing},{tag}" if existing else tag


def tagged_wandb_tags(existing: str | None) -> str | None:
    """`existing` WANDB_TAGS with the git tag appended; None (after a warning) when there is no tag."""
    tag = git_tag()
    if tag is None:
        print("benchmark: warning: the current folder is not a git repository with commits; runs get no tag", file=sys.stderr)
        return None
    tags = append_tag(existing, tag)
    print(f"benchmark: tagging runs with {tag} (WANDB_TAGS={tags})", file=sys.stderr)
    return tags


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
