"""Run algorithm scripts as a user would (a subprocess in a scratch folder) and read back what they wrote."""

import ctypes
import functools
import gc
import io
import os
import runpy
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from gymnasium.envs.registration import registry as gym_registry

from cleanrl_utils.tensorboard_reader import read_scalars, read_texts

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    """A finished script run: its exit code, output, and the folder it ran in."""

    returncode: int
    stdout: str
    stderr: str
    cwd: Path

    @property
    def run_dirs(self) -> list[Path]:
        return sorted((self.cwd / "runs").glob("*")) if (self.cwd / "runs").is_dir() else []

    @property
    def run_dir(self) -> Path:
        assert len(self.run_dirs) == 1, f"expected one run folder, found {self.run_dirs}"
        return self.run_dirs[0]

    def scalars(self) -> dict[str, list[tuple[int, float]]]:
        return read_scalars(self.run_dir)

    def texts(self) -> dict[str, str]:
        return read_texts(self.run_dir)

    def videos(self, suffix: str = "") -> list[Path]:
        return sorted((self.cwd / "videos" / f"{self.run_dir.name}{suffix}").glob("*.mp4"))


EGL_PACKAGES = "install the Debian packages libegl1 and libegl-mesa0"


@functools.cache
def egl_missing() -> str | None:
    """Why MuJoCo cannot render without a display here (through EGL), or None when it can; probed once a process.

    The probe makes an EGL context in a child process, as a run filming MuJoCo would.
    """
    probe = subprocess.run(
        [sys.executable, "-c", "from mujoco.egl import GLContext; GLContext(8, 8).free()"],
        env={**os.environ, "MUJOCO_GL": "egl"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode == 0 or "No module named 'mujoco'" in probe.stderr:
        return None  # without MuJoCo its tests skip on the import instead
    return f"MuJoCo renders videos without a display through EGL, which does not work here: {EGL_PACKAGES}"


@functools.cache
def libgl_missing() -> str | None:
    """Why envpool's Procgen cannot start here (the Qt 5 of the PyQt5-Qt5 wheel links the system's libGL), or None."""
    try:
        ctypes.CDLL("libGL.so.1")
    except OSError:
        return "Procgen's Qt 5 libraries (the PyQt5-Qt5 wheel) link the system's OpenGL: install the Debian package libgl1"
    return None


def mujoco_gl() -> str:
    """MUJOCO_GL for the tests and the scripts they start: EGL where it works, else rendering off (MuJoCo then imports
    and simulates, and the tests that film it skip, naming the packages)."""
    return "egl" if egl_missing() is None else "disable"


def missing_system_package(reason: str) -> None:
    """A test's system package (PostgreSQL, Slurm, Xvfb, EGL) is missing: skip, saying which Debian package to install.

    Under CI=true the package is `.ci/run`'s to install, so its absence fails the test instead of hiding it.
    """
    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def script_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        SDL_VIDEODRIVER="dummy",
        SDL_AUDIODRIVER="dummy",
        MUJOCO_GL=mujoco_gl(),  # MuJoCo renders videos without a display
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        PYTHONUNBUFFERED="1",
    )
    # one torch and one XLA thread per script: tests/conftest.py sets them in this process's environment, copied here
    env.update(extra)
    return env


def start_script(script: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `cleanrl/<script>` in the background, with its output readable line by line.

    SIGINT is reset to its default in the child: a parent started in the background by a
    non-interactive shell ignores it, and children would inherit that, unlike a user's terminal.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(REPO / "cleanrl" / script), *args]
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env or script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def run_script(script: str, *args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> Run:
    """Run `cleanrl/<script>` with `args` in `cwd` (so runs/ and videos/ land there)."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(REPO / "cleanrl" / script), *args],
        cwd=cwd,
        env=env or script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, cwd)


def run_benchmark(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run the benchmark runner (`python -m cleanrl_utils.benchmark`) with `args` in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.benchmark", *args],
        cwd=cwd,
        env=env or script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class RanIntoTraining(Exception):
    """A script run in-process went past its checks into training."""


class SignalAfterLines(io.StringIO):
    """Captured stdout that sends `sig` to this process once `count` printed lines start with `prefix`.

    The signal is a real one: the script's handler receives it wherever the main thread is, as it would
    receive a user's Ctrl-C or a scheduler's SIGTERM shortly after the script printed those lines.
    """

    def __init__(self, prefix: str, count: int, sig: signal.Signals):
        super().__init__()
        self.prefix, self.count, self.sig, self.sent = prefix, count, sig, False

    def write(self, text: str) -> int:
        written = super().write(text)
        if not self.sent and "\n" in text:
            lines = self.getvalue().splitlines()
            if sum(line.startswith(self.prefix) for line in lines) >= self.count:
                self.sent = True
                os.kill(os.getpid(), self.sig)
        return written


def run_in_process(script: str, *args: str, cwd: Path, timeout_s: int = 60, stdout: io.StringIO | None = None) -> Run:
    """Run `cleanrl/<script>` inside this test process, as `python cleanrl/<script> args` in `cwd` would.

    No new interpreter importing torch or JAX for each run: for runs that end before training (bad input,
    --help), for short whole runs (each script's smoke run and its same-seed reruns; tests/conftest.py
    gives this process the thread counts `script_env` gives scripts), and for runs stopped by a signal
    (`stdout=SignalAfterLines(...)`). A script that does not stop within `timeout_s` is interrupted with
    RanIntoTraining. Warning filters, signal handlers, exception hooks, sys.path and the env registry are restored after
    (`restore_env_registry`), and W&B's service is stopped before and after (`stop_wandb_service`), as a new
    process starts and an exiting one ends.
    """
    path = str(REPO / "cleanrl" / script)
    out, err = stdout or io.StringIO(), io.StringIO()
    saved_argv, saved_cwd = sys.argv, os.getcwd()

    def interrupt(signum, frame):
        raise RanIntoTraining(f"{script} {' '.join(args)} still ran after {timeout_s} s")

    saved_alarm = signal.signal(signal.SIGALRM, interrupt)
    cwd.mkdir(parents=True, exist_ok=True)
    sys.argv, code = [path, *args], 0
    os.chdir(cwd)
    signal.alarm(timeout_s)
    saved_handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    # Experiment's hook for TensorBoard's writer thread, W&B's on `sys.exit` and uncaught errors: set for good, a new
    # process's own. Here pytest's hook reports a thread's uncaught exception: replaced, later tests' went unreported.
    saved_hooks = sys.excepthook, threading.excepthook, sys.exit
    saved_path = sys.path[:]  # ppo_trxl/enjoy.py puts its folder first, to import the script beside it
    stop_wandb_service()  # as in a new process, whatever an earlier test in this one tracked
    saved_env_specs = dict(gym_registry)  # a script may register envs with classes from its namespace, cleared below
    # A full collection walks every object of this process (torch, JAX and what earlier runs left): ~0.3 s each
    # here, and gymnasium's video recorder asks for one after each video. Frozen, this process's objects are
    # skipped; a new interpreter would not have them. Unfrozen after, so earlier runs' garbage is still freed.
    gc.freeze()
    script_globals = None
    try:
        with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
            script_globals = globals_of_script(runpy.run_path(path, run_name="__main__").values(), path)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
        script_globals = globals_of_frames(e.__traceback__, path)
    except BaseException as e:  # a crash, or this harness's own timeout: freed all the same
        script_globals = globals_of_frames(e.__traceback__, path)
        raise
    finally:
        gc.unfreeze()
        if script_globals is not None:
            # JAX keeps the script's pytree classes registered for good, and their methods keep the script's
            # globals (envs, replay memory) alive: a new interpreter would have freed them at exit
            script_globals.clear()
        stop_wandb_service()  # as a process's exit does
        restore_env_registry(saved_env_specs)
        sys.excepthook, threading.excepthook, sys.exit = saved_hooks
        sys.path[:] = saved_path
        signal.alarm(0)
        signal.signal(signal.SIGALRM, saved_alarm)
        for sig, handler in saved_handlers.items():
            signal.signal(sig, handler)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    return Run(code, out.getvalue(), err.getvalue(), cwd)


def restore_env_registry(saved: dict) -> None:
    """Put back (or remove) the envs an in-process run registered with classes of its own namespace, cleared after it.

    The envs a package registered when the run first imported it (minigrid's, shimmy's dm_control/...) stay: the
    package stays imported, and this process importing it later would register nothing.
    """
    for env_id, spec in list(gym_registry.items()):
        entry = spec.entry_point
        if spec is not saved.get(env_id) and "__main__" in (getattr(entry, "__module__", None), str(entry).split(":")[0]):
            if env_id in saved:
                gym_registry[env_id] = saved[env_id]
            else:
                del gym_registry[env_id]


def globals_of_script(values, path: str) -> dict | None:
    """The namespace the script at `path` ran in, found through a function it defined (runpy returns a copy)."""
    for value in values:
        namespace = getattr(value, "__globals__", None)
        if isinstance(namespace, dict) and namespace.get("__file__") == path:
            return namespace
    return None


def globals_of_frames(traceback, path: str) -> dict | None:
    """The namespace the script at `path` ran in, from the frames an exception left it through."""
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == path:
            return traceback.tb_frame.f_globals
        traceback = traceback.tb_next
    return None


def stop_wandb_service() -> None:
    """Let W&B's service finish writing its runs' files and stop, when W&B was used in this process and no run is open.

    Its settings (the folder runs are written to: the cwd at the first `wandb.init`) live as long as the service;
    without this, a tracked run made later in this process, in another folder, would be written into the first one.
    """
    if (wandb := sys.modules.get("wandb")) and wandb.run is None:
        wandb.teardown()


def read_wandb_history_keys(run_file: Path) -> set[str]:
    """Keys of the history rows in an offline W&B run file (`run-*.wandb`).

    The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of records, each
    with a 7-byte header (crc32, length, type) and a protobuf `Record` split across blocks.
    """
    from wandb.proto import wandb_internal_pb2

    block, raw = 32768, run_file.read_bytes()
    assert raw[:4] == b":W&B", f"{run_file} is not a W&B run file"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(raw):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        if kind == 0:
            pos += left
            continue
        data, pos = raw[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):  # FULL, FIRST
            pending = data
        else:  # MIDDLE, LAST
            pending += data
        if kind in (1, 4):
            records.append(pending)
    keys = set()
    for data in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            keys.update(item.key or "/".join(item.nested_key) for item in record.history.item)
    return keys


def wait_for_wandb_history_keys(run_file: Path, expected: set[str], timeout: float = 30.0) -> set[str]:
    """The history keys of `run_file` once they include `expected` (or whatever is there after `timeout` s).

    In the process that ran it, `wandb.finish()` can return while W&B's service is still writing the
    offline run file (seen: a 7-byte file right after `finish()`, the whole run 2 s later)."""
    deadline = time.monotonic() + timeout
    while not expected <= (keys := read_wandb_history_keys(run_file)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return keys


def returns_played_by_hand(env_id: str, act, episodes: int, seed: int) -> list[float]:
    """The returns of `episodes` games of a plain `gym.make(env_id)` (reset with `seed` once), with `act(obs)` the
    action: the reference an evaluator's returns are checked against."""
    import gymnasium as gym

    env = gym.make(env_id)
    returns, obs = [], env.reset(seed=seed)[0]
    for _ in range(episodes):
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
        obs = env.reset()[0]
    return returns


def run_td3_on_two_pendulums(script: str, cwd: Path) -> Run:
    """Run a TD3 script (torch or JAX) on 2 Pendulum envs for 800 steps, saving its model, and check what both log.

    Pendulum's episodes last 200 steps: with 2 envs both end in the 200th iteration, at global step 398; learning
    starts at step 400 and the losses are logged every 100 steps. Run in this process: an interpreter importing
    torch or JAX would cost more than the run.
    """
    args = ("--env-id", "Pendulum-v1", "--num-envs", "2", "--total-timesteps", "800", "--learning-starts", "400")
    run = run_in_process(script, *args, "--batch-size", "32", "--save-model", cwd=cwd, timeout_s=600)
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    assert [s for s, _ in scalars["charts/episodic_return"]] == [398, 398, 798, 798]
    assert [n for _, n in scalars["charts/episodic_length"]] == [200] * 4
    assert [s for s, _ in scalars["losses/qf1_loss"]] == [500, 600, 700]
    return run


def save_untrained_model(model_class, env, path: Path, seed: int = 0) -> str:
    """Save a freshly initialised model (weights fixed by `seed`) where an evaluator can load it."""
    import torch

    torch.manual_seed(seed)
    torch.save(model_class(env).state_dict(), path)
    return str(path)


# Patches `pathlib.Path.write_text`, `write_bytes` and `torch.save` (whichever the code under test writes with)
# so that the first write puts half its bytes into the file and then SIGKILLs the process: no handler, no
# cleanup, as a power cut or the OOM killer would. Prepended to the code that writes.
HALF_WRITE_THEN_SIGKILL = """
import io, os, pathlib, signal

def _die_after_half(target, data):
    with open(target, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)

pathlib.Path.write_text = lambda self, text, *a, **k: _die_after_half(self, text.encode())
pathlib.Path.write_bytes = lambda self, data: _die_after_half(self, bytes(data))
try:
    import torch

    def _torch_save(obj, f, *a, **k):
        buffer = io.BytesIO()
        _real_torch_save(obj, buffer)
        if hasattr(f, "write"):
            f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            f.flush()
            os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        _die_after_half(f, buffer.getvalue())

    _real_torch_save, torch.save = torch.save, _torch_save
except ImportError:
    pass
"""


def killed_mid_write(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter whose first file write is cut short by a SIGKILL (see HALF_WRITE_THEN_SIGKILL)."""
    proc = subprocess.run(
        [sys.executable, "-c", HALF_WRITE_THEN_SIGKILL + code], cwd=cwd, env=script_env(), capture_output=True, text=True
    )
    assert proc.returncode == -signal.SIGKILL, f"the write was not reached (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return proc


def process_is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (waiting to be reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def event_writer_threads() -> set[threading.Thread]:
    """TensorBoard's writer threads alive in this process: one per SummaryWriter not closed."""
    return {t for t in threading.enumerate() if type(t).__name__ == "_AsyncWriterThread" and t.is_alive()}
