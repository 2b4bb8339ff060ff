"""ppo_continuous_action_playground.py: a CPU run read back, DLPack without copies, episode statistics, bad input, resume.

The script contract's own checks (tags, W&B, determinism, interrupts, help) run in tests/contract/test_script_contract.py.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.helpers import REPO, egl_missing, missing_system_package, run_in_process, run_script, script_env

if importlib.util.find_spec("mujoco_playground") is None and os.environ.get("CI") != "true":
    pytest.skip('mujoco_playground is not installed (pip install -e ".[playground]")', allow_module_level=True)

SCRIPT = "ppo_continuous_action_playground.py"
# 4 envs whose episodes the time limit ends after 50 steps: every 200 global steps, 4 episodes end together
TINY = ("--num-envs", "4", "--num-steps", "16", "--episode-length", "50")


def load_script():
    """The script as a module (its `__main__` block does not run): make_env, Agent."""
    spec = importlib.util.spec_from_file_location("ppo_playground", REPO / "cleanrl" / SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("playground")
    # in this process: the contract's smoke run (tests/contract/test_script_contract.py) is the script's real process
    video = [] if egl_missing() else ["--capture-video"]  # the saved-model test says why
    run = run_in_process(SCRIPT, *TINY, "--total-timesteps", "640", "--save-model", *video, cwd=cwd, timeout_s=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.mark.extended  # this and the next share a 20 s run of one core: CI runs them after the quick run
def test_smoke_run_logs_each_episode_where_it_ended(smoke):
    scalars = smoke.scalars()
    # 10 iterations of 4 x 16 steps: episodes end at vector steps 50, 100, 150, i.e. global steps 200, 400, 600
    returns, lengths = scalars["charts/episodic_return"], scalars["charts/episodic_length"]
    assert [step for step, _ in returns] == [200] * 4 + [400] * 4 + [600] * 4
    assert [length for _, length in lengths] == [50.0] * 12
    assert all(0 < r <= 50 for _, r in returns)  # the task pays at most 1 per step
    printed = re.findall(r"^global_step=(\d+), episodic_return=([\d.]+)$", smoke.stdout, flags=re.M)
    assert [(int(s), float(r)) for s, r in printed] == returns
    assert scalars["charts/SPS"][-1][0] == 640


@pytest.mark.extended
def test_the_training_video_frees_its_gl_context_before_exit(tmp_path):
    """A library imported after the run (dm_control's EGL renderer) ends EGL's display at exit before the training
    video's own atexit runs: freed only then, its context failed in an EGLError traceback at the end of the process."""
    pytest.importorskip("dm_control", reason='dm_control is not installed (pip install -e ".[dm_control]")')
    if reason := egl_missing():
        missing_system_package(reason)
    argv = [SCRIPT, *TINY, "--total-timesteps", "128", "--capture-video"]
    code = (
        f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path({str(REPO / 'cleanrl' / SCRIPT)!r}, run_name='__main__'); "
        "import dm_control._render.pyopengl.egl_renderer"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert list((tmp_path / "videos").rglob("*.mp4")), "the run films"
    assert "Exception ignored" not in run.stderr, run.stderr[-3000:]


@pytest.mark.extended
def test_saved_model_holds_the_observation_statistics_and_is_evaluated(smoke):
    saved = torch.load(smoke.run_dir / "ppo_continuous_action_playground.cleanrl_model", weights_only=True)
    assert saved["obs_rms.count"] > 640  # every observation the agent saw (and a tiny prior count)
    assert saved["obs_rms.mean"].shape == (5,) and (saved["obs_rms.var"] > 0).all()  # CartpoleBalance: 5 numbers
    evals = smoke.scalars()["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10)) and all(0 < r <= 50 for _, r in evals)
    if reason := egl_missing():
        missing_system_package(reason)
    for suffix in ("", "-eval"):  # rendered from the batch's first env (MUJOCO_GL=egl in script_env)
        videos = smoke.videos(suffix)
        assert videos and all(v.read_bytes()[4:8] == b"ftyp" for v in videos)


@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_dlpack_shares_memory_both_ways():
    import jax
    import jax.numpy as jnp

    script = load_script()
    envs = script.make_env("CartpoleBalance", 4, 50, "jax")
    state = envs.reset(jax.random.PRNGKey(0))
    obs = torch.from_dlpack(state.obs)  # what the training loop reads: the simulator's buffer itself
    assert obs.data_ptr() == state.obs.unsafe_buffer_pointer()
    assert torch.equal(obs, torch.as_tensor(np.array(state.obs)))
    with torch.inference_mode():  # the loop's actions are inference tensors
        action = torch.randn(4, 1)
        handed = jnp.from_dlpack(action)
    assert handed.unsafe_buffer_pointer() == action.data_ptr()
    if torch.cuda.is_available() and jax.default_backend() == "gpu":
        on_gpu = jax.device_put(state.obs, jax.devices("gpu")[0])
        assert torch.from_dlpack(on_gpu).data_ptr() == on_gpu.unsafe_buffer_pointer()


@pytest.mark.extended  # 45 s of one core: CI runs it after the quick run
def test_episode_statistics_match_a_hand_stepped_env():
    """The batched step's auto-reset and episode sums against the task stepped alone, env by env."""
    import jax
    import jax.numpy as jnp
    from mujoco_playground import registry

    script = load_script()
    num_envs, limit, steps = 3, 20, 45
    envs = script.make_env("CartpoleBalance", num_envs, limit, "jax")
    reset_key, fresh_key = jax.random.PRNGKey(3), jax.random.PRNGKey(4)
    actions = np.stack([np.sin(0.3 * np.arange(steps) + i)[:, None] * 1.5 for i in range(num_envs)], axis=1)  # some clipped

    state, fresh = envs.reset(reset_key), envs.reset(fresh_key)
    batched = []
    for t in range(steps):
        state, final_obs, reward, done, truncated, ep_return, ep_length = envs.step(state, jnp.asarray(actions[t]), fresh)
        batched.append([np.asarray(x) for x in (final_obs, reward, done, truncated, ep_return, ep_length, state.obs)])

    task = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    task_reset, task_step = jax.jit(task.reset), jax.jit(task.step)
    for i in range(num_envs):
        alone = task_reset(jax.random.split(reset_key, num_envs)[i])
        total, length = 0.0, 0
        for t in range(steps):
            alone = task_step(alone, jnp.clip(jnp.asarray(actions[t, i]), -1, 1))
            total, length = total + float(alone.reward), length + 1
            final_obs, reward, done, truncated, ep_return, ep_length, next_obs = (x[i] for x in batched[t])
            np.testing.assert_allclose(final_obs, alone.obs, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(reward, float(alone.reward), rtol=1e-4, atol=1e-6)
            ended = length == limit  # the time limit: the task itself never ends a balance episode
            assert (done, truncated) == (float(ended), float(ended))
            assert ep_length == length and ep_return == pytest.approx(total, rel=1e-4)
            if ended:  # the env goes on from its row of the fresh states
                alone, total, length = task_reset(jax.random.split(fresh_key, num_envs)[i]), 0.0, 0
            np.testing.assert_allclose(next_obs, alone.obs, rtol=1e-4, atol=1e-5)


@pytest.mark.extended  # 12 s of one core (the contract's real process blocks mujoco too): CI runs it after the quick run
def test_missing_playground_is_one_line_naming_the_extra(tmp_path):
    stub = tmp_path / "blocked" / "mujoco_playground"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ImportError('mujoco_playground is blocked for this test', name='mujoco_playground')\n"
    )
    env = script_env()
    env["PYTHONPATH"] = f"{tmp_path / 'blocked'}:{env['PYTHONPATH']}"
    run = run_script(SCRIPT, cwd=tmp_path / "run", env=env, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    line = f"{SCRIPT}: error: MuJoCo Playground cannot be imported (mujoco_playground is blocked for this test);"
    assert run.stderr.strip() == f'{line} install it with pip install -e ".[playground]"'


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--env-id", "HalfCheetah-v4"), "unknown Playground task 'HalfCheetah-v4'; e.g. CartpoleBalance, "),
        (("--impl", "cuda"), "--impl must be jax or warp"),
        (("--episode-length", "0"), "--episode-length must be positive"),
        (("--record-video-step-frequency", "0"), "--record-video-step-frequency must be positive"),
    ],
)
def test_bad_input_is_one_line(args, expected, tmp_path):
    run = run_in_process(SCRIPT, *args, cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert run.stderr.startswith(f"{SCRIPT}: error: ") and expected in run.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.extended  # 20 s of one core: CI runs it after the quick run
def test_resumed_run_logs_what_the_run_logged(tmp_path):
    """7 iterations, a checkpoint every 2 (the newest two kept); resumed from iteration 4's, the run logs the same again."""
    args = (*TINY, "--total-timesteps", "448", "--checkpoint-frequency", "2")
    first = run_in_process(SCRIPT, *args, cwd=tmp_path, timeout_s=900)  # both runs in this process: MJX compiled once
    assert first.returncode == 0, first.stderr[-3000:]
    before = {tag: values for tag, values in first.scalars().items() if tag != "charts/SPS"}
    checkpoints = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)
    assert [p.name for p in checkpoints] == ["checkpoint_256.pt", "checkpoint_384.pt"]
    resumed = run_in_process(SCRIPT, "--resume", str(checkpoints[0].relative_to(tmp_path)), cwd=tmp_path, timeout_s=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = {tag: values for tag, values in read_scalars(Path(first.run_dir)).items() if tag != "charts/SPS"}
    assert after == before


def test_benchmark_summary_and_report_apply_the_bar(tmp_path):
    """benchmark/checks/playground_cartpole.py: each seed's last wave of episodes against 80% of CartpoleBalance's 1000."""
    from torch.utils.tensorboard import SummaryWriter

    from benchmark.checks import playground_cartpole as bench

    for seed, waves in ((1, [300.0, 850.0, 990.0]), (2, [300.0, 820.0, 790.0])):
        writer = SummaryWriter(tmp_path / f"run{seed}")
        for wave, mean in enumerate(waves, start=1):
            for episode_return in (mean - 5, mean + 5):  # two envs end each wave together
                writer.add_scalar("charts/episodic_return", episode_return, wave * 2000)
            writer.add_scalar("charts/SPS", 1000, wave * 2000)
        writer.close()
        bench.summarize(tmp_path / f"run{seed}", bench.result_path(tmp_path, seed, 6000), seed, 6000)
    table = bench.report(tmp_path, 6000)
    assert "| ppo_continuous_action_playground | CartpoleBalance | 6k | 1 | 990.0 | 4,000 |" in table
    assert re.search(r"\| 2 \| 790\.0 \| 4,000 \| [\d.]+ \| \*\*no\*\* \|$", table, flags=re.M)
    assert re.search(r"\| 1 \| 990\.0 \| 4,000 \| [\d.]+ \| yes \|$", table, flags=re.M)
