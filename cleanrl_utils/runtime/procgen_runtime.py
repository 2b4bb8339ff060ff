"""The Qt 5 runtime that envpool's Procgen games link, taken from the `PyQt5-Qt5` wheel: no system package needed.

envpool's Procgen extension needs `libQt5Core.so.5` and `libQt5Gui.so.5`. Debian ships them as apt packages,
which need root; the `PyQt5-Qt5` wheel (in the `procgen`, `envpool`, `test` and `all` extras) ships the same
libraries, with the ICU libraries they use, inside site-packages. Loading them into the process with
`RTLD_GLOBAL` before the extension is imported lets the dynamic linker resolve its Qt symbols from them.

`import envpool` imports its Procgen package at once and remembers a failed load, so `load()` also retries that
import when envpool came first; every Procgen path (the scripts' `make_env`, the benchmark, the tests) calls
`load()` right before `envpool.make`.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import sys
from pathlib import Path

# ICU first: Qt Core needs it, and Qt Gui needs Core
LIBRARIES = ("libicudata.so.56", "libicuuc.so.56", "libicui18n.so.56", "libQt5Core.so.5", "libQt5Gui.so.5")
INSTALL_HINT = 'pip install -e ".[procgen]" (it brings the PyQt5-Qt5 wheel)'
LIBGL_HINT = "the wheel's Qt 5 links the system's OpenGL library: install it (Debian/Ubuntu: apt-get install libgl1)"


def install_hint(error: BaseException) -> str:
    """What to install when envpool's Procgen failed to load with `error`."""
    return LIBGL_HINT if "libGL" in str(error) else INSTALL_HINT


_loaded: list[ctypes.CDLL] = []  # kept referenced: the libraries stay mapped for the life of the process


def wheel_lib_dir() -> Path | None:
    """The `PyQt5/Qt5/lib` folder of the installed PyQt5-Qt5 wheel, or None when it is not installed."""
    spec = importlib.util.find_spec("PyQt5")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        lib = Path(folder) / "Qt5" / "lib"
        if (lib / "libQt5Core.so.5").is_file():
            return lib
    return None


def load() -> Path | None:
    """Load the wheel's Qt 5 libraries (once) and make envpool's Procgen importable; the folder used, or None.

    Does nothing off Linux, or where the wheel is missing (a system Qt 5 may still serve; envpool then says
    what is missing), or where envpool's Procgen already loaded against another Qt 5.
    """
    if not sys.platform.startswith("linux"):
        return None
    procgen = sys.modules.get("envpool.procgen")
    already_working = procgen is not None and getattr(procgen, "_PROCGEN_IMPORT_ERROR", None) is None
    lib = wheel_lib_dir()
    if lib is None or already_working:
        return lib if _loaded else None
    if not _loaded:
        _loaded.extend(ctypes.CDLL(str(lib / name), mode=ctypes.RTLD_GLOBAL) for name in LIBRARIES)
    if procgen is not None:  # envpool was imported before the libraries were there: it kept the failure
        importlib.reload(procgen)
    return lib
