"""cleanrl_utils.runtime.checkpoint: a resumed MuJoCo env renders its resumed simulation; a checkpoint only resumes its own script."""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import plain_data
from tests.helpers import egl_missing, missing_system_package, run_script

# --- MuJoCo: restoring an env must not leave its renderer on the fresh env's simulation


def mujoco_env(render: bool):
    pytest.importorskip("mujoco", reason="mujoco is not installed (pip install -e '.[mujoco]')")
    import gymnasium as gym

    env = gym.make("HalfCheetah-v4", render_mode="rgb_array")
    if render:  # the renderer has opened its viewer, as in a run recording video
        env.reset(seed=99)
        env.render()
    return env


def played(seed: int, steps: int, render: bool):
    env = mujoco_env(render)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for _ in range(steps):
        env.step(env.action_space.sample())
    return env


@pytest.mark.parametrize("rendered", [True, False], ids=["renderer-with-viewer", "renderer-not-yet-used"])
def test_restored_mujoco_env_renders_the_restored_state(rendered):
    if reason := egl_missing():
        missing_system_package(reason)
    env = played(seed=1, steps=25, render=rendered)
    snapshot = ckpt.env_state(env)
    fresh = mujoco_env(render=rendered)
    fresh.reset(seed=2)
    ckpt.restore_env(fresh, snapshot)

    frame = env.render()
    assert np.array_equal(fresh.render(), frame)
    reset_frame = mujoco_env(render=False)
    reset_frame.reset(seed=1)
    assert not np.array_equal(reset_frame.render(), frame), "25 steps should move the cheetah on screen"

    unwrapped = fresh.unwrapped
    assert unwrapped.mujoco_renderer.data is unwrapped.data and unwrapped.mujoco_renderer.model is unwrapped.model
    for _ in range(3):  # the renderer follows the simulation on, not a copy frozen at the snapshot
        action = env.action_space.sample()
        a, b = env.step(action), fresh.step(action)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]
        assert np.array_equal(fresh.render(), env.render())


@pytest.mark.extended  # 5 s of one core: CI runs it after the quick run
def test_resumed_mujoco_video_records_the_resumed_run(tmp_path, monkeypatch):
    """As sac_continuous_action.py resumes: a fresh vector env, not reset, restored; the recorder renders every step."""
    pytest.importorskip("mujoco", reason="mujoco is not installed (pip install -e '.[mujoco]')")
    from cleanrl import sac_continuous_action as sac

    monkeypatch.chdir(tmp_path)  # videos/ lands here
    envs = sac.make_vector_env("HalfCheetah-v4", 1, True, "run")
    envs.reset(seed=1)  # the recorder starts a clip and renders: the renderer now has a viewer, so cannot be pickled
    envs.action_space.seed(1)
    for _ in range(10):
        envs.step(envs.action_space.sample())
    snapshot = ckpt.env_state(envs)
    fresh = sac.make_vector_env("HalfCheetah-v4", 1, True, "run")  # a resume keeps its run name, so its video folder
    ckpt.restore_env(fresh, snapshot)
    recorded, resumed = envs.envs[0].env.env, fresh.envs[0].env.env
    assert type(recorded).__name__ == "RecordVideo" and recorded.recording
    # the clip under way is not filmed again (its first frames are not in the checkpoint): the next one is
    assert not resumed.recording
    resumed.start_recording("rl-video-episode-1")  # as the recorder's trigger does when the next episode begins

    action = envs.action_space.sample()
    envs.step(action), fresh.step(action)  # the resumed renderer opens its viewer here
    # a new viewer aims its camera at the scene as it is then; the frames are compared through the same camera
    camera = fresh.envs[0].unwrapped.mujoco_renderer.viewer.cam
    envs.envs[0].unwrapped.mujoco_renderer.viewer.cam.lookat[:] = camera.lookat
    for _ in range(3):
        action = envs.action_space.sample()
        envs.step(action), fresh.step(action)
        assert np.array_equal(resumed.recorded_frames[-1], recorded.recorded_frames[-1])
    assert not np.array_equal(resumed.recorded_frames[-1], resumed.recorded_frames[-3]), "the clip goes on, not frozen"
    envs.close(), fresh.close()


# --- Atari: the emulator, which cannot be pickled, travels as ale-py's own state


def atari_env():
    pytest.importorskip("ale_py", reason="ale-py is not installed (pip install -e '.[atari]')")
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return gym.wrappers.RecordEpisodeStatistics(gym.make("BreakoutNoFrameskip-v4"))


def test_atari_env_snapshot_puts_the_emulator_back():
    env = atari_env()
    env.reset(seed=3)
    for _ in range(30):
        env.step(env.action_space.sample())
    snapshot = ckpt.env_state(env)
    actions = [env.action_space.sample() for _ in range(40)]
    expected = [env.step(a)[0] for a in actions]

    fresh = atari_env()
    fresh.reset(seed=99)  # another game, and another emulator random state
    ckpt.restore_env(fresh, snapshot)
    for action, frame in zip(actions, expected, strict=True):
        np.testing.assert_array_equal(fresh.step(action)[0], frame)


# --- a checkpoint records the script that wrote it


@dataclass
class Args:  # ppo.py and ppo_atari.py alike: the same argument names
    exp_name: str = "x"
    seed: int = 1
    resume: str | None = None


def running_as(monkeypatch: pytest.MonkeyPatch, script: str | None) -> None:
    main = sys.modules["__main__"]
    if script is None:  # an interactive session: no file
        monkeypatch.delattr(main, "__file__", raising=False)
    else:
        monkeypatch.setattr(main, "__file__", f"/somewhere/cleanrl/{script}", raising=False)


def test_checkpoint_of_another_script_is_refused(tmp_path, monkeypatch):
    running_as(monkeypatch, "ppo_atari.py")
    state = {"args": vars(Args(seed=7)), "global_step": 10}
    ckpt.save(tmp_path, 10, state)
    assert "script" not in state  # the caller's dict is left as it was
    checkpoint = ckpt.load(tmp_path)
    assert checkpoint["script"] == "ppo_atari.py"

    running_as(monkeypatch, "ppo.py")
    with pytest.raises(ckpt.CheckpointError) as refused:
        ckpt.restored_args(Args(resume=str(tmp_path)), checkpoint)
    assert str(refused.value) == "--resume: this checkpoint was written by ppo_atari.py, not ppo.py"

    running_as(monkeypatch, "ppo_atari.py")
    assert ckpt.restored_args(Args(resume=str(tmp_path)), checkpoint).seed == 7


def test_checkpoint_without_its_script_still_resumes(tmp_path, monkeypatch):
    # written before checkpoints recorded their script
    (tmp_path / "checkpoint_10.pt").write_bytes(plain_data.dumps({"args": vars(Args(seed=7)), "global_step": 10}))
    running_as(monkeypatch, "ppo.py")
    assert ckpt.restored_args(Args(), ckpt.load(tmp_path)).seed == 7

    # nor does a run with no script file (an interactive session) record or check one
    running_as(monkeypatch, None)
    ckpt.save(tmp_path / "interactive", 10, {"args": vars(Args(seed=8)), "global_step": 10})
    checkpoint = ckpt.load(tmp_path / "interactive")
    assert "script" not in checkpoint
    assert ckpt.restored_args(Args(), {**checkpoint, "script": "ppo_atari.py"}).seed == 8


def test_script_refuses_another_scripts_checkpoint_in_one_line(tmp_path):
    from cleanrl import ppo

    # ppo.py's own arguments, as a checkpoint of ppo_atari.py would hold the same names
    path: Path = tmp_path / "other.pt"
    path.write_bytes(plain_data.dumps({"args": vars(ppo.Args()), "script": "ppo_atari.py", "global_step": 128}))
    (tmp_path / "runs").mkdir()
    run = run_script("ppo.py", "--resume", str(path), cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert lines == ["ppo.py: error: --resume: this checkpoint was written by ppo_atari.py, not ppo.py"], run.stderr
    assert list((tmp_path / "runs").iterdir()) == []


# --- MiniGrid: the grid and the objects on it are rebuilt from MiniGrid's own classes


def test_minigrid_env_snapshot_continues_the_same_episode():
    pytest.importorskip("minigrid", reason="minigrid is not installed")
    from cleanrl.ppo_trxl import ppo_trxl
    from cleanrl_utils.runtime import plain_data

    def make():
        return ppo_trxl.make_vector_env("MiniGrid-MemoryS7-v0", 2, False, "unused")

    envs = make()
    envs.reset(seed=4)
    envs.action_space.seed(4)
    for _ in range(7):
        envs.step(envs.action_space.sample())
    snapshot = plain_data.loads(plain_data.dumps(ckpt.env_state(envs)))  # as a checkpoint carries it
    fresh = make()
    ckpt.restore_env(fresh, snapshot)
    for _ in range(200):  # past episode ends: the restored generators draw the same next rooms
        actions = envs.action_space.sample()
        assert np.array_equal(fresh.action_space.sample(), actions)
        a, b = envs.step(actions), fresh.step(actions)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])


def test_an_emulator_state_cut_short_or_of_another_game_is_one_line():
    from cleanrl_utils.runtime import env_state

    env = atari_env()
    env.reset(seed=3)
    snapshot = ckpt.env_state(env)
    (layer,) = [layer for layer in snapshot if "ale" in layer["objects"]]
    good = layer["objects"]["ale"]["state"]
    for bad in (good[: len(good) // 2], good.replace(good[40:72], b"0" * 32), good * 3):
        layer["objects"]["ale"]["state"] = bad
        with pytest.raises(env_state.EnvStateError, match="Atari emulator state is not one of this game"):
            env_state.restore(atari_env(), snapshot)
