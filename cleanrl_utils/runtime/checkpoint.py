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
- `state_of` / `load_state` save and restore the objects a script names (networks, optimisers, replay buffers), each
  value checked first.
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
import typing
from collections.abc import Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from types import UnionType
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
MAX_ELAPSED_S = 1e9  # 31 years of training: a longer clock was made up (and NaN fails the comparison too)


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
    # TensorBoard and the scripts' counters are 64-bit: a step beyond fails there, mid-run; the clock makes SPS
    if not 0 <= checkpoint["global_step"] < 2**62 or not 0 <= checkpoint["elapsed_time"] < MAX_ELAPSED_S:
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
    is_tensor = torch is not None and isinstance(value, torch.Tensor)
    if is_tensor:
        right_dtype = isinstance(dtype, torch.dtype) and value.dtype == dtype
    elif isinstance(value, np.ndarray | np.generic):  # a NumPy scalar is what a 0-d array turns into after arithmetic
        right_dtype = not _is_torch_dtype(dtype) and value.dtype == np.dtype(dtype)
    else:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is a {type(value).__name__}, not an array")
    if tuple(value.shape) != shape or not right_dtype:
        own = dtype if _is_torch_dtype(dtype) else np.dtype(dtype)
        raise RefusedCheckpoint(
            f"--resume: refused, the checkpoint's {name} is {value.dtype} {tuple(value.shape)}, this run's {own} {shape}"
        )
    # once its shape is the run's: a made-up array of another size is not gone through
    finite = bool(torch.isfinite(value).all()) if is_tensor else value.dtype.kind not in "fc" or np.isfinite(value).all()
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
        if set(like) == {"count", "mu", "nu"}:  # optax's Adam state; the scripts keep optax.adam's betas (0.9, 0.999)
            for first, second in zip(_leaves(value["mu"]), _leaves(value["nu"]), strict=True):
                _check_adam_moments(first, second, 0.9, 0.999, name)
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
        array = _checked_array(value, name, tuple(like.shape), dtype)
        # optax Adam's second moments and step count: a negative one makes the first update's square root NaN
        if {"nu", "count"} & set(name.split(".")) and bool((array < 0).any()):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is negative")
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


def restored_args(args: Any, checkpoint: dict[str, Any], argv: Sequence[str] | None = None) -> Any:
    """`args` with the values the checkpointed run used, except the run-control flags given now.

    A flag counts as given when the command line `args` were parsed from (`argv`) names it, whatever its value, or
    when its value differs from the default (the only test for `args` made in code, `argv` None). A run-control flag that is not
    given keeps the run's value (a run that was tracked stays tracked); any other flag given with
    another value than the run's is overridden, and reported on stderr. The saved values must be of the fields'
    declared types (an int field takes no float), then pass the command line's checks (`argument_problems`); an
    env id read from a checkpoint names a registered env, never a module to import (`module:Env`).
    """
    written_by, script = checkpoint.get(SCRIPT_KEY), running_script()
    # checked first: two scripts can share every argument name (ppo.py, ppo_atari.py) and fail far later
    if written_by is not None and script is not None and written_by != script:
        raise CheckpointError(f"--resume: this checkpoint was written by {written_by}, not {script}")
    saved = checkpoint["args"]
    defaults = {f.name: _default(f, args) for f in fields(args)}
    try:
        hints = typing.get_type_hints(type(args))  # strings too, as `from __future__ import annotations` leaves them
    except Exception:  # a name they use is not importable here (tyro could not parse then): go by the defaults' types
        hints = {}
    if set(saved) != set(defaults):
        exp_name = saved.get("exp_name")
        origin = f"{exp_name}.py" if isinstance(exp_name, str) and len(exp_name) < 80 else "another script"
        raise CheckpointError(
            f"--resume: the checkpoint's arguments are not this script's (it comes from {origin} or another version of it)"
        )
    for name, value in saved.items():
        if not _fits(value, hints.get(name, Any if defaults[name] is None else type(defaults[name]))):
            raise RefusedCheckpoint(
                f"--resume: refused, the checkpoint's --{name.replace('_', '-')} is a {type(value).__name__}"
            )
    env_id = saved.get("env_id")
    if isinstance(env_id, str) and ":" in env_id:
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's env id {env_id[:60]!r} would import a module")
    from cleanrl_utils.runtime.command_line import argument_problems, named_fields

    named = named_fields(type(args), argv or [])
    ignored = []
    for name, value in saved.items():
        given = getattr(args, name)
        was_given = name in named or given != defaults[name]
        if name == "resume" or (name in RUN_CONTROL and was_given):
            continue
        if given != value and was_given:
            ignored.append(f"--{name.replace('_', '-')} {given} (the run uses {value})")
        setattr(args, name, value)
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


def _fits(value: Any, hint: Any) -> bool:
    """A saved argument of its field's declared type: an int field takes an int only (no float, no bool), a float
    field an int or a float, an optional field None or a value of its type, a list field a list of its items' type."""
    if hint is Any:
        return True
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, option) for option in typing.get_args(hint))
    kind = typing.get_origin(hint) or hint
    if kind is float:
        return type(value) in (int, float)
    if kind is typing.Literal:
        return any(type(value) is type(choice) and value == choice for choice in typing.get_args(hint))
    if kind in (list, tuple):  # tyro reads either from the command line; a checkpoint holds lists as tuples or lists
        item = next((arg for arg in typing.get_args(hint) if arg is not Ellipsis), Any)
        return isinstance(value, list | tuple) and (item is Any or all(_fits(v, item) for v in value))
    return type(value) is kind if isinstance(kind, type) else True  # a type this check does not know: the value's own


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
    """Put `state_of`'s state back into `obj`, the object the resumed run made; RefusedCheckpoint if it does not fit.
    A torch network's or optimiser's state is checked whole first (`check_module_state`, `check_optimizer_state`):
    `load_state_dict` casts dtypes, takes NaNs, and an optimiser's takes moments of any shape."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        check_module_state(obj, state, name)
    elif torch is not None and isinstance(obj, torch.optim.Optimizer):
        check_optimizer_state(obj, state, name)
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


def check_module_state(module: Any, state: Any, name: str) -> None:
    """RefusedCheckpoint unless `state` holds the tensors of `module.state_dict()`: the same names, each of the same
    shape and dtype, its floats finite."""
    own = module.state_dict()
    if not isinstance(state, dict) or set(state) != set(own):
        differ = sorted(map(str, set(own) ^ set(state)))[:3] if isinstance(state, dict) else "all"
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} does not hold this run's tensors ({differ})")
    for key, tensor in own.items():
        if hasattr(tensor, "dtype"):  # a module's extra state, rare, is its own to check
            _checked_array(state[key], f"{name} {key}", tuple(tensor.shape), tensor.dtype)


NON_NEGATIVE_STATE = frozenset({"step", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "sum"})  # counts, squares


def check_optimizer_state(optimizer: Any, state: Any, name: str) -> None:
    """RefusedCheckpoint unless `state` is a state of `optimizer`: its param groups' settings those of the run
    (the scripts make the optimiser from the run's arguments and change only its learning rate, annealed down: so
    lr in 0 to the run's, every other setting and flag, such as eps and `fused`, the run's), each parameter's state what this optimiser
    keeps for it (`_state_of_a_step`): the same keys, tensors of the same shapes and dtypes, finite, and counts and
    squares not negative."""
    own = optimizer.state_dict()
    groups = state.get("param_groups") if isinstance(state, dict) else None
    if not isinstance(groups, list) or set(state) != set(own) or len(groups) != len(own["param_groups"]):
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is not a state of this run's optimizer")
    for index, (saved, mine) in enumerate(zip(groups, own["param_groups"], strict=True)):
        params = saved.get("params") if isinstance(saved, dict) else None  # compared as a list (a tensor's `!=` is one)
        if type(params) is not list or params != mine["params"] or set(saved) != set(mine):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} param group {index} is not this run's")
        for key, value in mine.items():
            _check_setting(saved[key], value, (0, value) if key == "lr" else None, f"{name} {key}")
    entries = state["state"]
    if not isinstance(entries, dict) or not all(type(index) is int for index in entries):
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} state is not by parameter index")
    kept = _state_of_a_step(optimizer) if entries else {}
    betas = {index: group.get("betas") for group in own["param_groups"] for index in group["params"]}
    for index, entry in entries.items():
        if index not in kept:
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} has a state {index}, for no parameter")
        if not isinstance(entry, dict) or set(entry) != set(kept[index]):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} state {index} is not {sorted(kept[index])}")
        for key, like in kept[index].items():
            where = f"{name} state {index} {key}"
            if not hasattr(like, "shape"):  # a number, or None (SGD's momentum buffer without momentum)
                _check_setting(entry[key], like, (-math.inf, math.inf), where)
                continue
            value = _checked_array(entry[key], where, tuple(like.shape), like.dtype)
            if key in NON_NEGATIVE_STATE and bool((value < 0).any()):
                raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {where} is negative")
        if {"exp_avg", "exp_avg_sq"} <= set(entry) and betas.get(index) is not None:
            _check_adam_moments(entry["exp_avg"], entry["exp_avg_sq"], *betas[index], f"{name} state {index}")


def _check_adam_moments(first: Any, second: Any, beta1: float, beta2: float, name: str) -> None:
    """RefusedCheckpoint unless Adam's moments are ones its steps can make. m = (1-b1) sum b1^k g and
    v = (1-b2) sum b2^k g^2 give, by Cauchy-Schwarz, |m| <= (1-b1) / sqrt((1-b2)(1-b1^2/b2)) sqrt(v) whatever the
    gradients (7.3 sqrt(v) at 0.9, 0.999): a large m over a small v would make the next step m / sqrt(v) huge."""
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1 and beta1 * beta1 < beta2):
        return
    bound = (1 - beta1) / math.sqrt((1 - beta2) * (1 - beta1 * beta1 / beta2))
    first, second = (np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64) for x in (first, second))
    # float32 rounding of the running sums, and gradients whose squares underflow to 0
    if bool((np.abs(first) > 1.01 * bound * np.sqrt(second) + 1e-15).any()):
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} has a first moment larger than Adam's steps make")


def _leaves(tree: Any) -> list[Any]:  # of a Flax params dict
    return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])] if isinstance(tree, dict) else [tree]


def _check_setting(value: Any, own: Any, valid: tuple[float, float] | None, name: str) -> None:
    """RefusedCheckpoint unless `value` is a finite number in `valid` (None: equal to `own`, the run's value), or for
    a setting that is no number, `own` itself."""
    if isinstance(own, tuple):  # Adam's betas, Rprop's etas
        if not isinstance(value, list | tuple) or len(value) != len(own):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is not {len(own)} values")
        for item, own_item in zip(value, own, strict=True):
            _check_setting(item, own_item, valid, name)
    elif isinstance(own, int | float) and not isinstance(own, bool):
        finite = type(value) in (int, float) and -sys.float_info.max <= value <= sys.float_info.max  # NaN: False
        if valid is None and (not finite or value != own):
            raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} ({_shown(value)}) is not this run's {own:g}")
        if valid is not None and (not finite or not valid[0] <= value <= valid[1]):
            raise RefusedCheckpoint(
                f"--resume: refused, the checkpoint's {name} ({_shown(value)}) is not a finite number in {valid[0]:g} to {valid[1]:g}"
            )
    elif type(value) is not type(own) or value != own:  # flags (fused, amsgrad...): the script sets them, never a run
        raise RefusedCheckpoint(f"--resume: refused, the checkpoint's {name} is {_shown(value)}, this run's {_shown(own)}")


def _state_of_a_step(optimizer: Any) -> dict[int, dict[str, Any]]:
    """The per-parameter state of `optimizer` after one step (by the indices of its `state_dict`), taken by a twin
    of it with its settings, on zeros of its parameters' shapes with zero gradients: what it keeps differs between
    optimisers, their settings (amsgrad, momentum), parameter shapes (Adafactor) and torch versions."""
    import torch

    groups = []
    for group in optimizer.param_groups:
        zeros = [torch.zeros_like(parameter, requires_grad=True) for parameter in group["params"]]
        for parameter in zeros:
            parameter.grad = torch.zeros_like(parameter)
        groups.append({**group, "params": zeros})
    twin = type(optimizer)(groups)
    twin.step()
    return twin.state_dict()["state"]


SB3_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def _is_sb3_buffer(obj: Any) -> bool:
    buffers = sys.modules.get("stable_baselines3.common.buffers")
    return buffers is not None and isinstance(obj, buffers.ReplayBuffer)


def _check_sb3_rows(buffer: Any, name: str, rows: np.ndarray) -> None:
    """ValueError unless the replay memory's `rows` of array `name` are values the run could have added: floats
    finite, dones and timeouts 0 or 1, actions in the buffer's action space (Box ones up to float rounding: SAC's
    tanh-squashed actions are not clipped)."""
    if rows.dtype.kind in "fc" and not np.isfinite(rows).all():
        raise ValueError(f"its {name} hold a nan or an infinity")
    if name in ("dones", "timeouts") and not np.isin(rows, (0, 1)).all():
        raise ValueError(f"its {name} are not all 0 or 1")
    if name != "actions" or rows.size == 0:
        return
    from gymnasium import spaces  # stable_baselines3 imported it

    space = buffer.action_space
    if isinstance(space, spaces.Box):  # rows are (size, n_envs, action_dim), the space's values flattened
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        slack = 1e-5 * (1 + np.maximum(abs(low), abs(high)))
        inside = (rows >= low - slack) & (rows <= high + slack)
    elif isinstance(space, spaces.Discrete | spaces.MultiDiscrete):  # whole numbers from `start` on
        count = space.n if isinstance(space, spaces.Discrete) else space.nvec
        start, count = np.reshape(space.start, -1), np.reshape(count, -1)
        inside = (rows == np.round(rows)) & (rows >= start) & (rows < start + count)
    else:
        return  # no script stores actions of another space (MultiBinary...)
    if not inside.all():
        raise ValueError(f"its actions are not all in the action space {space}")


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
        _check_sb3_rows(buffer, name, array)
    for name in names:  # once all are checked
        getattr(buffer, name)[:size] = state[name]
    buffer.pos, buffer.full = pos, full
