"""Files written whole or not at all: into a temporary file beside the target, flushed, then renamed over it.

A process killed mid-write leaves the old file (or none) and at worst a hidden `.NAME.PID.tmp` beside it,
never a truncated file under the final name; so "the file exists" can mean "the file is complete". The
temporary file is made anew (`O_EXCL`, not following a link planted under its name), and the rename replaces
whatever is at the final name, a link too, rather than writing through it.

`disk_full(error)` tells a full disk (or quota) among the errors a write raised, also where a library wraps the
`OSError` (torch) or reports a child's message (ffmpeg); `write_failure` says in a few words why a write failed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write to; renamed to `path` when the block ends without an error, removed otherwise.

    For writers that want a file name (`savefig`, `torch.save`): the writer keeps the suffix, so formats
    picked from it stay right.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")  # same folder: the rename cannot cross disks
    tmp.unlink(missing_ok=True)  # a killed write's, or a link planted under this name: the link goes, not its target
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def fsync_dir(folder: str | Path) -> None:
    """Make a rename inside `folder` durable (where the system can open a folder; the rename is atomic anyway)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    while error is not None and error not in chain and len(chain) < 16:
        chain.append(error)
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return chain


def disk_full(error: BaseException) -> bool:
    """Whether `error` (or what caused it) says the disk or the user's quota is full."""
    return any(isinstance(e, OSError) and e.errno in DISK_FULL or "No space left on device" in str(e) for e in _causes(error))


def os_error(error: BaseException) -> OSError | None:
    """The OSError behind `error`, if any (torch wraps the errors of the file it writes in a RuntimeError)."""
    return next((e for e in _causes(error) if isinstance(e, OSError)), None)


def write_failure(error: BaseException) -> str:
    """Why a write failed, in a few words."""
    if disk_full(error):
        return "no space left on the disk"
    cause = os_error(error) or error
    return " ".join((getattr(cause, "strerror", None) or str(cause)).split())[:200] or type(cause).__name__
