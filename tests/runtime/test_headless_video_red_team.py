"""Red team: --capture-video on a Linux machine without a display, and --capture-video on a --resume.

The claims: importing cleanrl_utils.runtime picks SDL's dummy driver when there is no display and no driver is
chosen, so a headless --capture-video prints no "XDG_RUNTIME_DIR is invalid or not set" and still writes videos;
and a --resume with --capture-video films the episodes that begin after its checkpoint again, in the run's own
folders, without gymnasium's "Overwriting existing videos" warning and without cutting short the video of the
episode under way at the checkpoint (whose frames the checkpoint does not keep).

Every run here gets an environment with no DISPLAY, WAYLAND_DISPLAY, SDL_VIDEODRIVER or XDG_RUNTIME_DIR:
tests/conftest.py and tests/helpers.script_env set SDL_VIDEODRIVER=dummy, which would hide the SDL message.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import egl_missing, missing_system_package, run_script, script_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SDL picks its drivers so on Linux")

# PYOPENGL_PLATFORM: set in this process by `import mujoco` with MUJOCO_GL=egl, a user's shell has none
HEADLESS_UNSET = ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER", "XDG_RUNTIME_DIR", "PYOPENGL_PLATFORM")
SDL_MESSAGE = "XDG_RUNTIME_DIR"
OVERWRITING = "Overwriting existing videos"


def headless_env(**extra: str) -> dict[str, str]:
    """script_env() as on a Linux machine with no display, no SDL driver chosen and no XDG runtime folder."""
    env = {k: v for k, v in script_env().items() if k not in HEADLESS_UNSET}
    env.update(extra)
    return env


def frame_count(video: Path) -> int:
    import imageio_ffmpeg

    return imageio_ffmpeg.count_frames_and_secs(str(video))[0]


def _python(code: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=headless_env(**extra), capture_output=True, text=True, timeout=120)


def enjoy_filming(exp_name: str, env_id: str, model: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m cleanrl_utils.enjoy` playing `model` for 2 episodes with --capture-video."""
    command = ["--exp-name", exp_name, "--env-id", env_id, "--model-path", str(model), "--eval-episodes", "2"]
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *command, "--capture-video"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _no_gl_env() -> dict[str, str]:
    return {k: v for k, v in headless_env().items() if k != "MUJOCO_GL"}


MUJOCO_LINE = "--capture-video: MuJoCo films without a display through EGL or OSMesa: set MUJOCO_GL=egl (or osmesa)"


DRAW = (
    "import cleanrl_utils.runtime, gymnasium as gym; e = gym.make('CartPole-v1', render_mode='rgb_array'); "
    "e.reset(seed=0); print(e.render().shape); e.close()"
)


@pytest.mark.fast
@pytest.mark.parametrize("extra", [{}, {"DISPLAY": ""}, {"WAYLAND_DISPLAY": ""}, {"DISPLAY": "", "XDG_RUNTIME_DIR": ""}])
def test_a_frame_drawn_headless_prints_nothing(extra):
    # an empty DISPLAY or WAYLAND_DISPLAY names no display: the same as unset
    run = _python(DRAW, **extra)
    assert (run.returncode, run.stdout, run.stderr) == (0, "(400, 600, 3)\n", "")


@pytest.mark.fast
def test_an_empty_sdl_videodriver_is_no_driver_chosen():
    """SDL_VIDEODRIVER= (set, empty: e.g. a Docker/compose env template with the value left blank) names no driver,
    as an empty DISPLAY names no display. Left as it was, pygame took "" for its old "windib" alias and failed:
    "pygame.error: windows not available", so --capture-video crashed headless."""
    run = _python(DRAW, SDL_VIDEODRIVER="")
    assert (run.returncode, run.stdout, run.stderr) == (0, "(400, 600, 3)\n", ""), run.stderr[-500:]


@pytest.mark.fast
def test_a_display_or_a_chosen_sdl_driver_is_left_as_it_is():
    driver = "import os, cleanrl_utils.runtime; print(os.environ.get('SDL_VIDEODRIVER'))"
    assert _python(driver).stdout == "dummy\n"
    assert _python(driver, DISPLAY=":1").stdout == "None\n"
    assert _python(driver, WAYLAND_DISPLAY="wayland-0").stdout == "None\n"
    assert _python(driver, SDL_VIDEODRIVER="x11").stdout == "x11\n"


@pytest.mark.extended
def test_headless_capture_video_and_its_eval_print_nothing(tmp_path):
    # the claim's own command, with --save-model for the evaluation's videos (videos/<run>-eval) too
    run = run_script(
        "ppo.py", "--total-timesteps", "512", "--num-steps", "128", "--capture-video", "--save-model",
        cwd=tmp_path, env=headless_env(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert SDL_MESSAGE not in run.stderr + run.stdout
    assert run.stderr == ""
    assert run.videos() and run.videos("-eval")


@pytest.mark.extended
def test_headless_enjoy_capture_video_prints_nothing(tmp_path):
    trained = run_script("ppo.py", "--total-timesteps", "512", "--num-steps", "128", "--save-model", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    model = next(trained.run_dir.glob("*.cleanrl_model"))
    enjoy = enjoy_filming("ppo", "CartPole-v1", model, cwd=tmp_path, env=headless_env())
    assert enjoy.returncode == 0, enjoy.stderr[-3000:]
    assert enjoy.stderr == ""
    assert list((tmp_path / "videos").glob("CartPole-v1__ppo__enjoy__*/*.mp4"))


@pytest.fixture(scope="module")
def resumed_mid_recording(tmp_path_factory):
    """A finished ppo.py run (--capture-video --save-model, a checkpoint every 2 iterations of 512 steps), its videos
    as they were, and a resume from its older kept checkpoint, at step 3072. At that step sub-env 0 is in the middle
    of filming episode 27 (rl-video-episode-27.mp4, begun before the checkpoint, ended after it)."""
    from cleanrl_utils.runtime import checkpoint as ckpt

    cwd = tmp_path_factory.mktemp("resume_video")
    args = ("--total-timesteps", "4096", "--num-steps", "128", "--checkpoint-frequency", "2")
    first = run_script("ppo.py", *args, "--capture-video", "--save-model", cwd=cwd, env=headless_env())
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoint = first.run_dir / "checkpoints" / "checkpoint_3072.pt"
    recorder = [
        layer["values"] for layer in ckpt.load(checkpoint)["envs"][1]["sub_envs"][0] if layer["class"] == "RecordVideo"
    ][0]
    if not recorder["recording"]:
        pytest.skip("the checkpoint at step 3072 falls between two filmed episodes here: nothing to cut short")
    before = {v.name: frame_count(v) for v in first.videos()}
    shutil.copytree(cwd / "videos", cwd / "videos_before")
    resumed = run_script("ppo.py", "--resume", str(checkpoint.relative_to(cwd)), cwd=cwd, env=headless_env())
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = {v.name: frame_count(v) for v in first.videos()}
    return first, resumed, recorder, before, after


@pytest.mark.extended
def test_resume_does_not_cut_short_a_video_begun_before_its_checkpoint(resumed_mid_recording):
    """The recorder's "recording" is a plain value in the checkpoint, its frames are not: restored as it was, the
    episode filmed across the checkpoint was written again from the checkpoint on only, a complete video (43 frames
    here) replaced by its tail (18). The restored recorder films from the next episode on instead."""
    first, resumed, recorder, before, after = resumed_mid_recording
    shortened = {name: (before[name], after.get(name)) for name in before if (after.get(name) or 0) < before[name]}
    folder = f"videos/{first.run_dir.name} folder"  # the training videos' folder, not videos/<run>-eval
    warned = any(OVERWRITING in line and folder in line for line in resumed.stderr.splitlines())
    assert not shortened, (
        f"the resume replaced {sorted(shortened)} with shorter videos (frames before, after: {shortened}); "
        f"warned about {folder}: {warned}"
    )


@pytest.mark.extended
def test_resume_of_a_finished_run_does_not_warn_about_its_videos(resumed_mid_recording):
    """The run finished and evaluated (--save-model: videos/<run>-eval); a resume from an older checkpoint trains
    and evaluates again. Its evaluation's RecordVideo is made outside Experiment.make_envs: gymnasium's
    "Overwriting existing videos at videos/<run>-eval" must not reach stderr either."""
    first, resumed, *_ = resumed_mid_recording
    assert OVERWRITING not in resumed.stderr, resumed.stderr[-1500:]
    assert SDL_MESSAGE not in first.stderr + resumed.stderr


def test_mujoco_filming_with_no_display_and_no_gl_backend_is_one_line(tmp_path):
    """MuJoCo's default backend (GLFW) needs a display and is fixed when mujoco is imported: without MUJOCO_GL the
    first frame ended in a traceback (mujoco.FatalError, "an OpenGL platform library has not been loaded")."""
    pytest.importorskip("mujoco", reason="mujoco is not installed (pip install -e '.[mujoco]')")
    run = run_script("sac_continuous_action.py", "--env-id", "Hopper-v4", "--capture-video", cwd=tmp_path, env=_no_gl_env())
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"sac_continuous_action.py: error: {MUJOCO_LINE}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no run folder, no videos/ left"


def test_dm_control_filming_refused_headless_leaves_no_videos_folder(tmp_path):
    """A dm_control id's run name is nested (videos/dm_control/<run>): the refusal removed videos/dm_control/<run>
    only, then videos/ was not empty (videos/dm_control) and stayed, with an empty videos/dm_control in it."""
    pytest.importorskip("mujoco")
    pytest.importorskip("shimmy")
    pytest.importorskip("dm_control")
    run = run_script(
        "sac_continuous_action.py", "--env-id", "dm_control/cartpole-balance-v0", "--capture-video",
        cwd=tmp_path, env=_no_gl_env(),
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.strip().splitlines() == [f"sac_continuous_action.py: error: {MUJOCO_LINE}"]
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [], "no runs/ or videos/ left"


@pytest.mark.extended
def test_playground_filming_headless_is_one_line(tmp_path):
    """ppo_continuous_action_playground.py films outside Experiment.make_envs: headless without MUJOCO_GL it printed
    GLFW's two warnings ("X11: The DISPLAY environment variable is missing", "The GLFW library is not initialized",
    four lines with their sources) before its own, differently worded error."""
    pytest.importorskip("mujoco_playground")
    run = run_script(
        "ppo_continuous_action_playground.py", "--env-id", "CartpoleBalance", "--capture-video",
        "--num-envs", "4", "--num-steps", "16", "--total-timesteps", "64", cwd=tmp_path, env=_no_gl_env(),
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "MUJOCO_GL=egl" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.extended
def test_enjoy_mujoco_capture_video_headless_is_one_line(tmp_path):
    """python -m cleanrl_utils.enjoy --capture-video on a MuJoCo model, headless without MUJOCO_GL: a
    mujoco.FatalError traceback (~70 lines, GLFW warnings first), exit 1, and an empty videos/<env>__<exp>__enjoy__<t>
    left behind; training refuses the same case in one line."""
    pytest.importorskip("mujoco")
    trained = run_script(
        "sac_continuous_action.py", "--env-id", "Hopper-v4", "--total-timesteps", "300", "--learning-starts", "100",
        "--save-model", cwd=tmp_path, env=_no_gl_env(),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    model = next(trained.run_dir.glob("*.cleanrl_model"))
    enjoy = enjoy_filming("sac_continuous_action", "Hopper-v4", model, cwd=tmp_path, env=_no_gl_env())
    assert "Traceback" not in enjoy.stderr, enjoy.stderr[-1500:]
    assert enjoy.returncode == 2
    assert "MUJOCO_GL=egl" in enjoy.stderr
    assert not (tmp_path / "videos").exists()


# MUJOCO_GL, three readers: `import mujoco` takes it loosely (lower-cased, stripped, "glx", "1"...), dm_control (on
# import) and Gymnasium's renderer (at the first frame) compare it as written, each with its own list. A value one of
# them refuses, or a backend whose library or driver is missing, ended runs in tracebacks, filming or not: a typo at
# `import mujoco` (RuntimeError "invalid value for environment variable MUJOCO_GL"), osmesa without libOSMesa there
# too (AttributeError "'NoneType' object has no attribute 'glGetError'"), EGL with no driver at the first frame
# (AttributeError "'OffScreenViewer' object has no attribute 'opengl_context'"), MUJOCO_GL=EGL in dm_control's import
# (44 lines), MUJOCO_GL= (empty) with a display at Gymnasium's first frame (59 lines, runs/ and videos/ left). The
# rule now: egl, osmesa, glfw or disable, written so, for every MuJoCo run; then the backend must load.
NO_EGL_VENDOR = {"MUJOCO_GL": "egl", "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl_vendor.json"}
SHORT_RUN = ("--env-id", "Hopper-v4", "--total-timesteps", "300", "--learning-starts", "100")
DMC_SHORT_RUN = ("--env-id", "dm_control/cartpole-balance-v0", "--total-timesteps", "128", "--num-steps", "64",
                 "--num-envs", "1")  # fmt: skip
PLAYGROUND_SHORT_RUN = ("--env-id", "CartpoleBalance", "--num-envs", "4", "--num-steps", "16", "--total-timesteps", "64")


def not_written_so(backend: str) -> str:
    return f"MUJOCO_GL={backend!r}: set it as MuJoCo names a backend (egl, osmesa, glfw, disable), or unset it"


def _osmesa_loads() -> bool:
    return _python("import mujoco", MUJOCO_GL="osmesa").returncode == 0


def skip_without_driverless_egl() -> None:
    """Skip unless EGL works here and libglvnd's libEGL finds no driver when its vendor file list names none (another
    libEGL ignores the variable); a missing EGL skips naming its package (under CI=true, fails)."""
    if reason := egl_missing():
        missing_system_package(reason)
    if _python("from mujoco.egl import GLContext; GLContext(8, 8).free()", **NO_EGL_VENDOR).returncode == 0:
        pytest.skip("this libEGL is not libglvnd's: no driverless EGL")


def assert_refused_in_one_line(run: subprocess.CompletedProcess, script: str, cwd: Path, starts: str) -> str:
    """The run stopped with one line `<script>: error: <starts>...`, exit code 2, and left no runs/ or videos/."""
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 2, run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: {starts}"), run.stderr
    assert sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*")) == [], "no runs/ or videos/ left"
    return lines[0]


@pytest.mark.parametrize("capture_video", [False, True])
@pytest.mark.parametrize("backend", ["elg", "EGL", " egl", "glx", "1", ""])
def test_a_mujoco_gl_not_written_as_mujoco_names_it_is_one_line(tmp_path, backend, capture_video):
    """Filming or not, and even where `import mujoco` takes the value (EGL, " egl", glx, 1): dm_control and
    Gymnasium's renderer would not."""
    pytest.importorskip("mujoco")
    film = ("--capture-video",) if capture_video else ()
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, *film, cwd=tmp_path, env=headless_env(MUJOCO_GL=backend))
    assert_refused_in_one_line(run, "ddpg_continuous_action.py", tmp_path, not_written_so(backend))


@pytest.mark.parametrize("backend", ["EGL", "1"])
def test_a_dm_control_run_with_a_mujoco_gl_not_written_so_is_one_line_without_glfw_warnings(tmp_path, backend):
    """dm_control's own check raised in its import (a 44-line traceback for EGL); with MUJOCO_GL=1 (GLFW to dm_control)
    and --capture-video, headless, GLFW printed "X11: The DISPLAY environment variable is missing" first."""
    pytest.importorskip("shimmy")
    run = run_script(
        "ppo_continuous_action.py", *DMC_SHORT_RUN, "--capture-video", cwd=tmp_path, env=headless_env(MUJOCO_GL=backend)
    )
    assert_refused_in_one_line(run, "ppo_continuous_action.py", tmp_path, not_written_so(backend))
    assert "GLFW" not in run.stderr


def test_osmesa_without_its_library_is_one_line(tmp_path):
    pytest.importorskip("mujoco")
    if _osmesa_loads():
        pytest.skip("OSMesa loads here (libosmesa6 installed): nothing to refuse")
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path, env=headless_env(MUJOCO_GL="osmesa"))
    line = assert_refused_in_one_line(run, "ddpg_continuous_action.py", tmp_path, "MuJoCo cannot start with MUJOCO_GL=")
    assert line.endswith(": install libosmesa6")


@pytest.mark.parametrize("display", [None, ":99"])
def test_filming_with_rendering_turned_off_is_one_line(tmp_path, display):
    """With a display, MUJOCO_GL=disable passed the headless rule and failed at Gymnasium's first frame (57 lines)."""
    pytest.importorskip("mujoco")
    env = headless_env(MUJOCO_GL="disable", **({"DISPLAY": display} if display else {}))
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--capture-video", cwd=tmp_path, env=env)
    assert_refused_in_one_line(run, "ddpg_continuous_action.py", tmp_path, "--capture-video: MUJOCO_GL=disable")


def test_rendering_turned_off_trains_without_filming(tmp_path):
    pytest.importorskip("shimmy")
    for args in (SHORT_RUN, DMC_SHORT_RUN):
        script = "ddpg_continuous_action.py" if args is SHORT_RUN else "ppo_continuous_action.py"
        run = run_script(script, *args, cwd=tmp_path, env=headless_env(MUJOCO_GL="disable"))
        assert run.returncode == 0, run.stderr[-2000:]


def test_filming_through_an_egl_with_no_driver_is_one_line_and_training_alone_runs(tmp_path):
    """A Gymnasium MuJoCo run that does not film needs no GL context, so a driverless EGL must not stop it."""
    pytest.importorskip("mujoco")
    skip_without_driverless_egl()
    env = headless_env(**NO_EGL_VENDOR)
    filming = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--capture-video", cwd=tmp_path, env=env)
    line = assert_refused_in_one_line(
        filming, "ddpg_continuous_action.py", tmp_path, "MuJoCo cannot film with MUJOCO_GL='egl'"
    )
    assert line.endswith("install EGL and a driver (Debian: libegl1, libegl-mesa0)")
    training = run_script("ddpg_continuous_action.py", *SHORT_RUN, cwd=tmp_path, env=env)
    assert training.returncode == 0, training.stderr[-2000:]


def test_a_dm_control_run_through_an_egl_with_no_driver_is_one_line_naming_the_driver(tmp_path):
    """dm_control makes its EGL display on import: a run that does not film stopped with a false hint, 'dm_control envs
    need shimmy and dm_control; install it with pip install -e ".[dm_control]"' (both installed)."""
    pytest.importorskip("shimmy")
    skip_without_driverless_egl()
    run = run_script("ppo_continuous_action.py", *DMC_SHORT_RUN, cwd=tmp_path, env=headless_env(**NO_EGL_VENDOR))
    line = assert_refused_in_one_line(run, "ppo_continuous_action.py", tmp_path, "MuJoCo cannot start with MUJOCO_GL='egl'")
    assert "libegl-mesa0" in line and "pip install" not in line


def test_a_pyopengl_platform_that_contradicts_mujoco_gl_is_named(tmp_path):
    """MuJoCo sets PYOPENGL_PLATFORM only where it is unset: MUJOCO_GL=egl with PYOPENGL_PLATFORM=osmesa failed at the
    first frame, and the probe's own reason ("module 'mujoco' has no attribute 'GLContext'") hides why."""
    pytest.importorskip("mujoco")
    env = headless_env(MUJOCO_GL="egl", PYOPENGL_PLATFORM="osmesa")
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--capture-video", cwd=tmp_path, env=env)
    line = assert_refused_in_one_line(run, "ddpg_continuous_action.py", tmp_path, "MuJoCo cannot film with MUJOCO_GL='egl'")
    assert line.endswith("PYOPENGL_PLATFORM='osmesa' is not 'egl': unset PYOPENGL_PLATFORM")


def test_a_dm_control_dependency_missing_is_not_blamed_on_mujoco_gl(tmp_path):
    """The probe imports dm_control.mujoco: a module missing under it is the env's to report (which extra installs
    it), not MUJOCO_GL's ("MuJoCo cannot start with MUJOCO_GL='' (No module named 'dm_env'): unset it", when unset)."""
    pytest.importorskip("shimmy")
    fake = tmp_path / "fake" / "dm_env"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'dm_env'\", name='dm_env')\n")
    env = {k: v for k, v in headless_env().items() if k != "MUJOCO_GL"}
    env["PYTHONPATH"] = f"{fake.parent}:{env['PYTHONPATH']}"
    run = run_script("ppo_continuous_action.py", *DMC_SHORT_RUN, cwd=tmp_path / "run", env=env)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "MUJOCO_GL" not in run.stderr and "install it" in run.stderr, run.stderr


@pytest.mark.extended
@pytest.mark.parametrize("backend", ["foo", "EGL"])
def test_playground_with_a_mujoco_gl_not_written_so_is_one_line(tmp_path, backend):
    """The Playground file imports mujoco_playground (and so mujoco) at its top, before any Experiment check: "foo"
    raised there. "EGL" would film through mujoco.Renderer, which reads it loosely: refused all the same, so that one
    rule holds for every MuJoCo run (the docs say so)."""
    pytest.importorskip("mujoco_playground")
    film = ("--capture-video",) if backend == "EGL" else ()
    run = run_script(
        "ppo_continuous_action_playground.py", *PLAYGROUND_SHORT_RUN, *film, cwd=tmp_path, env=headless_env(MUJOCO_GL=backend)
    )
    assert_refused_in_one_line(run, "ppo_continuous_action_playground.py", tmp_path, not_written_so(backend))


@pytest.mark.extended
def test_enjoy_with_a_mujoco_gl_not_written_so_is_one_line(tmp_path):
    pytest.importorskip("mujoco")
    trained = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--save-model", cwd=tmp_path, env=headless_env())
    assert trained.returncode == 0, trained.stderr[-3000:]
    model = next(trained.run_dir.glob("*.cleanrl_model"))
    command = ["--exp-name", "ddpg_continuous_action", "--env-id", "Hopper-v4", "--model-path", str(model)]
    enjoy = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *command, "--eval-episodes", "1"],
        cwd=tmp_path, env=headless_env(MUJOCO_GL="foo"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in enjoy.stderr, enjoy.stderr[-2000:]
    assert enjoy.returncode == 2
    assert enjoy.stderr.strip().splitlines() == [f"enjoy: error: {not_written_so('foo')}"]


@pytest.mark.extended
def test_enjoy_dm_control_with_a_mujoco_gl_not_written_so_does_not_blame_the_model(tmp_path):
    """enjoy turned dm_control's RuntimeError into "the model from ... does not fit ppo_continuous_action in
    dm_control/cartpole-balance-v0: Environment variable MUJOCO_GL must be one of [...]: got 'EGL'"."""
    pytest.importorskip("shimmy")
    trained = run_script("ppo_continuous_action.py", *DMC_SHORT_RUN, "--save-model", cwd=tmp_path, env=headless_env())
    assert trained.returncode == 0, trained.stderr[-3000:]
    model = next((tmp_path / "runs").rglob("*.cleanrl_model"))  # runs/dm_control/<run>/
    command = ["--exp-name", "ppo_continuous_action", "--env-id", "dm_control/cartpole-balance-v0", "--model-path", str(model)]
    enjoy = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *command, "--eval-episodes", "1"],
        cwd=tmp_path, env=headless_env(MUJOCO_GL="EGL"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in enjoy.stderr, enjoy.stderr[-2000:]
    assert enjoy.returncode == 2
    assert enjoy.stderr.strip().splitlines() == [f"enjoy: error: {not_written_so('EGL')}"]


def playground_model(folder: Path) -> Path:
    """An untrained Playground agent's weights (5 observations, 1 action), saved as the script saves its model."""
    model = folder / "pg.cleanrl_model"
    code = (
        "import sys; sys.argv = ['x']; from types import SimpleNamespace; import torch; "
        "from cleanrl.ppo_continuous_action_playground import Agent; "
        f"torch.save(Agent(SimpleNamespace(observation_size=5, action_size=1)).state_dict(), {str(model)!r})"
    )
    assert _python(code).returncode == 0
    return model


@pytest.mark.extended
def test_enjoy_playground_capture_video_headless_is_one_line(tmp_path):
    """enjoy checked MuJoCo only for ids extra_for() calls mujoco or dm_control, and a Playground task is "all":
    `enjoy --exp-name ppo_continuous_action_playground --capture-video` headless without MUJOCO_GL printed GLFW's two
    warnings and a mujoco.FatalError traceback ("an OpenGL platform library has not been loaded"), exit 1."""
    pytest.importorskip("mujoco_playground")
    model = playground_model(tmp_path)
    enjoy = enjoy_filming("ppo_continuous_action_playground", "CartpoleBalance", model, cwd=tmp_path, env=_no_gl_env())
    assert "Traceback" not in enjoy.stderr, enjoy.stderr[-1500:]
    assert enjoy.returncode == 2
    assert enjoy.stderr.strip().splitlines() == [f"enjoy: error: {MUJOCO_LINE}"]
    assert not (tmp_path / "videos").exists()


# Red team of 0eb77f0 (each case reproduced by hand before it was written down).
def test_filming_through_glfw_with_an_unreachable_display_is_one_line(tmp_path):
    """The probe makes a GL context for egl and osmesa only: MUJOCO_GL unset (GLFW) with a DISPLAY that names no
    reachable X server (ssh without X forwarding, a container given DISPLAY but not the X socket) passed it, and the
    first frame ended in a 48-line mujoco.FatalError traceback ("an OpenGL platform library has not been loaded"),
    GLFW's "X11: Failed to open display :99" first, leaving runs/<run> (with .writer.lock) and an empty videos/<run>."""
    pytest.importorskip("mujoco")
    if Path("/tmp/.X11-unix/X99").exists():
        pytest.skip("an X server listens on :99 here")
    env = {**_no_gl_env(), "DISPLAY": ":99"}
    run = run_script("ddpg_continuous_action.py", *SHORT_RUN, "--capture-video", cwd=tmp_path, env=env)
    line = assert_refused_in_one_line(run, "ddpg_continuous_action.py", tmp_path, "MuJoCo cannot film with MUJOCO_GL unset")
    assert line.endswith("GLFW needs a display it can open: check DISPLAY, or set MUJOCO_GL=egl (or osmesa)")


@pytest.mark.extended
def test_playground_without_filming_takes_the_one_mujoco_gl_rule(tmp_path):
    """script-contract.md and the CHANGELOG: every MuJoCo run, Playground included, stops at start on a MUJOCO_GL not
    written as MuJoCo names its backends ("MUJOCO_GL=EGL ... is now refused for every MuJoCo run"). The Playground
    file checks MUJOCO_GL only when `import mujoco_playground` fails or with --capture-video: without filming,
    MUJOCO_GL=EGL trained to the end, exit code 0."""
    pytest.importorskip("mujoco_playground")
    run = run_script(
        "ppo_continuous_action_playground.py", *PLAYGROUND_SHORT_RUN, cwd=tmp_path, env=headless_env(MUJOCO_GL="EGL")
    )
    assert_refused_in_one_line(run, "ppo_continuous_action_playground.py", tmp_path, not_written_so("EGL"))


@pytest.mark.extended
def test_enjoy_playground_with_a_mujoco_gl_import_mujoco_refuses_says_enjoy(tmp_path):
    """enjoy imports the algorithm file (the zoo entry) before its own MuJoCo check: the Playground file's top-level
    handler printed `ppo_continuous_action_playground.py: error: MUJOCO_GL='foo': ...` and exited, so enjoy's one
    line came under another program's name."""
    pytest.importorskip("mujoco_playground")
    model = playground_model(tmp_path)
    command = ["--exp-name", "ppo_continuous_action_playground", "--env-id", "CartpoleBalance", "--model-path", str(model)]
    enjoy = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.enjoy", *command, "--eval-episodes", "1"],
        cwd=tmp_path, env=headless_env(MUJOCO_GL="foo"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert enjoy.returncode == 2, enjoy.stderr[-2000:]
    assert enjoy.stderr.strip().splitlines() == [f"enjoy: error: {not_written_so('foo')}"]


def test_a_dm_control_import_failure_under_mujoco_gl_egl_is_not_blamed_on_egl(tmp_path):
    """Any exception but ModuleNotFoundError from `import dm_control.mujoco` is blamed on a set MUJOCO_GL, with that
    backend's install hint: a broken dependency (an ImportError raised in dm_env here; dm_control's own "MuJoCo library
    version does not match header version" likewise) came back as "MuJoCo cannot start with MUJOCO_GL='egl' (dm_env
    was built against ...): install EGL and a driver (Debian: libegl1, libegl-mesa0)". MUJOCO_GL unset, the same probe
    says nothing and making the env names the failure. The benchmark harness, its queues and the tests set egl."""
    pytest.importorskip("shimmy")
    if reason := egl_missing():  # its own failure would come first
        missing_system_package(reason)
    fake = tmp_path / "fake" / "dm_env"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("dm_env was built against another numpy (broken install)")\n')
    env = headless_env(MUJOCO_GL="egl")
    env["PYTHONPATH"] = f"{fake.parent}:{env['PYTHONPATH']}"
    code = "from cleanrl_utils.runtime.experiment import mujoco_problem; print(mujoco_problem(False, True))"
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "libegl" not in probe.stdout and "MUJOCO_GL='egl'" not in probe.stdout, probe.stdout
