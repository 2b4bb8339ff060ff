"""Checkpoints and --resume: a killed run, resumed, logs what an uninterrupted run logs."""

import errno
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import plain_data
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.fixtures.teachers import JAX_TEACHER_MODEL, TEACHER_MODEL
from tests.helpers import REPO, Run, killed_mid_write, run_in_process, run_script, script_env

TIME_TAGS = {"charts/SPS", "episode/t_mean"}  # depend on the clock, not on the computation


@dataclass(frozen=True)
class KillCase:
    script: str
    args: tuple[str, ...]
    frequency: str  # iterations (ppo) or steps (dqn)
    total_steps: int

    @property
    def frequency_unit(self) -> str:
        return "iterations" if self.script.startswith(("ppo", "rpo")) else "steps"


EVERY_3RD = ("--policy-frequency", "3")  # sac_continuous_action.py's actor updates (see its case below)
FEWER_GRADIENT_STEPS = ("--update-epochs", "2", "--num-minibatches", "4")  # ppo_continuous_action.py (see its case)
# sac_atari.py: a target update every 100 steps, a CNN update every 8th step on 16 frames (see its case)
SPARSE_CNN_UPDATES = ("--target-network-frequency", "100", "--update-frequency", "8", "--batch-size", "16")
SPARSE_DQN_UPDATES = ("--target-network-frequency", "100", "--train-frequency", "5", "--batch-size", "16")  # dqn_atari.py
QDAGGER_TINY = (
    "--teacher-eval-episodes", "1", "--teacher-steps", "100",
    "--offline-steps", "60", "--offline-eval-frequency", "30", "--buffer-size", "300", "--learning-starts", "100",
    "--total-timesteps", "240", "--train-frequency", "5", "--batch-size", "8", "--end-e", "0.5",
)  # fmt: skip
# the SAC, TD3 and DDPG files on Hopper (see the SAC and TD3 cases)
HOPPER_TINY = ("--total-timesteps", "1000", "--batch-size", "32", "--buffer-size", "1000")
OFF_POLICY_HOPPER = (*HOPPER_TINY, "--learning-starts", "101")
SAC_HOPPER = (*HOPPER_TINY, "--learning-starts", "100", *EVERY_3RD)
TINY_TRXL = ("--trxl-num-layers", "2", "--trxl-dim", "16", "--trxl-num-heads", "2", "--trxl-memory-length", "8")

KILL_CASES = {
    # 40 iterations of 4 x 128 steps, a checkpoint every 4
    "ppo.py": KillCase("ppo.py", ("--total-timesteps", "20480", "--num-steps", "128"), "4", 20480),
    # learning from step 1000 on, a checkpoint (with the replay buffer) every 1500 steps
    "dqn.py": KillCase("dqn.py", ("--total-timesteps", "8000", "--learning-starts", "1000"), "1500", 8000),
    # Pendulum: 40 iterations of 256 steps, a checkpoint every 8; the normalisation statistics must carry over.
    # 2 epochs of 4 minibatches (not the default 10 x 32) per rollout: the shuffles still go on across the resume,
    # and the run costs a quarter of the time
    "ppo_continuous_action.py": KillCase(
        "ppo_continuous_action.py",
        ("--env-id", "Pendulum-v1", "--total-timesteps", "10240", "--num-steps", "256", *FEWER_GRADIENT_STEPS),
        "8",
        10240,
    ),
    # Hopper: learning from step 100 on, a checkpoint (networks, targets, three optimisers, log alpha, buffer) every 250;
    # the actor updates every 3rd step, so the checkpoints a resume starts from (after steps 499 and 749: the kill
    # comes after the 2nd) and most log steps (every 100) fall between two actor updates, where the last actor and
    # alpha losses are logged (with 2, every log step is an update step)
    "sac_continuous_action.py": KillCase("sac_continuous_action.py", SAC_HOPPER, "250", 1000),
    # Hopper: a checkpoint (actor, twin critics, targets, two optimisers, buffer) every 200 steps; learning from
    # step 102 on, so the losses logged every 100 steps fall between actor updates (the last actor loss is logged)
    "td3_continuous_action.py": KillCase("td3_continuous_action.py", OFF_POLICY_HOPPER, "200", 1000),
    # the JAX twins of these two (train states and Adam as Flax state dicts, the JAX keys, the in-file ring buffer
    # with its generator) on the same budgets, and DDPG (one critic, its target) on TD3's
    "sac_continuous_action_jax.py": KillCase("sac_continuous_action_jax.py", SAC_HOPPER, "250", 1000),
    "td3_continuous_action_jax.py": KillCase("td3_continuous_action_jax.py", OFF_POLICY_HOPPER, "200", 1000),
    "ddpg_continuous_action.py": KillCase("ddpg_continuous_action.py", OFF_POLICY_HOPPER, "200", 1000),
    "ddpg_continuous_action_jax.py": KillCase("ddpg_continuous_action_jax.py", OFF_POLICY_HOPPER, "200", 1000),
    # Breakout: 16 iterations of 2 x 32 steps, a checkpoint (with each emulator's state) every 2
    "ppo_atari.py": KillCase(
        "ppo_atari.py",
        ("--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2", "--total-timesteps", "1024"),
        "2",
        1024,
    ),
    # Breakout: learning from step 200 on, the frame replay memory (500 transitions, so it wraps) checkpointed every 300 steps;
    # an update every 5th step (so still one logged every 100) on 16 frames: 25% less CPU than every 4th on 32
    "dqn_atari.py": KillCase(
        "dqn_atari.py",
        ("--total-timesteps", "1200", "--learning-starts", "200", "--buffer-size", "500", *SPARSE_DQN_UPDATES),
        "300",
        1200,
    ),
    # BeamRider: learning from step 100 on, a checkpoint (actor, twin critics, targets, three optimisers,
    # log alpha, the memory of 300 transitions, so it wraps) every 200 steps; no game ends this early, the losses
    # are what must match. An update every 8th step on 16 frames (logged at steps 104, 200, 304, ...): the CNN
    # updates were two thirds of the run's time
    "sac_atari.py": KillCase(
        "sac_atari.py",
        ("--total-timesteps", "700", "--learning-starts", "100", "--buffer-size", "300", *SPARSE_CNN_UPDATES),
        "200",
        700,
    ),
    # Breakout with an untrained dqn_atari.py teacher: 100 steps of its play, 60 offline steps (the student scored
    # after 30 and 60, at epsilon 0.5: an untrained network alone may never press FIRE), then 240 online steps learning
    # from step 100 (offline ones counted). A checkpoint (student, target, optimiser, both memories) every 25 steps:
    # the kill after the 2nd, at 50, resumes in the offline phase and crosses into the online one
    "qdagger_dqn_atari_impalacnn.py": KillCase(
        "qdagger_dqn_atari_impalacnn.py", ("--teacher-model-path", str(TEACHER_MODEL), *QDAGGER_TINY), "25", 300
    ),
    # the same with an untrained dqn_atari_jax.py teacher
    "qdagger_dqn_atari_jax_impalacnn.py": KillCase(
        "qdagger_dqn_atari_jax_impalacnn.py", ("--teacher-model-path", str(JAX_TEACHER_MODEL), *QDAGGER_TINY), "25", 300
    ),
    # Pong self-play: 16 iterations of 4 player envs (2 game copies) x 32 steps, each game cut after 150 agent steps
    # (600 frames), a checkpoint every 2. The emulators cannot be saved: the resumed run plays each game copy's actions
    # since its reset again, which must give back its frames, its players' returns and lengths, and what follows
    "ppo_pettingzoo_ma_atari.py": KillCase(
        "ppo_pettingzoo_ma_atari.py",
        ("--num-envs", "4", "--num-steps", "32", "--total-timesteps", "2048", "--max-cycles", "600"),
        "2",
        2048,
    ),
    # ProofofMemory: 16 iterations of 4 x 64 steps with a tiny Transformer-XL, a checkpoint every 2; the memory of the
    # episodes under way and the last 100 episodes' statistics (episode/r_mean) must carry over
    "ppo_trxl/ppo_trxl.py": KillCase(
        "ppo_trxl/ppo_trxl.py",
        ("--env-id", "ProofofMemory-v0", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "4096", *TINY_TRXL),
        "2",
        4096,
    ),
}


def start_in_background(script: str, *args: str, cwd: Path) -> subprocess.Popen:
    """Start a script with its output going to files, so it never waits on a full pipe."""
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "stdout.txt", "w") as out, open(cwd / "stderr.txt", "w") as err:
        return subprocess.Popen(
            [sys.executable, str(REPO / "cleanrl" / script), *args], cwd=cwd, env=script_env(), stdout=out, stderr=err
        )


def wait_for_checkpoints(cwd: Path, count: int, proc: subprocess.Popen, timeout: float = 240) -> list[Path]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for run in (cwd / "runs").glob("*") for p in ckpt.checkpoints(run / ckpt.CHECKPOINT_DIR)]
        if len(found) >= count:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the run ended (code {proc.returncode}) before writing {count} checkpoints")
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"no {count} checkpoints after {timeout} s")


def logged(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    return {tag: series for tag, series in read_scalars(run_dir).items() if tag not in TIME_TAGS}


# The quick run kills and resumes ppo.py (a vector env's rollout) and dqn.py (a replay memory); the other cases
# (13-47 s each: what each script adds to its checkpoint) are `extended`, which CI runs after the quick run.
QUICK_KILL_CASES = ("ppo.py", "dqn.py")


@pytest.mark.parametrize(
    "name",
    [name if name in QUICK_KILL_CASES else pytest.param(name, marks=pytest.mark.extended) for name in sorted(KILL_CASES)],
)
def test_run_killed_after_second_checkpoint_resumes_to_the_same_logs(name, tmp_path):
    case = KILL_CASES[name]
    # the reference run in this process (no interpreter to start); the killed run is a real process, killed for real
    uninterrupted = run_in_process(case.script, *case.args, cwd=tmp_path / "uninterrupted", timeout_s=300)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    killed_dir = tmp_path / "killed"
    proc = start_in_background(case.script, *case.args, "--checkpoint-frequency", case.frequency, cwd=killed_dir)
    found = wait_for_checkpoints(killed_dir, 2, proc)
    proc.kill()  # SIGKILL: no handler runs, nothing is flushed or closed
    assert proc.wait(timeout=60) == -9
    (run_dir,) = (killed_dir / "runs").glob("*")
    latest = ckpt.find(run_dir)
    step = int(ckpt.NAME.fullmatch(latest.name).group(1))
    assert step >= int(ckpt.NAME.fullmatch(found[-1].name).group(1))
    assert step < case.total_steps, "the run finished before it was killed: nothing to resume"

    # --resume with the run folder: its newest checkpoint, and the arguments the run started with
    resumed = run_in_process(case.script, "--resume", str(run_dir.relative_to(killed_dir)), cwd=killed_dir, timeout_s=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {latest.relative_to(killed_dir)}" in resumed.stdout
    assert len(list((killed_dir / "runs").glob("*"))) == 1, "the resumed run logs into the same run folder"

    # What TensorBoard shows of the run folder (the old events after the checkpoint purged) is the
    # uninterrupted run, step for step: episodes, losses, learning rate, up to the last step.
    expected, got = logged(uninterrupted.run_dir), logged(run_dir)
    assert got.keys() == expected.keys()
    for tag in expected:
        assert got[tag] == expected[tag], f"{tag} differs after resuming at step {step}"
    assert max(s for s, _ in read_scalars(run_dir)["charts/SPS"]) > case.total_steps - 200, "it trained to the end"
    # the resumed process printed exactly the episodes after the checkpoint
    printed = re.findall(r"^global_step=(\d+), episodic_return=(-?[\d.]+)$", resumed.stdout, flags=re.M)
    first_logged = step + 1 if case.frequency_unit == "iterations" else step
    assert [(int(s), float(r)) for s, r in printed] == [
        (s, r) for s, r in expected.get("charts/episodic_return", []) if s >= first_logged
    ]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Run, dict, Run]:
    """A tracked ppo.py run recording video with a checkpoint every 2 iterations, its logs, and the run resumed from
    its older checkpoint with another --learning-rate (one pair of runs for the two tests below)."""
    cwd = tmp_path_factory.mktemp("resumed")
    args = ("--total-timesteps", "4096", "--num-steps", "128", "--capture-video", "--checkpoint-frequency", "2", "--track")
    first = run_script("ppo.py", *args, cwd=cwd)
    assert first.returncode == 0, first.stderr[-3000:]
    before = logged(first.run_dir)
    oldest = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)[0]
    # tracked, as the run was; the video recorder included
    resumed = run_script("ppo.py", "--resume", str(oldest), "--learning-rate", "0.1", cwd=cwd)
    return first, before, resumed


@pytest.mark.extended  # this and the next share two real ppo.py runs (22-27 s of one core): CI runs them after the quick run
def test_resume_with_video_and_checkpoint_arguments_win(trained):
    first, before, resumed = trained
    checkpoints = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)
    assert [p.name for p in checkpoints] == ["checkpoint_3072.pt", "checkpoint_4096.pt"], "the newest two are kept"

    # Resumed from the older one, the video recorder included; a different --learning-rate is overridden.
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "the checkpoint's arguments win over --learning-rate 0.1 (the run uses 0.00025)" in resumed.stderr
    assert "Overwriting existing videos" not in resumed.stderr, "a resume films into its run's own video folder"
    assert logged(first.run_dir) == before
    assert first.videos(), "videos keep being written"


@pytest.mark.extended
def test_tracked_run_resumes_its_wandb_run(trained):
    first, _, resumed = trained
    oldest = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)[0]
    wandb_id = ckpt.read(oldest)["wandb_id"]
    assert wandb_id
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = sorted((first.cwd / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(run.name.endswith(f"-{wandb_id}") for run in runs)


@pytest.mark.parametrize(
    ("script", "resume", "expected"),
    [
        ("ppo.py", "no/such/path", "--resume no/such/path: no such checkpoint file or run folder"),
        ("dqn.py", "runs", "--resume runs: no checkpoint in it (runs write them with --checkpoint-frequency)"),
        ("ppo.py", "bad.pt", "--resume bad.pt: refused, it is not a file of this version's format"),
        ("ppo.py", "old.pt", "--resume old.pt: refused, it is a torch.save file (a pickle)"),
        ("ppo.py", "dqn.pt", "--resume: the checkpoint's arguments are not this script's (it comes from dqn.py"),
    ],
)
def test_bad_resume_is_one_clear_line(script, resume, expected, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "dqn.pt").write_bytes(plain_data.dumps({"args": {"exp_name": "dqn", "buffer_size": 10}}))
    torch.save({"args": {"exp_name": "ppo"}}, tmp_path / "old.pt")  # a checkpoint of the versions before: a pickle
    run = run_script(script, "--resume", resume, cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: ") and expected in lines[0], run.stderr
    assert list((tmp_path / "runs").iterdir()) == []


# --- cleanrl_utils.runtime.checkpoint on its own


def test_save_keeps_the_newest_and_find_takes_the_latest(tmp_path):
    for step in (100, 200, 1000):
        ckpt.save(tmp_path, step, {"args": {}, "global_step": step})
    assert [p.name for p in ckpt.checkpoints(tmp_path / "checkpoints")] == ["checkpoint_200.pt", "checkpoint_1000.pt"]
    assert ckpt.find(tmp_path).name == "checkpoint_1000.pt"  # by step, not by name order
    assert ckpt.find(tmp_path / "checkpoints" / "checkpoint_200.pt").name == "checkpoint_200.pt"
    assert ckpt.load(tmp_path)["global_step"] == 1000


# checkpoints are written by plain_data.write, into an open file: half of it, then SIGKILL
PLAIN_DATA_HALF_WRITE = """
from cleanrl_utils.runtime import checkpoint, plain_data
_real_write = plain_data.write

def _half_then_sigkill(f, value):
    buffer = io.BytesIO()
    _real_write(buffer, value)
    f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    f.flush()
    os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)

plain_data.write = _half_then_sigkill
"""


def test_a_save_killed_mid_write_leaves_no_checkpoint_under_its_name(tmp_path):
    """A save SIGKILLed after writing half the file (no handler runs, nothing is cleaned up): the checkpoint's name
    must not exist, so a resume never meets half a checkpoint. A save that wrote straight to its final name, even one
    that deleted the file on an exception, fails this."""
    ckpt.save(tmp_path, 100, {"args": {}, "global_step": 100})
    save = f"checkpoint.save({str(tmp_path)!r}, 200, {{'args': {{}}, 'global_step': 200}})"
    killed_mid_write(PLAIN_DATA_HALF_WRITE + save, tmp_path)
    assert not (tmp_path / "checkpoints" / "checkpoint_200.pt").exists()
    assert ckpt.checkpoints(tmp_path / "checkpoints") == [tmp_path / "checkpoints" / "checkpoint_100.pt"]
    assert ckpt.load(tmp_path)["global_step"] == 100
    # the killed write's temporary file is never taken for a checkpoint, and the next save removes it
    ckpt.save(tmp_path, 400, {"args": {}, "global_step": 400})
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["checkpoint_100.pt", "checkpoint_400.pt"]


def test_resume_skips_an_unreadable_newest_checkpoint_for_the_older_one(tmp_path, capsys):
    for step in (100, 200):
        ckpt.save(tmp_path, step, {"args": {}, "global_step": step})
    newest = tmp_path / "checkpoints" / "checkpoint_200.pt"
    newest.write_bytes(newest.read_bytes()[:-20])  # cut short (a copy that stopped, a damaged disk)
    assert ckpt.load(tmp_path)["global_step"] == 100
    out, err = capsys.readouterr()
    assert f"resume: skipped {newest}: not a readable checkpoint (cut short" in err and len(err.splitlines()) == 1
    assert out == f"resuming from {tmp_path / 'checkpoints' / 'checkpoint_100.pt'}\n"
    # named as a file, it is not replaced by another
    with pytest.raises(ckpt.CheckpointError, match=f"--resume {newest}: not a readable checkpoint"):
        ckpt.load(newest)
    (tmp_path / "checkpoints" / "checkpoint_100.pt").write_bytes(b"")
    with pytest.raises(ckpt.CheckpointError, match=r"not a readable checkpoint .*\(nor are the 1 older ones\)"):
        ckpt.load(tmp_path)


def test_a_full_disk_during_a_save_is_one_line(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 100, {"args": {}, "global_step": 100})

    def disk_full(f, value):
        f.write(plain_data.MAGIC + b" part of a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt.plain_data, "write", disk_full)
    with pytest.raises(ckpt.CheckpointError) as error:
        ckpt.save(tmp_path, 200, {"args": {}, "global_step": 200})
    message = str(error.value)
    assert message.startswith(
        f"cannot write the checkpoint {tmp_path / 'checkpoints' / 'checkpoint_200.pt'}: the disk is full"
    )
    assert "\n" not in message
    assert os.listdir(tmp_path / "checkpoints") == ["checkpoint_100.pt"], "no partial file is left to fill the disk more"


DISK_FULL_AT_SAVES = """
import errno, runpy, sys
from cleanrl_utils.runtime import checkpoint

def disk_full(f, value):
    raise OSError(errno.ENOSPC, "No space left on device")

checkpoint.plain_data.write = disk_full
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_script_whose_disk_fills_up_ends_with_one_line_and_keeps_its_logs(tmp_path):
    script = REPO / "cleanrl" / "ppo.py"
    args = ("--total-timesteps", "2048", "--num-steps", "128", "--checkpoint-frequency", "2")
    proc = subprocess.run(
        [sys.executable, "-c", DISK_FULL_AT_SAVES, str(script), *args],
        cwd=tmp_path,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("ppo.py: error: cannot write the checkpoint runs/") and "the disk is full" in lines[-1]
    (run_dir,) = (tmp_path / "runs").glob("*")
    assert read_scalars(run_dir)["charts/SPS"], "the logs up to the failed save are on disk"


def test_env_snapshot_continues_the_same_episodes(tmp_path):
    import gymnasium as gym

    from cleanrl import dqn, ppo

    def make():
        envs = ppo.make_vector_env("CartPole-v1", 2, False, "unused")
        envs.reset(seed=3)
        return envs

    def play(envs, steps=60):
        return [envs.step(envs.action_space.sample())[0].copy() for _ in range(steps)]

    envs = make()
    play(envs, 30)
    snapshot = ckpt.env_state(envs)
    expected = play(envs)
    fresh = ppo.make_vector_env("CartPole-v1", 2, False, "unused")
    ckpt.restore_env(fresh, snapshot)
    assert all(np.array_equal(a, b) for a, b in zip(play(fresh), expected, strict=True))

    # a single env with episode statistics, as dqn.py steps it
    env = dqn.make_env("CartPole-v1", 0, False, "unused")()
    env.reset(seed=5)
    for _ in range(7):
        env.step(env.action_space.sample())
    snapshot = ckpt.env_state(env)
    fresh = dqn.make_env("CartPole-v1", 0, False, "unused")()
    ckpt.restore_env(fresh, snapshot)
    for _ in range(50):
        action = env.action_space.sample()
        assert fresh.action_space.sample() == action  # the action space's generator came along too
        a, b = env.step(action), fresh.step(action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]
        if a[2] or a[3]:
            assert a[4]["episode"]["r"] == b[4]["episode"]["r"]
            env.reset(), fresh.reset()

    with pytest.raises(ckpt.CheckpointError, match="env wrappers"):
        ckpt.restore_env(gym.make("CartPole-v1"), snapshot)


def test_restored_args_keep_the_runs_values(capsys):
    @dataclass
    class Args:
        exp_name: str = "x"
        seed: int = 1
        learning_rate: float = 0.1
        track: bool = False
        checkpoint_frequency: int = 0
        resume: str | None = None

    saved = vars(Args(seed=2, learning_rate=0.5, track=True, checkpoint_frequency=10))
    given = Args(learning_rate=0.7, checkpoint_frequency=5, resume="runs/x")
    args = ckpt.restored_args(given, {"args": saved})
    # the run's seed and learning rate; its tracking (not given); the new checkpoint frequency (given)
    assert (args.seed, args.learning_rate, args.track, args.checkpoint_frequency, args.resume) == (2, 0.5, True, 5, "runs/x")
    assert capsys.readouterr().err == "resume: the checkpoint's arguments win over --learning-rate 0.7 (the run uses 0.5)\n"
    with pytest.raises(ckpt.CheckpointError, match="not this script's"):
        ckpt.restored_args(Args(), {"args": {**saved, "buffer_size": 10}})


def test_rng_state_round_trip():
    import random

    state = ckpt.rng_state()
    expected = (random.random(), np.random.random(), torch.rand(1).item())
    ckpt.set_rng_state(state)
    assert (random.random(), np.random.random(), torch.rand(1).item()) == expected


@pytest.mark.extended  # 7 s of one core: CI runs it after the quick run
def test_checkpoint_frequency_off_writes_nothing(tmp_path):
    run = run_script("dqn.py", "--total-timesteps", "300", "--learning-starts", "100", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (run.run_dir / ckpt.CHECKPOINT_DIR).exists()
