"""Red team of 818a3bc, which blamed MUJOCO_GL, at the start stage, for any exception from `import mujoco` (or `from
dm_control import _render`) but an ImportError whose traceback did not pass through a folder named OpenGL, glfw, egl,
osmesa, rendering or _render. Now `raised_loading_gl` judges by the innermost frame outside the standard library, in
the GL packages' own folders.

The claims: a real GL backend failure is one line naming MUJOCO_GL; a broken MuJoCo or dm_control install that is not
about GL is not blamed on MUJOCO_GL, and the user gets one line naming the extra (or, for a non-import error, saying
to reinstall), never a traceback; enjoy likewise. Each case runs a script (or `python -m cleanrl_utils.enjoy`) in a
subprocess, with stand-in packages first on PYTHONPATH; the docstrings say what happened before the fix.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import egl_missing, missing_system_package, run_script
from tests.runtime.test_headless_video_red_team import (
    DMC_SHORT_RUN,
    NO_EGL_VENDOR,
    SHORT_RUN,
    _osmesa_loads,
    headless_env,
    skip_without_driverless_egl,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MUJOCO_GL's EGL and OSMesa are Linux's")

EGL_HINT = "install EGL and a driver (Debian: libegl1, libegl-mesa0)"


def stand_in(root: Path, package: str, code: str) -> Path:
    """`root`, holding a package `package` whose __init__.py is `code`: first on PYTHONPATH, it replaces the real one."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(code)
    return root


def env_with(path: Path, **extra: str) -> dict[str, str]:
    """headless_env(**extra) with `path` first on PYTHONPATH; MUJOCO_GL="" in `extra` unsets it."""
    env = headless_env(**extra)
    env["PYTHONPATH"] = f"{path}:{env['PYTHONPATH']}"
    if env.get("MUJOCO_GL") == "":
        del env["MUJOCO_GL"]
    return env


def one_line(run, program: str) -> str:
    """The run's one stderr line, `<program>: error: ...`, after exit code 2 and no traceback."""
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{program}: error: "), run.stderr
    return lines[0]


def enjoy(model: Path, cwd: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    command = ["--exp-name", "ddpg_continuous_action", "--env-id", "Hopper-v4", "--model-path", str(model)]
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *command, "--eval-episodes", "1", *extra],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def ddpg_hopper_model(tmp_path_factory) -> Path:
    pytest.importorskip("mujoco")
    cwd = tmp_path_factory.mktemp("ddpg_hopper")
    trained = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--save-model", cwd=cwd, env=headless_env())
    assert trained.returncode == 0, trained.stderr[-3000:]
    return next(trained.run_dir.glob("*.cleanrl_model"))


# Claim 2: a broken install that is not about GL.
@pytest.mark.parametrize("folder", ["egl", "rendering"])
def test_a_broken_mujoco_in_a_folder_named_like_a_gl_backend_is_not_blamed_on_mujoco_gl(tmp_path, folder):
    """`raised_loading_gl` looks for the names anywhere in a frame's path, not in the GL packages: the same stand-in
    mujoco (ImportError from its own __init__) that names the extra from /tmp/.../plain/ was blamed on EGL from
    /tmp/.../egl/ or /tmp/.../rendering/: "ddpg_continuous_action.py: error: MuJoCo cannot start with MUJOCO_GL='egl'
    (mujoco is broken for this test): install EGL and a driver (Debian: libegl1, libegl-mesa0)". A venv or a checkout
    under ~/rendering/, ~/egl/ or ~/OpenGL/ puts every frame of a broken MuJoCo there."""
    pytest.importorskip("mujoco")
    fake = stand_in(tmp_path / folder, "mujoco", "raise ImportError('mujoco is broken for this test')\n")
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path / "run", env=env_with(fake, MUJOCO_GL="egl"))
    line = one_line(run, "ddpg_continuous_action.py")
    assert "MUJOCO_GL" not in line and '.[mujoco]"' in line, line


def test_a_broken_mujoco_binary_extension_names_the_extra(tmp_path):
    """Holds: a mujoco whose compiled module does not load (ImportError "invalid ELF header") under MUJOCO_GL=egl:
    'ddpg_continuous_action.py: error: Hopper-v4: MuJoCo is not installed; install it with pip install -e
    ".[mujoco]"'."""
    pytest.importorskip("mujoco")
    fake = stand_in(tmp_path / "fake", "mujoco", "from mujoco import _specs\n")
    (fake / "mujoco" / f"_specs.cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so").write_bytes(
        b"not an ELF file" * 100
    )
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path / "run", env=env_with(fake, MUJOCO_GL="egl"))
    line = one_line(run, "ddpg_continuous_action.py")
    assert "MUJOCO_GL" not in line and '.[mujoco]"' in line, line


def test_a_broken_dm_control_dependency_imported_by_render_is_not_blamed_on_mujoco_gl(tmp_path):
    """dm_control/_render/__init__.py imports absl before any backend: a broken absl (an ImportError from its own
    __init__) passes through "_render", so with MUJOCO_GL=egl it was "ppo_continuous_action.py: error: MuJoCo cannot
    start with MUJOCO_GL='egl' (absl is broken for this test): install EGL and a driver (Debian: libegl1,
    libegl-mesa0)"; MUJOCO_GL unset, the same install gave 'dm_control/cartpole-balance-v0: dm_control envs need shimmy
    and dm_control; install it with pip install -e ".[dm_control]"'."""
    pytest.importorskip("shimmy")
    if reason := egl_missing():  # its own failure would come first
        missing_system_package(reason)
    fake = stand_in(tmp_path / "fake", "absl", "raise ImportError('absl is broken for this test')\n")
    run = run_script("ppo_continuous_action.py", *DMC_SHORT_RUN, cwd=tmp_path / "run", env=env_with(fake, MUJOCO_GL="egl"))
    line = one_line(run, "ppo_continuous_action.py")
    assert "MUJOCO_GL" not in line and "libegl" not in line, line


# Claim 3: an exception other than ImportError from mujoco's own __init__.
RUNTIME_ERROR = "raise RuntimeError('MuJoCo library version mismatch (stand-in)')\n"


def test_a_runtime_error_in_mujocos_init_with_mujoco_gl_unset_is_one_line(tmp_path):
    """MUJOCO_GL unset, `mujoco_problem` returns None for any exception, and make_envs catches only gym errors,
    ImportError and OSError: a RuntimeError raised by `import mujoco` ended the run in a 48-line traceback (exit 1),
    "RuntimeError: MuJoCo library version mismatch (stand-in)" last."""
    pytest.importorskip("mujoco")
    fake = stand_in(tmp_path / "fake", "mujoco", RUNTIME_ERROR)
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path / "run", env=env_with(fake, MUJOCO_GL=""))
    line = one_line(run, "ddpg_continuous_action.py")
    assert "MuJoCo library version mismatch" in line


def test_a_runtime_error_in_mujocos_init_is_not_blamed_on_the_backend(tmp_path):
    """Any exception but ImportError is blamed on a set MUJOCO_GL, whatever raised it: mujoco's own __init__,
    before it loads any backend, gave "ddpg_continuous_action.py: error: MuJoCo cannot start with MUJOCO_GL='egl'
    (MuJoCo library version mismatch (stand-in)): install EGL and a driver (Debian: libegl1, libegl-mesa0)", on a
    machine where EGL works. The same install, MUJOCO_GL unset, is a traceback (test above)."""
    pytest.importorskip("mujoco")
    fake = stand_in(tmp_path / "fake", "mujoco", RUNTIME_ERROR)
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path / "run", env=env_with(fake, MUJOCO_GL="egl"))
    line = one_line(run, "ddpg_continuous_action.py")
    assert "libegl" not in line and "MUJOCO_GL" not in line, line


# Claim 1: a real GL failure, named in one line with the right hint.
@pytest.mark.parametrize("dm_control", [False, True], ids=["gym-filming", "dm_control-start"])
def test_a_pyopengl_platform_written_in_capitals_is_named_not_the_egl_driver(tmp_path, dm_control):
    """818a3bc lower-cases PYOPENGL_PLATFORM before comparing it with MUJOCO_GL, but PyOpenGL matches its platform as
    written and dm_control compares it as written: PYOPENGL_PLATFORM=EGL with MUJOCO_GL=egl, on a machine where EGL
    works, fails at the probe's GL context (gym, filming) and in dm_control's import (not filming), and the hint sent
    the user to install a driver they have: "MuJoCo cannot film with MUJOCO_GL='egl' (Cannot initialize a EGL device
    display. ...): install EGL and a driver (Debian: libegl1, libegl-mesa0)" and "MuJoCo cannot start with
    MUJOCO_GL='egl' (Cannot use EGL rendering platform. The PYOPENGL_PLATFORM environment variable is set to 'EGL'
    (should be either unset or 'egl').): install EGL and a driver (Debian: libegl1, libegl-mesa0)"."""
    pytest.importorskip("shimmy" if dm_control else "mujoco")
    if reason := egl_missing():  # its own failure would come first
        missing_system_package(reason)
    env = headless_env(MUJOCO_GL="egl", PYOPENGL_PLATFORM="EGL")
    if dm_control:
        run = run_script("ppo_continuous_action.py", *DMC_SHORT_RUN, cwd=tmp_path, env=env)
    else:
        run = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--capture-video", cwd=tmp_path, env=env)
    line = one_line(run, "ppo_continuous_action.py" if dm_control else "ddpg_continuous_action.py")
    assert EGL_HINT not in line and "unset PYOPENGL_PLATFORM" in line, line


# enjoy
def test_enjoy_a_runtime_error_in_mujocos_init_does_not_blame_the_model(tmp_path, ddpg_hopper_model):
    """MUJOCO_GL unset, enjoy's probe returns None, and the RuntimeError from `import mujoco` at the env's making is
    caught as a model that does not fit: "enjoy: error: the model from .../ddpg_continuous_action.cleanrl_model does
    not fit ddpg_continuous_action in Hopper-v4: MuJoCo library version mismatch (stand-in)" (after Gymnasium's
    two-line Hopper-v4 DeprecationWarning); the model was saved by that script for that env."""
    fake = stand_in(tmp_path / "fake", "mujoco", RUNTIME_ERROR)
    run = enjoy(ddpg_hopper_model, tmp_path / "run", env_with(fake, MUJOCO_GL=""))
    line = one_line(run, "enjoy")
    assert "does not fit" not in line, line


def test_enjoy_a_broken_mujoco_is_one_line_naming_the_extra(tmp_path, ddpg_hopper_model):
    """The claim's own case (an ImportError from mujoco's own package, MUJOCO_GL=egl as CI sets it), under enjoy:
    the probe returns None, and enjoy has no import check of its own, so the user got Gymnasium's two-line Hopper-v4
    DeprecationWarning, then "enjoy: error: cannot make env 'Hopper-v4': MuJoCo is not installed, run `pip install
    "gymnasium[mujoco]"`": three lines, naming Gymnasium's extra, not this project's `pip install -e ".[mujoco]"`."""
    fake = stand_in(tmp_path / "fake", "mujoco", "raise ImportError('mujoco is broken for this test')\n")
    run = enjoy(ddpg_hopper_model, tmp_path / "run", env_with(fake, MUJOCO_GL="egl"))
    line = one_line(run, "enjoy")
    assert '.[mujoco]"' in line and "gymnasium[mujoco]" not in line, line


def test_enjoy_osmesa_without_its_library_is_one_line(tmp_path, ddpg_hopper_model):
    """Holds: "enjoy: error: MuJoCo cannot start with MUJOCO_GL='osmesa' ('NoneType' object has no attribute
    'glGetError'): install libosmesa6"."""
    if _osmesa_loads():
        pytest.skip("OSMesa loads here (libosmesa6 installed): nothing to refuse")
    run = enjoy(ddpg_hopper_model, tmp_path, headless_env(MUJOCO_GL="osmesa"))
    line = one_line(run, "enjoy")
    assert line.startswith("enjoy: error: MuJoCo cannot start with MUJOCO_GL='osmesa'") and line.endswith(
        ": install libosmesa6"
    ), line
    assert not (tmp_path / "videos").exists()


def test_enjoy_filming_through_an_egl_with_no_driver_is_one_line(tmp_path, ddpg_hopper_model):
    """Holds: "enjoy: error: MuJoCo cannot film with MUJOCO_GL='egl' (Cannot initialize a EGL device display. ...):
    install EGL and a driver (Debian: libegl1, libegl-mesa0)", and no videos/ folder."""
    skip_without_driverless_egl()
    run = enjoy(ddpg_hopper_model, tmp_path, headless_env(**NO_EGL_VENDOR), "--capture-video")
    line = one_line(run, "enjoy")
    assert line.startswith("enjoy: error: MuJoCo cannot film with MUJOCO_GL='egl'") and line.endswith(EGL_HINT), line
    assert not (tmp_path / "videos").exists()


@pytest.mark.parametrize("capture_video", [False, True])
def test_a_libegl_that_does_not_load_is_blamed_on_egl(tmp_path, capture_video):
    """The case the rule exists for, where EGL works: a libEGL.so.1 that is not a library, first on the loader's
    path, fails in PyOpenGL's loader (AttributeError on a None handle, raised in OpenGL/), so it is EGL's."""
    pytest.importorskip("mujoco")
    broken = tmp_path / "lib"
    broken.mkdir()
    for name in ("libEGL.so.1", "libEGL.so"):
        (broken / name).write_text("not a shared library\n")
    film = ("--capture-video",) if capture_video else ()
    env = headless_env(MUJOCO_GL="egl", LD_LIBRARY_PATH=str(broken))
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, *film, cwd=tmp_path / "run", env=env)
    line = one_line(run, "ddpg_continuous_action.py")
    assert line.startswith("ddpg_continuous_action.py: error: MuJoCo cannot start with MUJOCO_GL='egl'"), line
    assert line.endswith(EGL_HINT), line
