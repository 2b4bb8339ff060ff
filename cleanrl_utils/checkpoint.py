"""Checkpoints that let an algorithm script continue a run exactly where it stopped.

The scripts decide what goes into a checkpoint (networks, optimiser, counters, replay buffer...);
this module does what is the same for all of them:

- `save` writes `runs/{run_name}/checkpoints/checkpoint_{global_step}.pt` atomically: into a
  temporary file in the same folder, flushed to disk, then renamed over the final name. A run
  killed during a write leaves the previous checkpoint whole, and at worst a stray temporary file
  that is never taken for a checkpoint (the next save removes it). The newest `keep` checkpoints
  are kept.
- `load` takes a checkpoint file or a run folder (its newest checkpoint).
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

Checkpoints are pickles: load only those you made yourself.
"""

import os
import pickle
import random
import re
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
# Where an env snapshot holds an ale-py emulator's state, among its layer's attributes.
ALE_STATE_KEY = "__ale_state__"


class CheckpointError(Exception):
    """A checkpoint that cannot be found or used; the message is one line for the user."""


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
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"checkpoint_{global_step}.pt"
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"  # same folder: the rename below cannot cross file systems
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(folder)  # the rename itself reaches the disk
    for old in checkpoints(folder)[:-keep] + list(folder.glob(".checkpoint_*.tmp")):  # and what killed writes left
        old.unlink(missing_ok=True)
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some systems cannot open a folder; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def checkpoints(folder: str | Path) -> list[Path]:
    """The checkpoint files in `folder`, oldest (lowest step) first; temporary files are not among them."""
    found = [(int(m.group(1)), p) for p in Path(folder).glob("checkpoint_*.pt") if (m := NAME.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def find(path: str | Path) -> Path:
    """`path` itself if it is a file, else the newest checkpoint of the run folder `path`."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise CheckpointError(f"--resume {path}: no such checkpoint file or run folder")
    folder = path / CHECKPOINT_DIR if (path / CHECKPOINT_DIR).is_dir() else path
    found = checkpoints(folder)
    if not found:
        raise CheckpointError(f"--resume {path}: no checkpoint in it (runs write them with --checkpoint-frequency)")
    return found[-1]


def load(path: str | Path) -> dict[str, Any]:
    """The state saved in the checkpoint file `path`, or in the newest checkpoint of the run folder `path`."""
    file = find(path)
    try:
        # weights_only=False: a checkpoint holds envs, a replay buffer and random states, not just tensors
        state = torch.load(file, map_location="cpu", weights_only=False)
    except Exception as e:
        raise CheckpointError(f"--resume {file}: not a readable checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or "args" not in state:
        raise CheckpointError(f"--resume {file}: not a checkpoint written by an algorithm script")
    print(f"resuming from {file}")
    return state


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

    Pickled at once, so it stays as it is now while the env goes on, and objects shared between layers stay shared.
    """
    return pickle.dumps(_snapshot(env))


def restore_env(env: Any, state: bytes) -> None:
    """Set the attributes saved by `env_state` on `env`, a fresh env made the same way."""
    _restore(env, pickle.loads(state))


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
