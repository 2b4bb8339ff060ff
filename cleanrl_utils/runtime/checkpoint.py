"""Checkpoints that let an algorithm script continue a run exactly where it stopped.

The scripts decide what goes into a checkpoint (networks, optimiser, counters, replay buffer...);
this module does what is the same for all of them:

- `save` writes `runs/{run_name}/checkpoints/checkpoint_{global_step}.pt` atomically (`cleanrl_utils.runtime.atomic`):
  into a temporary file in the same folder, flushed to disk, then renamed over the final name. A run
  killed during a write leaves the previous checkpoint whole, and at worst a stray temporary file
  that is never taken for a checkpoint (the next save removes it). The newest `keep` checkpoints
  are kept.
- `load` takes a checkpoint file or a run folder: its newest checkpoint, or the one before it when the newest
  is cut short (a full disk, a partial copy), naming the one it skipped on stderr.
- `rng_state` / `set_rng_state` cover Python's, NumPy's and PyTorch's global random streams.
- `env_state` / `restore_env` carry the environments over (`cleanrl_utils.runtime.env_state`).
- `state_of` / `load_state` save and restore the objects a script names (networks, optimisers, replay buffers).
- `save` records the file name of the script that wrote the checkpoint, and `restored_args` refuses a checkpoint
  of another script (ppo.py and ppo_atari.py have the same arguments); it gives a resumed run the arguments it
  was started with, checked as the command line's are.

A checkpoint is data, never code: it is written in `cleanrl_utils.runtime.plain_data`'s format (a JSON header, then the
raw bytes of arrays and tensors), which has no way to name a class or a function. Reading it builds numbers,
strings, containers, arrays, tensors, deques and NumPy generators only, each checked as it is read; the
environments and replay buffers take the saved values into the objects the resumed run made itself. A file of
any other kind (a pickle, a torch.save file, which is what checkpoints were before, a TorchScript archive,
torch's legacy format) is refused by its first bytes, unread, and so is a file of this format that is malformed:
`RefusedCheckpoint`, never skipped for an older checkpoint. Only a checkpoint cut short is skipped.
"""

from __future__ import annotations

import collections
import math
import os
import random
import re
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import numpy as np

from cleanrl_utils.runtime import atomic, plain_data
from cleanrl_utils.runtime import env_state as env_snapshots

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
# Where `save` records the script that wrote a checkpoint.
SCRIPT_KEY = "script"
# What every checkpoint holds besides the script's own state (`Experiment.save_checkpoint`), and of which types
RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "args": (dict,),
    "run_name": (str,),
    "wandb_id": (str, type(None)),
    "global_step": (int,),
    "elapsed_time": (float, int),
    "rng": (dict,),
    "envs": (list, type(None)),
}


class CheckpointError(Exception):
    """A checkpoint that cannot be found, used or written; the message is one line for the user."""


class RefusedCheckpoint(CheckpointError):
    """A file that is not a checkpoint of this version's format, or a malformed one: refused, never skipped."""


def running_script() -> str | None:
    """The file name of the script this process runs (`__main__`), or None (an interactive session)."""
    file = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.basename(file) if file else None


# ---------------------------------------------------------------- writing


def save(run_dir: str | Path, global_step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write `state` (plain data) as the checkpoint of `global_step` in `run_dir`, atomically; drop all but the
    newest `keep`. The checkpoint also records the running script's file name, for `restored_args` to check."""
    script = running_script()
    if script is not None:
        state = {**state, SCRIPT_KEY: script}  # a copy: the caller's dict stays as it was
    folder = Path(run_dir) / CHECKPOINT_DIR
    path = folder / f"checkpoint_{global_step}.pt"
    if folder.is_symlink():
        raise CheckpointError(f"cannot write the checkpoint {path}: {folder} is a symbolic link")
    try:
        with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
            plain_data.write(f, state)
    except OSError as e:
        raise CheckpointError(f"cannot write the checkpoint {path}: {_write_failure(e)}") from None
    for old in checkpoints(folder)[:-keep] + list(folder.glob(".checkpoint_*.tmp*")):  # and what killed writes left
        old.unlink(missing_ok=True)
    return path


def _write_failure(error: OSError) -> str:
    if atomic.disk_full(error):
        return "the disk is full (the older checkpoints are kept; free some space and --resume the run folder)"
    return atomic.write_failure(error)


# ---------------------------------------------------------------- finding and reading


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


def read(path: str | Path) -> dict[str, Any]:
    """The state saved in the checkpoint file `path`: plain_data.CutShort for a file cut short, RefusedCheckpoint
    for any other file that is not a checkpoint of this format."""
    try:
        state = plain_data.read(path)
    except plain_data.CutShort:
        raise
    except plain_data.FormatError as e:
        old = "torch.save" in str(e)
        hint = " (checkpoints of versions before this one are pickles, which are not loaded)" if old else ""
        raise RefusedCheckpoint(f"--resume {path}: refused, {e}{hint}") from None
    except OSError as e:
        raise CheckpointError(f"--resume {path}: cannot read it ({e.strerror})") from None
    if not isinstance(state, dict) or not isinstance(state.get("args"), dict):
        raise RefusedCheckpoint(f"--resume {path}: refused, it is not a checkpoint written by an algorithm script")
    return state


def peek_run_name(path: str | Path) -> str | None:
    """The run name of the checkpoint `load(path)` would read, from its header alone (a multi-GB replay memory is
    not read): for taking the run folder's lock first. None when it cannot be told so (`load` then says why)."""
    try:
        for file in _candidates(path):
            try:
                return plain_data.peek_text(file, "run_name")
            except plain_data.CutShort:
                continue
    except (CheckpointError, plain_data.FormatError, OSError):
        return None
    return None


def load(path: str | Path) -> dict[str, Any]:
    """The state saved in the checkpoint file `path`, or in the newest checkpoint of the run folder `path`.

    A checkpoint cut short (a write or copy that stopped) is skipped for the older one kept beside it, and named on
    stderr; a file given by name is used or refused, never replaced. Any other file is refused (RefusedCheckpoint).
    """
    candidates = _candidates(path)
    skipped = []
    for file in candidates:
        try:
            state = read(file)
        except plain_data.CutShort as e:
            skipped.append(f"{file}: not a readable checkpoint ({e})")
            continue
        for line in skipped:
            print(f"resume: skipped {line}", file=sys.stderr)
        print(f"resuming from {file}")
        return state
    older = f" (nor are the {len(skipped) - 1} older ones)" if skipped[1:] else ""
    raise CheckpointError(f"--resume {skipped[0]}{older}")


def check_run_state(checkpoint: dict[str, Any]) -> None:
    """RefusedCheckpoint unless the fields every checkpoint holds are there, each of its type; the run's name a
    plain folder name."""
    for name, types in RUN_FIELDS.items():
        if not isinstance(checkpoint.get(name), types) or isinstance(checkpoint.get(name), bool):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is not a {types[0].__name__}")
    if not isinstance(checkpoint.get(SCRIPT_KEY, ""), str):
        raise RefusedCheckpoint("--resume: refused, the checkpoint's script is not a file name")
    # TensorBoard and the scripts' counters are 64-bit: a step beyond fails there, mid-run
    if not 0 <= checkpoint["global_step"] < 2**62 or not math.isfinite(checkpoint["elapsed_time"]):
        raise RefusedCheckpoint("--resume: refused, the checkpoint's global step or clock is out of range")
    from cleanrl_utils.runtime.command_line import path_component_problems

    problems = path_component_problems("run_name", checkpoint["run_name"])
    if checkpoint["wandb_id"] is not None:
        problems += path_component_problems("wandb_id", checkpoint["wandb_id"])
    if problems:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {problems[0].removeprefix('--')}")


# ---------------------------------------------------------------- the script's own values


def saved_int(checkpoint: dict[str, Any], name: str, low: int, high: int) -> int:
    """`checkpoint[name]`, a whole number in [low, high] (a counter: iterations, updates, episodes); RefusedCheckpoint
    for anything else."""
    value = _saved(checkpoint, name)
    if type(value) is not int or not low <= value <= high:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} ({_shown(value)}) is not in {low} to {high}")
    return value


def saved_float(checkpoint: dict[str, Any], name: str, low: float = -math.inf, high: float = math.inf) -> float:
    """`checkpoint[name]`, a finite number in [low, high] (a loss, a return, a statistic), as a float."""
    value = _saved(checkpoint, name)
    torch = sys.modules.get("torch")
    if isinstance(value, np.ndarray | np.generic) or (torch is not None and isinstance(value, torch.Tensor)):
        value = value.item() if tuple(value.shape) == () else value  # a scalar array a script saved as it came
    if type(value) not in (int, float) or not (math.isfinite(value) and low <= value <= high):
        raise RefusedCheckpoint(
            f"--resume: refused, the checkpoint's {name} ({_shown(value)}) is not a finite number in {low} to {high}"
        )
    return float(value)


def saved_array(
    checkpoint: dict[str, Any], name: str, shape: tuple[int, ...], dtype: Any, low: float = -math.inf, high: float = math.inf
) -> Any:
    """`checkpoint[name]`, a NumPy array or torch tensor (whichever the script saved) of exactly `shape` and `dtype`
    (a NumPy or torch dtype), its floats finite and every value in [low, high] (an index into a memory, say): what
    the resumed run's networks and envs take as theirs."""
    value = _checked_array(_saved(checkpoint, name), name, tuple(shape), dtype)
    bounded = low > -math.inf or high < math.inf
    empty = (value.size if isinstance(value, np.ndarray | np.generic) else value.numel()) == 0
    if bounded and not empty and not low <= float(value.min()) <= float(value.max()) <= high:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} holds values out of {low} to {high}")
    return value


def saved_list(checkpoint: dict[str, Any], name: str, max_length: int, like_item: Any) -> list[Any]:
    """`checkpoint[name]`, a list (or deque) of at most `max_length` items, each like `like_item` (as `saved_tree` compares):
    the last episodes' statistics, say."""
    value = _saved(checkpoint, name)
    if not isinstance(value, list | collections.deque) or len(value) > max_length:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is not a list of at most {max_length} items")
    for index, item in enumerate(value):
        _check_tree(item, like_item, f"{name}[{index}]", 0)
    return list(value)


def saved_tree(checkpoint: dict[str, Any], name: str, like: Any) -> Any:
    """`checkpoint[name]`, of the structure of `like` (dicts with its keys, lists and tuples of its lengths), each
    array of the shape and dtype of `like`'s there (NumPy, torch or JAX), its floats finite, each number a number,
    and a value of any type where `like` is that type: a Flax train state's `to_state_dict`, a tuple of statistics. Flax's `from_state_dict` checks the keys
    alone, so a weight of another shape would fail inside a compiled update, or broadcast silently."""
    value = _saved(checkpoint, name)
    _check_tree(value, like, name, 0)
    return value


def _saved(checkpoint: dict[str, Any], name: str) -> Any:
    if name not in checkpoint:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint holds no {name} (it is not this script's)")
    return checkpoint[name]


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, int | float | str | type(None)) else f"a {type(value).__name__}"
    return text[:40]


def _checked_array(value: Any, name: str, shape: tuple[int, ...], dtype: Any) -> Any:
    torch = sys.modules.get("torch")  # JAX scripts need not have it
    if torch is not None and isinstance(value, torch.Tensor):
        right_dtype = isinstance(dtype, torch.dtype) and value.dtype == dtype
        finite = not value.is_floating_point() or bool(torch.isfinite(value).all())
    elif isinstance(value, np.ndarray | np.generic):  # a NumPy scalar is what a 0-d array turns into after arithmetic
        right_dtype = not _is_torch_dtype(dtype) and value.dtype == np.dtype(dtype)
        finite = value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    else:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is a {type(value).__name__}, not an array")
    if tuple(value.shape) != shape or not right_dtype:
        own = dtype if _is_torch_dtype(dtype) else np.dtype(dtype)
        raise RefusedCheckpoint(
            f"--resume: refused, the checkpoint's {name} is {value.dtype} {tuple(value.shape)}, this run's {own} {shape}"
        )
    if not finite:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} holds a nan or an infinity")
    return value


def _check_tree(value: Any, like: Any, name: str, depth: int) -> None:
    if depth > plain_data.MAX_DEPTH:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} nests too deep")
    if isinstance(like, dict):
        if not isinstance(value, dict) or set(value) != set(like):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} does not hold this run's {sorted(like)[:6]}")
        for key, part in like.items():
            _check_tree(value[key], part, f"{name}.{key}", depth + 1)
    elif isinstance(like, list | tuple):
        if not isinstance(value, list | tuple) or len(value) != len(like):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is not {len(like)} items")
        for index, (item, part) in enumerate(zip(value, like, strict=True)):
            _check_tree(item, part, f"{name}[{index}]", depth + 1)
    elif isinstance(like, type):  # any value of this type: a NumPy array of any shape, say
        if not isinstance(value, like):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is a {type(value).__name__}")
    elif hasattr(like, "shape") and hasattr(like, "dtype"):  # NumPy, torch, JAX arrays, NumPy scalars
        dtype = like.dtype if _is_torch_dtype(like.dtype) else np.dtype(like.dtype)
        _checked_array(value, name, tuple(like.shape), dtype)
    elif isinstance(like, int | float) and not isinstance(like, bool):
        saved_float({name: value}, name)
    elif like is None or isinstance(like, bool | str):
        if type(value) is not type(like):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is a {type(value).__name__}")
    else:
        raise TypeError(f"saved_tree compares with {type(like).__name__}s, which it does not know")


def _is_torch_dtype(dtype: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


# ---------------------------------------------------------------- arguments


def restored_args(args: Any, checkpoint: dict[str, Any]) -> Any:
    """`args` with the values the checkpointed run used, except the run-control flags given now.

    A flag counts as given when its value differs from the default. A run-control flag that is not
    given keeps the run's value (a run that was tracked stays tracked); any other flag given with
    another value than the run's is overridden, and reported on stderr. The saved values must be of the
    types of the fields' defaults, and then pass the command line's checks (`argument_problems`); an env id
    read from a checkpoint names a registered env, never a module to import (`module:Env`).
    """
    written_by, script = checkpoint.get(SCRIPT_KEY), running_script()
    # checked first: two scripts can share every argument name (ppo.py, ppo_atari.py) and fail far later
    if written_by is not None and script is not None and written_by != script:
        raise CheckpointError(f"--resume: this checkpoint was written by {written_by}, not {script}")
    saved = checkpoint["args"]
    defaults = {f.name: _default(f, args) for f in fields(args)}
    if set(saved) != set(defaults):
        exp_name = saved.get("exp_name")
        origin = f"{exp_name}.py" if isinstance(exp_name, str) and len(exp_name) < 80 else "another script"
        raise CheckpointError(
            f"--resume: the checkpoint's arguments are not this script's (it comes from {origin} or another version of it)"
        )
    for name, value in saved.items():
        if not _fits(value, defaults[name]):
            raise RefusedCheckpoint(
                f"--resume: refused, the checkpoint's --{name.replace('_', '-')} is a {type(value).__name__}"
            )
    env_id = saved.get("env_id")
    if isinstance(env_id, str) and ":" in env_id:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's env id {env_id[:60]!r} would import a module")
    ignored = []
    for name, value in saved.items():
        given = getattr(args, name)
        if name == "resume" or (name in RUN_CONTROL and given != defaults[name]):
            continue
        if given != value and given != defaults[name]:
            ignored.append(f"--{name.replace('_', '-')} {given} (the run uses {value})")
        setattr(args, name, value)
    from cleanrl_utils.runtime.command_line import argument_problems

    problems = argument_problems(args)
    if problems:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's arguments: {'; '.join(problems)}")
    if ignored:
        print(f"resume: the checkpoint's arguments win over {', '.join(ignored)}", file=sys.stderr)
    return args


def _default(field: Any, args: Any) -> Any:
    if field.default is not MISSING:
        return field.default
    return field.default_factory() if field.default_factory is not MISSING else getattr(args, field.name)


def _fits(value: Any, default: Any) -> bool:
    """A saved argument of the type of its field's default (any type where the default is None: the value's own
    checks apply)."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int | float):
        return isinstance(value, int | float)
    if isinstance(default, list | tuple):
        return isinstance(value, list | tuple)
    return type(value) is type(default)


# ---------------------------------------------------------------- random streams


def rng_state() -> dict[str, Any]:
    """The global random streams of Python, NumPy and PyTorch (CPU, and CUDA when present)."""
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Set the global random streams to a `rng_state()`; RefusedCheckpoint if it is not one."""
    import torch

    try:
        python, numpy_state, torch_state = state["python"], state["numpy"], state["torch"]
        if not (isinstance(python, tuple) and isinstance(numpy_state, tuple) and isinstance(torch_state, torch.Tensor)):
            raise TypeError("not the streams' states")
        if len(python) != 3 or not isinstance(python[2], float | None):  # Python takes any gauss_next, to fail later
            raise TypeError("not Python's state")
        random.setstate(python)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError, OverflowError) as e:
        raise RefusedCheckpoint(
            f"--resume: refused, the checkpoint's random states are not valid ({type(e).__name__})"
        ) from None


# ---------------------------------------------------------------- environments


def env_state(env: Any) -> list[dict[str, Any]]:
    """A snapshot of `env` as plain data (`cleanrl_utils.runtime.env_state.snapshot`)."""
    return env_snapshots.snapshot(env)


def restore_env(env: Any, snapshot: Any) -> None:
    """Put a snapshot of `env_state` into `env`, a fresh env made the same way."""
    try:
        env_snapshots.restore(env, snapshot)
    except env_snapshots.EnvStateError as e:
        raise RefusedCheckpoint(f"--resume: {e}") from None


# ---------------------------------------------------------------- the objects a script names


def state_of(obj: Any) -> Any:
    """What a checkpoint saves of `obj`: its `state_dict()` (networks, optimisers, FrameReplayBuffer), or an SB3
    replay buffer's arrays and counters."""
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    if _is_sb3_buffer(obj):
        size = obj.buffer_size if obj.full else obj.pos
        arrays = {name: getattr(obj, name)[:size] for name in SB3_ARRAYS if getattr(obj, name, None) is not None}
        return {**arrays, "pos": obj.pos, "full": obj.full}
    raise TypeError(f"a checkpoint saves a {type(obj).__name__} by its state_dict(), which it does not have")


def load_state(obj: Any, state: Any, name: str) -> None:
    """Put `state_of`'s state back into `obj`, the object the resumed run made; RefusedCheckpoint if it does not fit."""
    try:
        if hasattr(obj, "load_state_dict"):
            obj.load_state_dict(state)
        elif _is_sb3_buffer(obj):
            _load_sb3_buffer(obj, state)
        else:
            raise TypeError(f"a {type(obj).__name__} has no load_state_dict()")
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError, OverflowError) as e:
        reason = " ".join(str(e).split())[:200]
        raise RefusedCheckpoint(f"--resume: the checkpoint's {name} does not fit this run's ({reason})") from None


SB3_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def _is_sb3_buffer(obj: Any) -> bool:
    buffers = sys.modules.get("stable_baselines3.common.buffers")
    return buffers is not None and isinstance(obj, buffers.ReplayBuffer)


def _load_sb3_buffer(buffer: Any, state: Any) -> None:
    names = {name for name in SB3_ARRAYS if getattr(buffer, name, None) is not None}
    if not isinstance(state, dict) or set(state) != names | {"pos", "full"}:
        raise ValueError("it is not this replay buffer's arrays and counters")
    pos, full = state["pos"], state["full"]
    if type(full) is not bool or type(pos) is not int or not 0 <= pos < buffer.buffer_size:
        raise ValueError("its position is out of range")
    size = buffer.buffer_size if full else pos
    for name in names:
        array, own = state[name], getattr(buffer, name)
        if not isinstance(array, np.ndarray) or array.dtype != own.dtype or array.shape != (size, *own.shape[1:]):
            raise ValueError(f"its {name} are not {size} of this buffer's")
        own[:size] = array
    buffer.pos, buffer.full = pos, full
