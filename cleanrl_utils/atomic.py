"""Files written whole or not at all: into a temporary file beside the target, flushed, then renamed over it.

A process killed mid-write leaves the old file (or none) and at worst a hidden `.NAME.PID.tmp` beside it,
never a truncated file under the final name; so "the file exists" can mean "the file is complete".
"""

from __future__ import annotations

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
