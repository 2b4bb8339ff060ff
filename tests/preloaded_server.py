"""The server behind `tests.preloaded.PreloadedPython`: one JSON request per line on stdin, a fork per request.

It imports nothing of this project (its tests block `cleanrl_utils`), only the libraries in `PRELOAD`.
"""

import atexit
import json
import os
import runpy
import signal
import sys
import time
import traceback

# imported once by the server: what every algorithm script imports first, and the slow part of its start
PRELOAD = ("numpy", "torch", "torch.nn", "torch.optim", "torch.utils.tensorboard", "tyro", "gymnasium")
# packages the tests make unimportable: the server must not hold them
BLOCKABLE = ("Box2D", "mujoco", "cleanrl_utils", "ale_py")


def _serve() -> None:
    for module in PRELOAD:
        __import__(module)
    held = [name for name in BLOCKABLE if name in sys.modules]
    if held:
        raise SystemExit(f"preloading imported {held}, which the tests block: runs could not fail as without them")
    base_path = list(sys.path[1:])  # without the server's own folder (tests/)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request, base_path)  # never returns
        print(json.dumps({"returncode": _wait(pid, request["timeout"])}), flush=True)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)


def _run_child(request: dict, base_path: list[str]) -> None:
    """In the fork: become a fresh `python script args...` as far as the script can tell, run it, exit."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        stdin = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for fd, target in ((stdin, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["script"]
        blocked = [request["blocked"]] if request["blocked"] else []
        sys.path[:] = [os.path.dirname(script), *blocked, *base_path]
        if blocked:
            assert not any(name in sys.modules for name in BLOCKABLE), "a blockable package was imported"
        sys.argv = [script, *request["args"]]
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:  # as the interpreter does: an int is the code, None is 0, anything else is printed
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    _serve()
