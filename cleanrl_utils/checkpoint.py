"""Checkpoints that let an algorithm script continue a run exactly where it stopped.

The scripts decide what goes into a checkpoint (networks, optimiser, counters, replay buffer...);
this module does what is the same for all of them:

- `save` writes `runs/{run_name}/checkpoints/checkpoint_{global_step}.pt` atomically (`cleanrl_utils.atomic`):
  into a temporary file in the same folder, flushed to disk, then renamed over the final name. A run
  killed during a write leaves the previous checkpoint whole, and at worst a stray temporary file
  that is never taken for a checkpoint (the next save removes it). The newest `keep` checkpoints
  are kept.
- `load` takes a checkpoint file or a run folder: its newest checkpoint that reads back, naming
  on stderr any newer one it had to skip (a file cut short by a full disk or a partial copy).
- `rng_state` / `set_rng_state` cover Python's, NumPy's and PyTorch's global random streams.
- `env_state` / `restore_env` carry the environments over. Gymnasium envs have no save and load,
  and pickling a whole env fails on a video recorder or an open renderer; so each wrapper layer's
  attributes that can be pickled are saved and later set on a freshly made env of the same
  wrappers. That covers the simulator state, each env's and action space's random generator, time
  limits and episode statistics. An Atari env's emulator cannot be pickled: its state is saved with
  ale-py's `cloneState(include_rng=True)` and put back with `restoreState`, after the layer's other
  attributes. What else cannot be pickled (the recorder's callbacks, a pygame window) stays as the
  fresh env made it, and the frames of a video being recorded are not saved: after a resume, that
  clip holds only the frames from the resume on. A MuJoCo env keeps its own
  model and its own data object, the saved simulation state copied into it, and its renderer is
  never saved, so the renderer draws the resumed simulation.
- `save` also records the file name of the script that wrote the checkpoint, and `restored_args`
  refuses a checkpoint of another script (ppo.py and ppo_atari.py have the same arguments); it
  gives a resumed run the arguments it was started with.

Loading runs no code from the file: checkpoints and env snapshots are unpickled with an allow-list
(`AllowListUnpickler`): tensors and plain values as `torch.load(weights_only=True)` builds them, and
only the classes and functions of `SAFE_GLOBALS` (numpy arrays and random generators, Gymnasium
spaces, replay buffers, MuJoCo, MJX and ALE states, MiniGrid's grids...) whose packages the running
script has imported already, plus the script's own env classes. A checkpoint holding anything else is refused in one line; `CLEANRL_TRUST_CHECKPOINTS=1`
loads it as a plain pickle, for checkpoints you wrote yourself (e.g. of an env with other classes).
A checkpoint is still trusted input: its arguments choose what the run does (env id, folders).
"""

import _compat_pickle
import errno
import inspect
import io
import os
import pickle
import random
import re
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from cleanrl_utils import atomic

CHECKPOINT_DIR = "checkpoints"
NAME = re.compile(r"checkpoint_(\d+)\.pt")
# Arguments that do not change what a run computes: on resume the command line may set them anew
# (those not given keep the run's values). Everything else comes from the checkpoint.
RUN_CONTROL = frozenset(
    {
        "resume",
        "checkpoint_frequency",
        "track",
        "wandb_project_name",
        "wandb_entity",
        "save_model",
        "upload_model",
        "hf_entity",
        "cuda",
    }
)
# Wrapper attributes left out of an env snapshot: a video recorder's frames (large, and re-recorded),
# and a MuJoCo renderer, which must stay the fresh env's (it may hold an open viewer; see `_copied_into_mujoco`).
SKIPPED_ATTRIBUTES = frozenset({"recorded_frames", "render_history", "mujoco_renderer"})
# Where `save` records the script that wrote a checkpoint.
SCRIPT_KEY = "script"
# Set to 1 to load checkpoints as plain pickles (any class, any code): only for checkpoints you wrote yourself.
TRUST_ENV = "CLEANRL_TRUST_CHECKPOINTS"
# What a checkpoint may hold besides tensors and plain values, by top-level package: "module.name" of each class
# or function the allow-list unpickler may build or call ("module.*": every class of the module; "package.**":
# every class of its imported modules, with the static functions of STATIC_FUNCTIONS). Only modules the running
# script has imported count (nothing is imported to load a file); a name this version of a package lacks is left out.
SAFE_GLOBALS = {
    "numpy": (
        "numpy._core.multiarray._reconstruct",
        "numpy._core.multiarray.scalar",
        "numpy.ndarray",
        "numpy.dtype",
        "numpy.dtypes.*",  # the class of each dtype (Float32DType...)
        "numpy.random._pickle.__generator_ctor",
        "numpy.random._pickle.__bit_generator_ctor",
        "numpy.random._pickle.__randomstate_ctor",
        "numpy.random._generator.Generator",
        "numpy.random.mtrand.RandomState",
        "numpy.random._pcg64.PCG64",
        "numpy.random._pcg64.PCG64DXSM",
        "numpy.random._mt19937.MT19937",
        "numpy.random._philox.Philox",
        "numpy.random._sfc64.SFC64",
        "numpy.random.bit_generator.SeedSequence",
        "numpy.random.bit_generator.__pyx_unpickle_SeedSequence",
    ),
    "collections": ("collections.deque",),
    "gymnasium": (
        "gymnasium.envs.registration.EnvSpec",
        "gymnasium.envs.registration.WrapperSpec",
        "gymnasium.vector.vector_env.AutoresetMode",
        "gymnasium.wrappers.utils.RunningMeanStd",
        "gymnasium.utils.save_video.capped_cubic_video_schedule",  # RecordVideo's default episode trigger
        *(
            f"gymnasium.spaces.{module}.{name}"
            for module, name in (
                ("box", "Box"),
                ("discrete", "Discrete"),
                ("multi_discrete", "MultiDiscrete"),
                ("multi_binary", "MultiBinary"),
                ("tuple", "Tuple"),
                ("dict", "Dict"),
                ("text", "Text"),
            )
        ),
    ),
    "mujoco": (
        "mujoco._structs.MjData",
        "mujoco._structs.MjModel",
        *(f"mujoco.mjx._src.types.{name}" for name in ("Data", "DataJAX", "Contact")),  # MJX simulator states
    ),
    "mujoco_playground": ("mujoco_playground._src.mjx_env.State",),
    "minigrid": ("minigrid.core.**", "minigrid.envs.**"),  # grids, world objects, mission spaces, envs
    "ale_py": ("ale_py._ale_py.ALEState", "ale_py._ale_py.Action"),
    "stable_baselines3": ("stable_baselines3.common.buffers.ReplayBuffer",),
    "cleanrl_utils": ("cleanrl_utils.frame_replay.FrameReplayBuffer",),
}
# Static functions of the classes a "package.**" entry allows: a MiniGrid mission space keeps its env's mission text one.
STATIC_FUNCTIONS = ("_gen_mission",)
# Where an env snapshot holds an ale-py emulator's state, among its layer's attributes.
ALE_STATE_KEY = "__ale_state__"


class CheckpointError(Exception):
    """A checkpoint that cannot be found, used or written; the message is one line for the user."""


class UntrustedContent(CheckpointError):
    """A checkpoint holding a class or function that loading it without trusting the file would not build."""


def trusted() -> bool:
    return os.environ.get(TRUST_ENV, "") == "1"


def _resolve(qualified: str) -> Any:
    """The object named `module.name` (or `module.Class.attr`) in a module already imported, else None."""
    parts = qualified.split(".")
    for split in range(len(parts) - 1, 0, -1):
        obj = sys.modules.get(".".join(parts[:split]))
        if obj is not None:
            for attr in parts[split:]:
                obj = getattr(obj, attr, None)
            return obj
    return None


def _classes_of(module: Any) -> list[type]:
    return [obj for obj in vars(module).values() if isinstance(obj, type) and obj.__module__ == module.__name__]


def _allowed_by(qualified: str) -> list[Any]:
    """What one SAFE_GLOBALS entry allows."""
    if qualified.endswith(".**"):
        prefix = qualified[:-2]
        classes = [cls for name, module in list(sys.modules.items()) if name.startswith(prefix) for cls in _classes_of(module)]
        statics = [
            getattr(cls, name)
            for cls in classes
            for name in STATIC_FUNCTIONS
            if isinstance(inspect.getattr_static(cls, name, None), staticmethod)
        ]
        return classes + statics
    if qualified.endswith(".*"):
        module = _resolve(qualified[:-2])
        return [obj for obj in vars(module).values() if isinstance(obj, type)] if module else []
    obj = _resolve(qualified)
    return [] if obj is None else [obj]


def safe_globals() -> list[Any]:
    """The classes and functions `load` lets a checkpoint build: those of SAFE_GLOBALS whose package is imported, and
    the env and wrapper classes the running script defines itself (e.g. ppo_trxl.py's ProofofMemoryEnv)."""
    import gymnasium as gym

    allowed = [
        obj for package, names in SAFE_GLOBALS.items() if package in sys.modules for name in names for obj in _allowed_by(name)
    ]
    script = sys.modules.get("__main__")
    env_classes = (gym.Env, gym.Wrapper, gym.vector.VectorEnv)
    for obj in vars(script).values() if script is not None else ():
        if isinstance(obj, type) and obj.__module__ == "__main__" and issubclass(obj, env_classes):
            allowed.append(obj)
    return allowed


# Plain Python values the pickle format names as globals, beside torch's own (which include set and complex).
BUILTIN_GLOBALS = ("builtins.bytes", "builtins.frozenset", "builtins.slice", "builtins.range")


def allowed_globals() -> dict[str, Any]:
    """Name -> object of every global a checkpoint may name: torch's weights-only list (tensors, storages, dtypes,
    devices, OrderedDict...), a few builtins, and `safe_globals()`."""
    from torch import _weights_only_unpickler  # torch's own list, the one `torch.load(weights_only=True)` uses

    allowed = dict(_weights_only_unpickler._get_allowed_globals())
    allowed.update((name, _resolve(name)) for name in BUILTIN_GLOBALS)
    allowed.update((f"{obj.__module__}.{obj.__qualname__}", obj) for obj in safe_globals())
    return allowed


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that builds or calls only the globals of `allowed`: nothing else in a file can run.

    torch's own weights-only unpickler would do, but it cannot fill a deque (scripts keep recent returns in one,
    envs their episode statistics), so torch.load gets this one as its pickle module instead.
    """

    allowed: dict[str, Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        # torch writes pickle protocol 2, which names builtins as Python 2 did (`__builtin__.set`)
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        obj = self.allowed.get(f"{module}.{name}")
        if obj is None:
            raise UntrustedContent(
                f"it holds {module}.{name}, which is loaded only from a trusted file (unpickling it could run code);"
                f" set {TRUST_ENV}=1 to load it as a plain pickle, only if you wrote this file yourself"
            )
        return obj


def read_safely(source: Any) -> Any:
    """`torch.load` on the CPU of a checkpoint, an env snapshot or a model file, building only `allowed_globals()`
    (any object when trusted): UntrustedContent for anything else it holds."""
    if trusted():
        return torch.load(source, map_location="cpu", weights_only=False)
    unpickler = type("Unpickler", (AllowListUnpickler,), {"allowed": allowed_globals()})
    pickle_module = SimpleNamespace(
        __name__="cleanrl_utils.checkpoint", Unpickler=unpickler, load=lambda f, **kw: unpickler(f, **kw).load()
    )
    return torch.load(source, map_location="cpu", weights_only=False, pickle_module=pickle_module)


def running_script() -> str | None:
    """The file name of the script this process runs (`__main__`), or None (an interactive session)."""
    file = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.basename(file) if file else None


def save(run_dir: str | Path, global_step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write `state` as the checkpoint of `global_step` in `run_dir`, atomically; drop all but the newest `keep`.

    The checkpoint also records the running script's file name, for `restored_args` to check.
    """
    script = running_script()
    if script is not None:
        state = {**state, SCRIPT_KEY: script}  # a copy: the caller's dict stays as it was
    folder = Path(run_dir) / CHECKPOINT_DIR
    path = folder / f"checkpoint_{global_step}.pt"
    try:
        # a hidden temporary file beside it, flushed, then renamed; written through a Python file, whose errors
        # (a full disk) torch keeps as the cause of its own
        with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
            torch.save(state, f, pickle_protocol=4)  # protocol 4 names nested functions without getattr
    except (OSError, RuntimeError) as e:
        if isinstance(e, OSError) or isinstance(e.__cause__ or e.__context__, OSError):  # torch wraps some write errors
            raise CheckpointError(f"cannot write the checkpoint {path}: {_write_failure(e)}") from None
        raise
    for old in checkpoints(folder)[:-keep] + list(folder.glob(".checkpoint_*.tmp*")):  # and what killed writes left
        old.unlink(missing_ok=True)
    return path


def _write_failure(error: BaseException) -> str:
    os_error = error if isinstance(error, OSError) else error.__cause__ or error.__context__
    if isinstance(os_error, OSError) and os_error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full (the older checkpoints are kept; free some space and --resume the run folder)"
    return " ".join(str(os_error or error).split())


def checkpoints(folder: str | Path) -> list[Path]:
    """The checkpoint files in `folder`, oldest (lowest step) first; temporary files are not among them."""
    found = [(int(m.group(1)), p) for p in Path(folder).glob("checkpoint_*.pt") if (m := NAME.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def find(path: str | Path) -> Path:
    """`path` itself if it is a file, else the newest checkpoint of the run folder `path`."""
    return _candidates(path)[0]


def _candidates(path: str | Path) -> list[Path]:
    """`[path]` for a file; a run folder's checkpoints, newest first."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CheckpointError(f"--resume {path}: no such checkpoint file or run folder")
    folder = path / CHECKPOINT_DIR if (path / CHECKPOINT_DIR).is_dir() else path
    found = checkpoints(folder)
    if not found:
        raise CheckpointError(f"--resume {path}: no checkpoint in it (runs write them with --checkpoint-frequency)")
    return found[::-1]


def load(path: str | Path) -> dict[str, Any]:
    """The state saved in the checkpoint file `path`, or in the newest readable checkpoint of the run folder `path`.

    A checkpoint that does not read back (cut short, damaged) is skipped for the older one kept beside it, and
    named on stderr; one holding what only a trusted file may hold is refused (UntrustedContent), not skipped.
    """
    candidates = _candidates(path)
    failures = []
    for file in candidates:
        try:
            state = read_safely(file)
        except UntrustedContent as e:
            raise UntrustedContent(f"--resume {file}: {e}") from None
        except Exception as e:
            failures.append(f"{file}: not a readable checkpoint ({type(e).__name__}: {' '.join(str(e).split())[:200]})")
            continue
        if not isinstance(state, dict) or "args" not in state:
            failures.append(f"{file}: not a checkpoint written by an algorithm script")
            continue
        for failure in failures:
            print(f"resume: skipped {failure}", file=sys.stderr)
        print(f"resuming from {file}")
        return state
    raise CheckpointError(
        f"--resume {failures[0]}" + (f" (nor are the {len(failures) - 1} older ones)" if failures[1:] else "")
    )


def restored_args(args: Any, checkpoint: dict[str, Any]) -> Any:
    """`args` with the values the checkpointed run used, except the run-control flags given now.

    A flag counts as given when its value differs from the default. A run-control flag that is not
    given keeps the run's value (a run that was tracked stays tracked); any other flag given with
    another value than the run's is overridden, and reported on stderr.
    """
    written_by, script = checkpoint.get(SCRIPT_KEY), running_script()
    # checked first: two scripts can share every argument name (ppo.py, ppo_atari.py) and fail far later
    if written_by is not None and script is not None and written_by != script:
        raise CheckpointError(f"--resume: this checkpoint was written by {written_by}, not {script}")
    saved = checkpoint["args"]
    defaults = {f.name: f.default for f in fields(args)}
    if set(saved) != set(defaults):
        raise CheckpointError(
            f"--resume: the checkpoint's arguments are not this script's (it comes from {saved.get('exp_name')}.py"
            " or another version of it)"
        )
    ignored = []
    for name, value in saved.items():
        given = getattr(args, name)
        if name == "resume" or (name in RUN_CONTROL and given != defaults[name]):
            continue
        if given != value and given != defaults[name]:
            ignored.append(f"--{name.replace('_', '-')} {given} (the run uses {value})")
        setattr(args, name, value)
    if ignored:
        print(f"resume: the checkpoint's arguments win over {', '.join(ignored)}", file=sys.stderr)
    return args


def rng_state() -> dict[str, Any]:
    """The global random streams of Python, NumPy and PyTorch (CPU, and CUDA when present)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _layers(env: Any) -> list[Any]:
    """An env's wrapper layers, outermost first, down to the unwrapped env (vector or single)."""
    layers = [env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def _snapshot(env: Any) -> list[tuple[str, dict[str, Any], list | None]]:
    layers = []
    for layer in _layers(env):
        attributes = {
            name: value
            for name, value in vars(layer).items()
            if name not in ("env", "envs") and name not in SKIPPED_ATTRIBUTES and _picklable(value)
        }
        if hasattr(vars(layer).get("ale"), "cloneState"):  # last, so restored after the layer's other attributes
            attributes[ALE_STATE_KEY] = vars(layer)["ale"].cloneState(include_rng=True)
        sub_envs = [_snapshot(sub_env) for sub_env in layer.envs] if isinstance(getattr(layer, "envs", None), list) else None
        layers.append((type(layer).__name__, attributes, sub_envs))
    return layers


def env_state(env: Any) -> bytes:
    """A snapshot of `env`: per wrapper layer (sub-envs of a vector env too), its class and picklable attributes.

    Serialised at once (torch's format, which `restore_env` reads without running code), so it stays as it is now
    while the env goes on, and objects shared between layers stay shared.
    """
    buffer = io.BytesIO()
    torch.save(_snapshot(env), buffer, pickle_protocol=4)
    return buffer.getvalue()


def restore_env(env: Any, state: bytes) -> None:
    """Set the attributes saved by `env_state` on `env`, a fresh env made the same way."""
    if state[:2] != b"PK" and not trusted():  # a plain pickle, as older versions wrote
        raise UntrustedContent(
            f"--resume: this checkpoint's env snapshot is a plain pickle (an older version's); set {TRUST_ENV}=1"
            " to load it if you wrote it yourself"
        )
    try:
        snapshot = read_safely(io.BytesIO(state)) if state[:2] == b"PK" else pickle.loads(state)
    except UntrustedContent as e:
        raise UntrustedContent(f"--resume: the checkpoint's env snapshot: {e}") from None
    _restore(env, snapshot)


def _restore(env: Any, snapshot: list[tuple[str, dict[str, Any], list | None]]) -> None:
    layers = _layers(env)
    if [type(layer).__name__ for layer in layers] != [name for name, _, _ in snapshot]:
        raise CheckpointError(
            f"--resume: the checkpoint's env wrappers {[name for name, _, _ in snapshot]} differ from this run's"
            f" {[type(layer).__name__ for layer in layers]}"
        )
    for layer, (_, attributes, sub_envs) in zip(layers, snapshot, strict=True):
        for name, value in attributes.items():
            if name == ALE_STATE_KEY:
                vars(layer)["ale"].restoreState(value)
            elif not _copied_into_mujoco(vars(layer).get(name), value):
                vars(layer)[name] = value
        if sub_envs is not None:
            for sub_env, sub_snapshot in zip(layer.envs, sub_envs, strict=True):
                _restore(sub_env, sub_snapshot)


def _copied_into_mujoco(fresh: Any, saved: Any) -> bool:
    """Keep a MuJoCo env's own model and data objects, the saved simulation state copied into them.

    The env's renderer (never saved) draws the objects the env was made with: had the saved copies
    replaced them, every frame after a resume would show the fresh env's reset state. The fresh
    model is kept as it is: the env was made from the same model file. Told by type name, so that
    mujoco (an optional extra) is imported only for envs that hold its objects.
    """
    kind = type(saved)
    if type(fresh) is not kind or kind.__module__.split(".")[0] != "mujoco" or kind.__name__ not in ("MjModel", "MjData"):
        return False
    if kind.__name__ == "MjData":
        import mujoco

        mujoco.mj_copyData(fresh, fresh.model, saved)
    return True
