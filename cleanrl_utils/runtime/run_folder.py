"""A run folder has one writer: the run that made it, then each of its resumes in turn.

`claim` makes a new run's folder `runs/{name}` with `os.mkdir`, which only one process can do for one name: a
name taken meanwhile (another run started in the same second with the same env id, exp name and seed) is not
used, and the next free one (`name-2`, `name-3`...) is made instead. `lock` takes the folder's writer lock, an
`fcntl.flock` on `runs/{name}/.writer.lock` held for as long as the run's process (or the `WriterLock`) lives; a
second writer (a second `--resume` of the same folder) is refused at once, told the pid of the one that holds it.
The operating system drops the lock when the holder ends, however it ends (SIGKILL too), so a stale lock file
never blocks a resume.

A run folder handed over by someone else may hold symbolic links where the run writes (the folder itself, its
`checkpoints/` folder, the lock file, the run's video folder): those are refused, so that a run never writes
through a link to a place outside its folders.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

LOCK_FILE = ".writer.lock"
ROOT = "runs"


class RunFolderError(Exception):
    """A run folder that this run cannot write; the message is one line for the user."""


class WriterLock:
    """The writer lock of one run folder, held until `release` (or until this object or its process is gone)."""

    def __init__(self, folder: Path, file: object) -> None:
        self.folder, self._file = folder, file
        self.made_root = False  # `claim` made `runs/` itself (removed again with an unused folder)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the last descriptor drops the flock
            self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None


def refuse_links(*paths: str | Path) -> None:
    """RunFolderError if any of `paths` is a symbolic link."""
    for path in paths:
        if os.path.islink(path):
            raise RunFolderError(f"{path} is a symbolic link; a run writes only into folders of its own")


def lock(folder: str | Path) -> WriterLock:
    """Take the writer lock of `folder` (made if missing), or RunFolderError naming the pid that holds it."""
    folder = Path(folder)
    refuse_links(folder, folder / LOCK_FILE)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise RunFolderError(f"cannot open the run's lock file {path}: {e.strerror}") from None
    file = os.fdopen(fd, "r+b", buffering=0)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        file.close()
        raise RunFolderError(f"{path} is not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = file.read(32).decode("ascii", "replace").strip() or "unknown"
        file.close()
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise RunFolderError(f"cannot lock the run folder {folder}: {e.strerror}") from None
        raise RunFolderError(busy(folder, holder)) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return WriterLock(folder, file)


def busy(folder: str | Path, holder: str) -> str:
    return f"{folder} is being written by another run (pid {holder}); one run at a time writes a run folder"


def writer_of(folder: str | Path) -> str | None:
    """The pid (as its lock file says) of the run that holds the writer lock of `folder` now, or None: for a resume to
    be refused before its slow imports. `lock` is what keeps a second writer out; this look only tells it sooner,
    and writes nothing (a folder without a lock file, or a lock file that is a link, has no writer here)."""
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # let go when the file closes, at once
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            return file.read(32).decode("ascii", "replace").strip() or "unknown"
    return None


def claim(base: str, also_free_in: tuple[str, ...] = ("videos",)) -> tuple[str, WriterLock]:
    """Make `runs/{base}`, or the first of `base-2`, `base-3`... that no one has made, and take its lock.

    A name whose folder exists under one of `also_free_in` (the run's videos) is passed over as well.
    """
    made_root = not os.path.isdir(ROOT)
    Path(ROOT).mkdir(exist_ok=True)
    number = 1
    while True:
        name = base if number == 1 else f"{base}-{number}"
        number += 1
        if any(os.path.lexists(f"{other}/{name}") for other in also_free_in):
            continue
        Path(f"{ROOT}/{name}").parent.mkdir(parents=True, exist_ok=True)  # env ids such as dm_control/cartpole-...
        try:
            os.mkdir(f"{ROOT}/{name}")  # the claim itself: exactly one process makes it
        except FileExistsError:
            continue
        writer_lock = lock(f"{ROOT}/{name}")
        writer_lock.made_root = made_root
        return name, writer_lock


def release_if_unused(name: str, writer_lock: WriterLock) -> None:
    """Give up a claimed run folder that nothing was written to: remove it (and its lock file, an empty
    `videos/{name}` that a video recorder made and `videos/` if empty then, and `runs/` if the claim made it and it is
    empty now)."""
    folder = Path(ROOT) / name
    try:
        if writer_lock.held and os.listdir(folder) == [LOCK_FILE]:
            (folder / LOCK_FILE).unlink()
            folder.rmdir()
            for parent in folder.relative_to(ROOT).parents[:-1]:  # the folders a nested name (dm_control/...) made
                if os.listdir(Path(ROOT) / parent):
                    break
                (Path(ROOT) / parent).rmdir()
            if writer_lock.made_root and not os.listdir(ROOT):
                os.rmdir(ROOT)
            if os.path.isdir(f"videos/{name}") and not os.path.islink(f"videos/{name}"):
                os.rmdir(f"videos/{name}")  # only if empty (OSError otherwise: left as it is)
                for parent in [*Path(name).parents][:-1]:  # the folders a nested name made, then videos/ itself
                    os.rmdir(Path("videos") / parent)
                os.rmdir("videos")
    except OSError:  # gone already, or written to meanwhile: left as it is
        pass
    writer_lock.release()
