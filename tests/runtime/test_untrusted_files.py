"""Every loader a user can point at a downloaded file refuses a pickle that would run code.

Each file here carries an object whose unpickling would write a marker file (its `__reduce__` calls `exec`), inside
what the loader expects (a model's weights, a checkpoint's arguments, an env snapshot). The marker must not appear,
and a command-line tool must end with exit code 2 and one line. Going back to `torch.load(weights_only=False)` (or
to `pickle.loads`) in any of these loaders fails its test.
"""

import dataclasses
import io
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cleanrl_utils import checkpoint as ckpt
from cleanrl_utils.zoo import ZOO
from tests.helpers import REPO, run_in_process, run_script, script_env
from tests.tools.test_zoo import ATARI, EXTENDED_ZOO, PLAYED_IN_PENDULUM, run_enjoy


class WritesMarker:
    """Unpickled, it writes `marker` (as any code in a pickle could)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


def malicious(path: Path, marker: Path, wrap=lambda payload: {"model_weights": payload}) -> Path:
    torch.save(wrap(WritesMarker(marker)), path)
    return path


def assert_one_error_line(stderr: str, starts: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts) and "Traceback" not in stderr, stderr


def test_the_payload_works_when_unpickled_without_the_guard(tmp_path):
    """The files below would write their marker if a loader unpickled them plainly."""
    path = malicious(tmp_path / "model.cleanrl_model", tmp_path / "marker")
    torch.load(path, weights_only=False)
    assert (tmp_path / "marker").exists()


def test_enjoy_refuses_a_model_file_that_runs_code(tmp_path):
    path = malicious(tmp_path / "dqn.cleanrl_model", tmp_path / "marker", wrap=lambda payload: payload)
    proc = run_enjoy("--exp-name", "dqn", "--model-path", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, f"enjoy: error: {path} is not a model file saved by an algorithm script")
    assert not (tmp_path / "marker").exists()


TORCH_ZOO = [name for name in sorted(ZOO) if not ZOO[name].flax_model]


def evaluation_env(exp_name: str) -> str:
    if exp_name in PLAYED_IN_PENDULUM:
        return "Pendulum-v1"
    if exp_name == "ppo_continuous_action_playground":
        return "CartpoleBalance"
    if exp_name == "ppo_pettingzoo_ma_atari":
        return "pong_v3"
    return "BreakoutNoFrameskip-v4" if exp_name in ATARI else "CartPole-v1"


@pytest.mark.parametrize(
    "exp_name", [pytest.param(name, marks=pytest.mark.extended) if name in EXTENDED_ZOO else name for name in TORCH_ZOO]
)
def test_each_torch_evaluator_refuses_a_model_file_that_runs_code(exp_name, tmp_path, monkeypatch):
    """The evaluators themselves, as scripts call them after training and enjoy after its own check."""
    monkeypatch.chdir(tmp_path)
    zoo_entry = dataclasses.replace(ZOO[exp_name], eval_kwargs={**ZOO[exp_name].eval_kwargs})
    evaluate, model_class, make_env = zoo_entry.load()
    for wrap in (lambda payload: payload, lambda payload: {"model_weights": payload, "args": {}, "agent": payload}):
        path = malicious(tmp_path / f"{exp_name}.cleanrl_model", tmp_path / "marker", wrap)
        with pytest.raises(Exception):  # noqa: B017 - which error depends on the evaluator; that none ran code matters
            evaluate(
                str(path), make_env, evaluation_env(exp_name), eval_episodes=1, run_name="untrusted", Model=model_class,
                device=torch.device("cpu"), capture_video=False, seed=1, **zoo_entry.eval_kwargs,
            )  # fmt: skip
        assert not (tmp_path / "marker").exists(), f"{exp_name}'s evaluator ran code from the file"


def test_qdagger_refuses_a_teacher_file_that_runs_code(tmp_path):
    path = malicious(tmp_path / "teacher.cleanrl_model", tmp_path / "marker", wrap=lambda payload: payload)
    run = run_in_process("qdagger_dqn_atari_impalacnn.py", "--teacher-model-path", str(path), cwd=tmp_path)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, f"qdagger_dqn_atari_impalacnn.py: error: the teacher {path} is not a model file")
    assert not (tmp_path / "marker").exists()


def run_trxl_enjoy(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "cleanrl" / "ppo_trxl" / "enjoy.py"), "--name", str(path), "--no-render"]
    return subprocess.run(command, cwd=cwd, env=script_env(), capture_output=True, text=True, timeout=120)


def test_trxl_enjoy_refuses_a_model_file_that_runs_code(tmp_path):
    wrap = lambda payload: {"args": {"env_id": "CartPole-v1"}, "model_weights": payload, "max_episode_steps": 500}  # noqa: E731
    path = malicious(tmp_path / "ppo_trxl.cleanrl_model", tmp_path / "marker", wrap)
    proc = run_trxl_enjoy(path, tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, f"enjoy.py: error: {path} is not a model file saved by ppo_trxl.py")
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("case", ["not a torch file", "another script's model"])
def test_trxl_enjoy_says_in_one_line_what_a_file_is_not(tmp_path, case):
    path = tmp_path / "model.cleanrl_model"
    if case == "not a torch file":
        path.write_text("not a model\n")
    else:  # dqn.py saves a bare state dict: no args, no env id
        torch.save({"network.0.weight": torch.zeros(2, 2)}, path)
    proc = run_trxl_enjoy(path, tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, f"enjoy.py: error: {path} is not a model file saved by ppo_trxl.py")


def test_trxl_cue_refuses_a_checkpoint_that_runs_code(tmp_path, monkeypatch, capsys):
    from benchmark.checks import trxl_memory as bench

    wrap = lambda payload: {"args": {"env_id": "MiniGrid-MemoryS7-v0"}, "agent": payload}  # noqa: E731
    path = malicious(tmp_path / "checkpoint_100.pt", tmp_path / "marker", wrap)
    monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(path), "--episodes", "1"])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2
    assert_one_error_line(capsys.readouterr().err, f"trxl_memory.py: error: cue: {path} is not a ppo_trxl.py checkpoint")
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("where", ["in the checkpoint", "in its env snapshot"])
def test_resume_refuses_a_checkpoint_that_runs_code(tmp_path, where):
    """A resumed run would unpickle the checkpoint, then its env snapshot: code hidden in either must not run."""
    from cleanrl import ppo

    marker = tmp_path / "marker"
    args = dataclasses.asdict(ppo.Args())
    if where == "in the checkpoint":
        torch.save({"args": args, "run_name": "r", "agent": WritesMarker(marker)}, tmp_path / "evil.pt")
    else:  # the snapshot is unpickled once the run has made its envs
        snapshot = io.BytesIO()
        torch.save([("SyncVectorEnv", {"payload": WritesMarker(marker)}, None)], snapshot)
        state = {"args": args, "run_name": "r", "global_step": 0, "wandb_id": None, "envs": snapshot.getvalue()}
        torch.save(state, tmp_path / "evil.pt")
    run = run_script("ppo.py", "--resume", "evil.pt", cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, "ppo.py: error: --resume")
    assert "builtins.exec" in run.stderr and ckpt.TRUST_ENV in run.stderr
    assert not marker.exists()


def test_env_snapshot_that_runs_code_is_refused_before_anything_is_restored(tmp_path):
    import gymnasium as gym

    marker = tmp_path / "marker"
    env = gym.make("CartPole-v1")
    for snapshot in (pickle.dumps([("TimeLimit", {"x": WritesMarker(marker)}, None)]), io.BytesIO()):
        if isinstance(snapshot, io.BytesIO):
            torch.save([("TimeLimit", {"x": WritesMarker(marker)}, None)], snapshot)
            snapshot = snapshot.getvalue()
        with pytest.raises(ckpt.UntrustedContent):
            ckpt.restore_env(env, snapshot)
        assert not marker.exists()
