"""A run's environments as plain data, put back into freshly made environments of the same wrappers.

Gymnasium envs have no save and load. `snapshot` goes through each wrapper layer (and each sub-env of a vector
env) and keeps its attributes of two sorts:

- plain values (numbers, strings, arrays, lists, deques, NumPy generators...: what `plain_data` writes): the
  simulator state of the classic envs, step counts, episode statistics, frame stacks;
- the state of objects of a few known classes, as plain data: a Gymnasium space's random generator (and its
  sub-spaces'), a `RunningMeanStd`'s statistics, a MuJoCo `MjData`'s arrays, an ale-py emulator's own state
  (`cloneState(include_rng=True)`, as bytes), a MiniGrid grid and the objects on it.

Anything else (renderers, callbacks, env specs, video frames) is left out and stays as the fresh env made it: a
video recorder films from the next episode on. `restore` then writes into the fresh env: plain values are set on
the same layer, and the known objects are filled in place (the fresh space's generator gets the saved state, the
fresh `MjData` the saved arrays, the fresh emulator the saved state), so the renderer and everything else that
holds them sees the resumed state. Only MiniGrid's grid objects are built from the file, from their fixed list of classes.

`restore` checks the file's side: the same wrapper classes in the same order, attribute names that are plain
names and hide nothing of the layer's class, each known object of the class the fresh layer holds there, arrays
of the shapes and dtypes the fresh objects have, each value of the kind the fresh layer holds under its name
(`_same_kind`), and no path (a string with `/`) other than the fresh env's own: a snapshot can set values, but
cannot point a run's files elsewhere.
"""

from __future__ import annotations

import collections
import copy
import inspect
import math
import re
import sys
from typing import Any

import numpy as np

from cleanrl_utils.runtime import plain_data

# left out: the wrapper structure itself, video frames being recorded (large, re-recorded) and a MuJoCo renderer
SKIPPED_ATTRIBUTES = frozenset({"env", "envs", "recorded_frames", "render_history", "mujoco_renderer"})
LAYER_FIELDS = {"class", "values", "objects", "sub_envs"}
OBJECT_FIELDS = {
    "space": {"kind", "class", "rng", "parts"},
    "running_mean_std": {"kind", "mean", "var", "count"},
    "mujoco_data": {"kind", "time", "arrays"},
    "ale": {"kind", "state"},
    "minigrid_grid": {"kind", "width", "height", "cells"},
    "minigrid_object": {"kind", "cell", "object"},
}
CELL_FIELDS = {"type", "color", "is_open", "is_locked", "contains", "init_pos", "cur_pos"}
MAX_GRID_CELLS = 1 << 20


class EnvStateError(ValueError):
    """A snapshot that does not fit the env it is restored into, or that asks for what a snapshot may not do."""


def layers_of(env: Any) -> list[Any]:
    """An env's wrapper layers, outermost first, down to the unwrapped env (vector or single)."""
    layers = [env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers


# ---------------------------------------------------------------- snapshot


def snapshot(env: Any) -> list[dict[str, Any]]:
    """Each wrapper layer of `env`: its class name, plain values, known objects' states, and sub-envs' snapshots.

    A copy: it stays as it is now while the env goes on (its generators and arrays are not the env's)."""
    return copy.deepcopy(_snapshot(env))


def _snapshot(env: Any) -> list[dict[str, Any]]:
    layers = []
    for layer in layers_of(env):
        values, objects = {}, {}
        for name, value in vars(layer).items():
            if name in SKIPPED_ATTRIBUTES:
                continue
            state = _object_state(value, layer)
            if state is not None:
                objects[name] = state
            elif plain_data.is_plain(value):
                values[name] = value
        sub_envs = getattr(layer, "envs", None)
        sub_snapshots = [_snapshot(sub_env) for sub_env in sub_envs] if isinstance(sub_envs, list) else None
        layers.append({"class": type(layer).__name__, "values": values, "objects": objects, "sub_envs": sub_snapshots})
    return layers


def _module(name: str) -> Any:
    """A module of an optional package, only if the running script imported it (nothing is imported here)."""
    return sys.modules.get(name)


def _object_state(value: Any, layer: Any) -> dict[str, Any] | None:
    """The state of a known object as plain data, or None when `value` is not one."""
    import gymnasium as gym
    from gymnasium.wrappers.utils import RunningMeanStd

    if isinstance(value, gym.spaces.Space):
        return _space_state(value)
    if isinstance(value, RunningMeanStd):
        return {"kind": "running_mean_std", "mean": value.mean, "var": value.var, "count": value.count}
    mujoco, ale_py, minigrid_grid = _module("mujoco"), _module("ale_py"), _module("minigrid.core.grid")
    if mujoco is not None and isinstance(value, mujoco.MjData):
        arrays = {name: array for name in dir(value) if isinstance(array := getattr(value, name, None), np.ndarray)}
        return {"kind": "mujoco_data", "time": float(value.time), "arrays": arrays}
    if ale_py is not None and isinstance(value, ale_py.ALEInterface):
        return {"kind": "ale", "state": value.cloneState(include_rng=True).serialize()}
    if minigrid_grid is not None and isinstance(value, minigrid_grid.Grid):
        cells = [_cell(obj) for obj in value.grid]
        return {"kind": "minigrid_grid", "width": value.width, "height": value.height, "cells": cells}
    world_object = _module("minigrid.core.world_object")
    if world_object is not None and isinstance(value, world_object.WorldObj):
        grid = getattr(getattr(layer, "grid", None), "grid", [])
        index = next((i for i, obj in enumerate(grid) if obj is value), None)  # the same object as on the grid
        return {"kind": "minigrid_object", "cell": index, "object": None if index is not None else _cell(value)}
    return None


def _space_state(space: Any) -> dict[str, Any]:
    import gymnasium as gym

    parts = {}
    if isinstance(space, gym.spaces.Tuple | gym.spaces.Dict):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space.spaces)
        parts = {str(key): _space_state(part) for key, part in items}
    return {"kind": "space", "class": type(space).__name__, "rng": space._np_random, "parts": parts}


def _minigrid_classes() -> dict[str, type]:
    from minigrid.core import world_object as wo

    return {"wall": wo.Wall, "floor": wo.Floor, "door": wo.Door, "key": wo.Key, "ball": wo.Ball, "box": wo.Box,
            "goal": wo.Goal, "lava": wo.Lava}  # fmt: skip


def _cell(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    if _minigrid_classes().get(obj.type) is not type(obj):
        raise TypeError(f"a checkpoint holds MiniGrid's own world objects only, not a {type(obj).__qualname__}")
    flags = {"is_open": bool(getattr(obj, "is_open", False)), "is_locked": bool(getattr(obj, "is_locked", False))}
    positions = {name: _position(getattr(obj, name)) for name in ("init_pos", "cur_pos")}
    return {"type": obj.type, "color": obj.color, **flags, "contains": _cell(obj.contains), **positions}


def _position(position: Any) -> tuple[int, int] | None:
    return None if position is None else (int(position[0]), int(position[1]))


# ---------------------------------------------------------------- restore


def restore(env: Any, layers: Any) -> None:
    """Put a `snapshot` into `env`, a fresh env made the same way; EnvStateError (one line) if it does not fit."""
    _check_layers(layers)
    fresh = layers_of(env)
    if [type(layer).__name__ for layer in fresh] != [saved["class"] for saved in layers]:
        raise EnvStateError(
            f"the checkpoint's env wrappers {[saved['class'] for saved in layers][:8]} differ from this run's"
            f" {[type(layer).__name__ for layer in fresh][:8]}"
        )
    for layer, saved in zip(fresh, layers, strict=True):
        for name, value in saved["values"].items():
            _set_value(layer, name, value)
        if type(layer).__name__ == "RecordVideo":  # its frames so far are not kept: it films from the next episode on
            layer.recording = False
        order = {"minigrid_grid": 0, "ale": 2}  # the grid before the objects on it; the emulator last
        for name, state in sorted(saved["objects"].items(), key=lambda item: order.get(item[1]["kind"], 1)):
            _restore_object(layer, name, state)
        sub_envs = getattr(layer, "envs", None)
        if saved["sub_envs"] is not None:
            if not isinstance(sub_envs, list) or len(sub_envs) != len(saved["sub_envs"]):
                raise EnvStateError(f"the checkpoint's {saved['class']} has another number of sub-envs than this run's")
            for sub_env, sub_snapshot in zip(sub_envs, saved["sub_envs"], strict=True):
                restore(sub_env, sub_snapshot)


def _check_layers(layers: Any) -> None:
    if not isinstance(layers, list) or not layers:
        raise EnvStateError("the checkpoint's env snapshot is not a list of wrapper layers")
    for saved in layers:
        if not isinstance(saved, dict) or set(saved) != LAYER_FIELDS or not isinstance(saved["class"], str):
            raise EnvStateError("a layer of the checkpoint's env snapshot is not {class, values, objects, sub_envs}")
        for field in ("values", "objects"):
            if not isinstance(saved[field], dict) or not all(isinstance(name, str) for name in saved[field]):
                raise EnvStateError(f"the {field} of the checkpoint's {saved['class'][:40]} are not named")
        for state in saved["objects"].values():
            kind = state.get("kind") if isinstance(state, dict) else None
            if type(kind) is not str or kind not in OBJECT_FIELDS or set(state) != OBJECT_FIELDS[kind]:
                raise EnvStateError(f"the checkpoint's {saved['class'][:40]} holds an object of no known kind")
        if saved["sub_envs"] is not None and not isinstance(saved["sub_envs"], list):
            raise EnvStateError(f"the sub-envs of the checkpoint's {saved['class'][:40]} are not a list")


def _where(layer: Any, name: str) -> str:
    return f"{type(layer).__name__}.{name[:60]}"


def _check_name(layer: Any, name: str) -> None:
    """A plain attribute name, which hides no method or property of the layer's class (nor the wrapper chain)."""
    if not name.isidentifier() or name.startswith("__") or name in SKIPPED_ATTRIBUTES:
        raise EnvStateError(f"the checkpoint sets the attribute {name[:60]!r} of {type(layer).__name__}")
    own = inspect.getattr_static(type(layer), name, None)
    if name not in vars(layer) and (callable(own) or hasattr(own, "__get__")):
        raise EnvStateError(f"the checkpoint would hide {_where(layer, name)}, which its class defines")


PATH_LIKE = re.compile(r"[/\\\0]|^\.\.?$")


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in _texts(key) + _texts(item)]
    if isinstance(value, list | tuple) or type(value).__name__ == "deque":
        return [text for item in value for text in _texts(item)]
    return []


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # arrays inside: no single truth value
        return False


def _set_value(layer: Any, name: str, value: Any) -> None:
    _check_name(layer, name)
    fresh = vars(layer).get(name)
    if any(PATH_LIKE.search(text) for text in _texts(value)) and not _same(value, fresh):
        raise EnvStateError(f"the checkpoint sets {_where(layer, name)} to a path this run does not use")
    if name in vars(layer) and not _same_kind(value, fresh):
        shown = _kind(value) + (f" {value.shape}" if isinstance(value, np.ndarray) else "")
        raise EnvStateError(
            f"the checkpoint sets {_where(layer, name)} to a {shown}, where this run's env has a {_kind(fresh)}"
        )
    if name in _settings(layer) and isinstance(fresh, NUMBERS + (str,)) and not _same_setting(value, fresh):
        raise EnvStateError(
            f"the checkpoint sets {_where(layer, name)}, a setting its class takes, to another than this run's"
        )
    if not _finite(value) and _finite(fresh):  # a NaN in a simulator's state reaches every observation, silently
        raise EnvStateError(
            f"the checkpoint sets {_where(layer, name)} to a nan or an infinity, where this run's env has none"
        )
    if isinstance(value, np.random.Generator) and _same_generator_kind(fresh, value):
        fresh.bit_generator.state = value.bit_generator.state  # into the generator others may hold too
    else:
        vars(layer)[name] = value


NUMBERS = (int, float, np.integer, np.floating)


def _settings(layer: Any) -> set[str]:
    """The names of what the layer's class takes when it is made (NormalizeReward's gamma, a frame skip): the run's
    command line and script set them, never a step; a snapshot holds them only because they are attributes."""
    try:
        return set(inspect.signature(type(layer).__init__).parameters) - {"self", "env"}
    except (TypeError, ValueError):  # a class made in C: no signature
        return set()


def _same_setting(saved: Any, fresh: Any) -> bool:
    return _kind(saved) == _kind(fresh) and bool(saved == fresh)  # a NaN equals nothing


def _finite(value: Any) -> bool:
    """No NaN nor infinity in `value`'s floats (itself, its arrays, its items); True for what holds none (None too)."""
    if isinstance(value, float | np.floating | np.complexfloating):
        return bool(np.isfinite(value))
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    if isinstance(value, list | tuple | collections.deque):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


def _kind(value: Any) -> str:
    """What `_same_kind` compares, in words."""
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, NUMBERS):
        return "number"
    if isinstance(value, np.ndarray):
        return f"ndarray of {value.dtype}"
    if type(value) is collections.deque:
        return f"deque of at most {value.maxlen}"
    return type(value).__name__


def _same_kind(saved: Any, fresh: Any) -> bool:
    """Whether a saved value may replace the fresh env's value: anything where the fresh env holds None (set on its
    first reset, which a resumed env skips), None anywhere (envs set values back to None: a wrapper's last step
    before a reset), else one of its kind, never a type the env does not hold there: a
    number for a number (int, float or NumPy's), a bool for a bool, an array of the same dtype and shape (any shape
    where the fresh array is 0-d: some wrappers size their arrays at the first reset), a container of the same type
    (and length, where the fresh one holds items; what it holds is not compared)."""
    if isinstance(fresh, np.ndarray) and fresh.ndim and isinstance(saved, np.ndarray) and saved.shape != fresh.shape:
        return False
    if isinstance(fresh, list | tuple) and fresh and type(saved) is type(fresh) and len(saved) != len(fresh):
        return False  # one item per sub-env (a vector env's observations)
    return fresh is None or saved is None or _kind(saved) == _kind(fresh)


def _same_generator_kind(fresh: Any, saved: np.random.Generator) -> bool:
    return isinstance(fresh, np.random.Generator) and type(fresh.bit_generator) is type(saved.bit_generator)


def _fresh_object(layer: Any, name: str, kind: type | None, what: str) -> Any:
    _check_name(layer, name)
    fresh = vars(layer).get(name)
    if kind is None or not isinstance(fresh, kind):
        raise EnvStateError(f"the checkpoint holds {what} in {_where(layer, name)}, where this run's env has none")
    return fresh


def _restore_object(layer: Any, name: str, state: dict[str, Any]) -> None:
    kind = state["kind"]
    if kind == "space":
        import gymnasium as gym

        _restore_space(_fresh_object(layer, name, gym.spaces.Space, "a space"), state, _where(layer, name))
    elif kind == "running_mean_std":
        from gymnasium.wrappers.utils import RunningMeanStd

        _restore_statistics(_fresh_object(layer, name, RunningMeanStd, "running statistics"), state, _where(layer, name))
    elif kind == "mujoco_data":
        mujoco = _module("mujoco")
        _restore_mujoco(_fresh_object(layer, name, mujoco and mujoco.MjData, "a MuJoCo simulation"), state)
    elif kind == "ale":
        ale_py = _module("ale_py")
        _restore_ale(_fresh_object(layer, name, ale_py and ale_py.ALEInterface, "an Atari emulator"), state)
    elif kind == "minigrid_grid":
        _check_name(layer, name)
        vars(layer)[name] = _grid(state)
    else:
        _check_name(layer, name)
        vars(layer)[name] = _grid_object(layer, state)


def _restore_space(space: Any, state: dict[str, Any], where: str) -> None:
    import gymnasium as gym

    if type(state["class"]) is not str or type(space).__name__ != state["class"] or not isinstance(state["parts"], dict):
        raise EnvStateError(f"the checkpoint's {where} is a {str(state['class'])[:40]}, this run's a {type(space).__name__}")
    rng = state["rng"]
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise EnvStateError(f"the checkpoint's {where} has a random generator of no known kind")
    if rng is None or not _same_generator_kind(space._np_random, rng):
        space._np_random = rng
    else:
        space._np_random.bit_generator.state = rng.bit_generator.state
    parts = {}
    if isinstance(space, gym.spaces.Tuple | gym.spaces.Dict):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space.spaces)
        parts = {str(key): part for key, part in items}
    if set(parts) != set(state["parts"]):
        raise EnvStateError(f"the checkpoint's {where} has other sub-spaces than this run's")
    for key, part in parts.items():
        part_state = state["parts"][key]
        if not isinstance(part_state, dict) or set(part_state) != OBJECT_FIELDS["space"]:
            raise EnvStateError(f"a sub-space of the checkpoint's {where} is not a space's state")
        _restore_space(part, part_state, f"{where}[{key[:20]}]")


def _array_like(saved: Any, fresh: Any) -> bool:
    """An array (or NumPy scalar) of the shape and dtype of `fresh`."""
    is_numpy = isinstance(saved, np.ndarray | np.generic)
    return is_numpy and np.shape(saved) == np.shape(fresh) and np.asarray(saved).dtype == np.asarray(fresh).dtype


def _restore_statistics(statistics: Any, state: dict[str, Any], where: str) -> None:
    """Mean, variance and count as saved (a 0-d array becomes a NumPy scalar after an update: kept as it was), if
    they are statistics: finite, the variance not negative, the count positive (a NaN would spread to every
    observation or reward the run sees, silently)."""
    mean, var, count = state["mean"], state["var"], state["count"]
    arrays_fit = _float_array_like(mean, statistics.mean) and _float_array_like(var, statistics.var)
    if not arrays_fit or not isinstance(count, float | int | np.floating | np.integer) or isinstance(count, bool):
        raise EnvStateError(f"the checkpoint's {where} are not statistics of this run's shape")
    if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all() and 0 < count < math.inf):
        raise EnvStateError(f"the checkpoint's {where} are not statistics (a nan, an infinity, or a count or variance <= 0)")
    statistics.mean, statistics.var, statistics.count = mean, var, count


def _float_array_like(saved: Any, fresh: Any) -> bool:
    """An array (or NumPy scalar) of floats of the shape of `fresh`: statistics made float32 turn float64 at their first
    update on float64 observations (MuJoCo's), so the dtype a fresh env has is not the one a run saves."""
    is_numpy = isinstance(saved, np.ndarray | np.generic)
    return is_numpy and np.shape(saved) == np.shape(fresh) and np.asarray(saved).dtype.kind == "f"


def _restore_mujoco(data: Any, state: dict[str, Any]) -> None:
    """Copy the saved arrays into the fresh `MjData` (the env's renderer draws this object): those of the same name,
    shape and dtype. Arrays sized by the last step's contacts may differ, and are recomputed by the next step."""
    if type(state["time"]) is not float or not isinstance(state["arrays"], dict):
        raise EnvStateError("the checkpoint's MuJoCo simulation is not {time, arrays}")
    for name, saved in state["arrays"].items():
        fresh = getattr(data, name, None) if isinstance(name, str) and not name.startswith("_") else None
        if isinstance(fresh, np.ndarray) and _array_like(saved, fresh) and fresh.flags.writeable:
            np.copyto(fresh, saved)
    data.time = state["time"]


ROM_CHECKSUM = re.compile(rb"[0-9a-f]{32}")


def _restore_ale(ale: Any, state: dict[str, Any]) -> None:
    """The emulator's saved state, if it is one of the same game (its ROM's checksum) and of about the size of one."""
    import ale_py

    saved, own = state["state"], ale.cloneState(include_rng=True).serialize()
    checksum = ROM_CHECKSUM.search(own)
    fits = isinstance(saved, bytes) and len(saved) <= 2 * len(own) and (checksum is None or checksum.group() in saved)
    try:
        if not fits:
            raise ValueError("not of this game")
        ale.restoreState(ale_py.ALEState(saved))
    except Exception:  # ale-py's parser refuses what it cannot read with a SystemError
        raise EnvStateError("the checkpoint's Atari emulator state is not one of this game") from None


def _grid(state: dict[str, Any]) -> Any:
    from minigrid.core.grid import Grid

    width, height, cells = state["width"], state["height"], state["cells"]
    sizes_fit = type(width) is int and type(height) is int and 3 <= width and 3 <= height
    if not sizes_fit or width * height > MAX_GRID_CELLS or not isinstance(cells, list) or len(cells) != width * height:
        raise EnvStateError("the checkpoint's MiniGrid grid is not a grid of its size")
    grid = Grid(width, height)
    grid.grid = [_world_object(cell) for cell in cells]
    return grid


def _grid_object(layer: Any, state: dict[str, Any]) -> Any:
    if state["cell"] is None:
        return _world_object(state["object"])
    grid = getattr(getattr(layer, "grid", None), "grid", [])
    index = state["cell"]
    if type(index) is not int or not 0 <= index < len(grid) or grid[index] is None or state["object"] is not None:
        raise EnvStateError("the checkpoint refers to a MiniGrid object its grid does not hold")
    return grid[index]


def _world_object(cell: Any) -> Any:
    """One of MiniGrid's world objects (or None), built from its fixed classes and colours."""
    from minigrid.core.constants import COLOR_NAMES

    if cell is None:
        return None
    classes = _minigrid_classes()
    if not isinstance(cell, dict) or set(cell) != CELL_FIELDS or cell["type"] not in classes:
        raise EnvStateError("the checkpoint's MiniGrid grid holds an object of no known kind")
    if cell["color"] not in COLOR_NAMES or type(cell["is_open"]) is not bool or type(cell["is_locked"]) is not bool:
        raise EnvStateError("the checkpoint's MiniGrid grid holds an object of no known colour or state")
    kind, color = classes[cell["type"]], cell["color"]
    if kind.__name__ == "Door":
        obj = kind(color, is_open=cell["is_open"], is_locked=cell["is_locked"])
    elif kind.__name__ == "Lava":
        obj = kind()
    else:
        obj = kind(color)
    obj.color = color
    obj.contains = _world_object(cell["contains"])
    for name in ("init_pos", "cur_pos"):
        setattr(obj, name, _saved_position(cell[name]))
    return obj


def _saved_position(position: Any) -> tuple[int, int] | None:
    if position is None:
        return None
    if type(position) is not tuple or len(position) != 2 or not all(type(n) is int for n in position):
        raise EnvStateError("the checkpoint's MiniGrid grid holds an object at no position")
    return position
