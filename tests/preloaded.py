"""Run algorithm scripts in forks of a Python that has already imported torch: for runs that end at once.

The bad-input and `--help` checks start every script hundreds of times, and each start spent most
of its ~4 s importing torch. A `PreloadedPython` server (`tests/preloaded_server.py`) imports the
heavy libraries once; each run is then a fork of it that sets up what a fresh interpreter would
have (argv, cwd, environment, `sys.path` with the script's folder first, stdio to files) and runs
the script as `__main__`.

What a fork cannot fake is kept out: the packages a test may block (made unimportable by stub
folders first on the path) are never imported by the server, and each run checks that before it
starts, so "package missing" cases fail as they would in a fresh interpreter. Runs that train,
write logs or handle signals still get real processes (`tests.helpers.run_script`).
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import REPO, Run, script_env


class PreloadedPython:
    """A server process per test worker; `run` is `run_script` for runs that stop before training."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "preloaded_server.py")],
            cwd=REPO,
            env=script_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"the preloaded Python did not start (it said {ready!r})")

    def run(
        self, script: str, *args: str, cwd: Path, env: dict[str, str], blocked: Path | None = None, timeout: float = 120
    ) -> Run:
        cwd.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as io_dir:
            out, err = Path(io_dir) / "stdout", Path(io_dir) / "stderr"
            request = {
                "script": str(REPO / "cleanrl" / script),
                "args": list(args),
                "cwd": str(cwd),
                "env": env,
                "blocked": str(blocked) if blocked else None,
                "stdout": str(out),
                "stderr": str(err),
                "timeout": timeout,
            }
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            if not reply:
                raise RuntimeError("the preloaded Python died")
            return Run(json.loads(reply)["returncode"], out.read_text(), err.read_text(), cwd)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
