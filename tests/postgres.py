"""A throwaway PostgreSQL server on loopback, for tests of distributed tuning.

Uses the server binaries of the Debian `postgresql` package (or wherever `pg_config --bindir`
points). PostgreSQL refuses to run as root, so under root the server runs as the `postgres`
user, with its data in a fresh folder under /tmp that this user owns.
"""

import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from glob import glob
from pathlib import Path

SERVER_USER = "postgres"
DATABASE = "optuna"
START_TIMEOUT_SECONDS = 60


class PostgresUnavailable(Exception):
    """This machine cannot run a PostgreSQL server for the tests (the message says why)."""


def _version_key(path: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", path)]


def server_bindir() -> Path:
    """The folder holding `initdb` and `pg_ctl`, newest installed version first."""
    candidates = []
    if pg_config := shutil.which("pg_config"):
        proc = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if proc.returncode == 0:
            candidates.append(proc.stdout.strip())
    candidates += sorted(glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for candidate in candidates:
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install the `postgresql` package (apt-get install postgresql)"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _check(command: list[str], what: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({shlex.join(command)}):\n{proc.stdout}\n{proc.stderr}")


@contextmanager
def running_postgres() -> Iterator[str]:
    """Start a server with an empty database; yields its SQLAlchemy URL and stops the server afterwards."""
    bindir = server_bindir()
    as_server_user: list[str] = []
    data_root = Path(tempfile.mkdtemp(prefix="cleanrl-pg-"))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root without `runuser` to start PostgreSQL as another user")
        try:
            shutil.chown(data_root, user=SERVER_USER)
        except LookupError:
            raise PostgresUnavailable(f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL as") from None
        as_server_user = ["runuser", "-u", SERVER_USER, "--"]
    data_dir, port = data_root / "data", _free_port()
    try:
        _check(
            [*as_server_user, str(bindir / "initdb"), "-D", str(data_dir), "-A", "trust", "-U", "postgres", "--no-sync"],
            "initdb",
        )
        # Loopback TCP only, the socket in our own folder, and no fsync: a test server holds nothing worth keeping.
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data_root} -c fsync=off"
        start = [str(bindir / "pg_ctl"), "-D", str(data_dir), "-l", str(data_root / "server.log"), "-o", options]
        _check([*as_server_user, *start, "-w", "-t", str(START_TIMEOUT_SECONDS), "start"], "starting PostgreSQL")
        try:
            createdb = [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", DATABASE]
            _check([*as_server_user, *createdb], "createdb")
            yield f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}"
        finally:
            stop = [str(bindir / "pg_ctl"), "-D", str(data_dir), "-m", "fast", "-w", "stop"]
            subprocess.run([*as_server_user, *stop], capture_output=True, timeout=START_TIMEOUT_SECONDS)
    finally:
        shutil.rmtree(data_root, ignore_errors=True)
