"""A full disk wherever a run writes is one line naming the path and exit code 1; a model file is whole or absent.

The runs write onto a real full disk: a tmpfs of a few pages, mounted in a user and mount namespace of their own
(`unshare -rm`), so no privilege is needed where user namespaces are allowed; elsewhere those tests are skipped, and
the simulated ENOSPC below still runs.
"""

import errno
import shutil
import subprocess
from pathlib import Path

import pytest

from cleanrl_utils.runtime import atomic
from cleanrl_utils.runtime.experiment import Experiment
from tests.helpers import REPO, script_env
from tests.runtime.test_experiment import SCRIPT, Args, Closable


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def on_a_full_disk(tmp_path: Path, size_kb: int, *script_args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """ppo.py run in a tmpfs of `size_kb` (its output kept outside it); the tmpfs's files are copied out after."""
    if not unshare_works():
        pytest.skip("no user namespaces here (unshare -rm): the simulated ENOSPC tests cover this")
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    command = (
        f"mount -t tmpfs -o size={size_kb}k tmpfs {disk} && cd {disk} && "
        f"python {REPO / 'cleanrl' / 'ppo.py'} {' '.join(script_args)} > {tmp_path / 'out.txt'} 2> {tmp_path / 'err.txt'}; "
        f"code=$?; cp -r {disk} {kept}; exit $code"
    )
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", command], env=script_env(), timeout=300)
    proc.stderr = (tmp_path / "err.txt").read_text()
    return proc, kept


TINY_RUN = ("--total-timesteps", "512", "--num-steps", "128")


def test_save_model_on_a_full_tmpfs_is_one_line_and_no_file(tmp_path):
    """16 kB: the run's logs fit, its 40 kB model does not."""
    proc, disk = on_a_full_disk(tmp_path, 16, *TINY_RUN, "--save-model")
    assert proc.returncode == 1
    (run_dir,) = (disk / "runs").iterdir()
    assert proc.stderr.strip().splitlines() == [
        f"ppo.py: error: cannot write runs/{run_dir.name}/ppo.cleanrl_model: no space left on the disk"
    ]
    assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("events.")) == [".writer.lock"]


@pytest.mark.parametrize("size_kb", [4, 8], ids=["no-room-for-the-first-event", "full-while-training"])
def test_tensorboard_on_a_full_tmpfs_is_one_line(tmp_path, size_kb):
    proc, disk = on_a_full_disk(tmp_path, size_kb, "--total-timesteps", "2048", "--num-steps", "128")
    assert proc.returncode == 1
    (run_dir,) = (disk / "runs").iterdir()
    assert proc.stderr.strip().splitlines() == [f"ppo.py: error: cannot write runs/{run_dir.name}: no space left on the disk"]


def test_checkpoint_on_a_full_tmpfs_is_one_line_and_keeps_the_older(tmp_path):
    proc, disk = on_a_full_disk(
        tmp_path, 200, "--total-timesteps", "20480", "--num-steps", "128", "--checkpoint-frequency", "1"
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write" in lines[0] and ("disk is full" in lines[0] or "no space left" in lines[0])
    (run_dir,) = (disk / "runs").iterdir()
    assert not list((run_dir / "checkpoints").glob(".*tmp*")), "no partial file left to fill the disk more"


# ---------------------------------------------------------------- simulated ENOSPC: everywhere


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("model", [b"flax bytes", {"weights": "a torch object"}], ids=["flax", "torch"])
def test_save_model_on_a_simulated_full_disk_is_one_line_and_no_file(model, tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.chdir(tmp_path)
    real_write_bytes, real_save = Path.write_bytes, torch.save

    def half_then_full(path, data):  # the disk fills up halfway through the model
        real_write_bytes(path, data[: len(data) // 2])
        disk_full()

    def torch_half_then_full(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a model")
        disk_full()

    monkeypatch.setattr(Path, "write_bytes", half_then_full)
    monkeypatch.setattr(torch, "save", torch_half_then_full)
    exp = Experiment(Args(save_model=True), SCRIPT)
    with pytest.raises(SystemExit) as stopped, exp:
        exp.start_logging()
        exp.save_model(model)
    assert stopped.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"algo.py: error: cannot write {exp.model_path}: no space left on the disk"
    ]
    assert sorted(p.name for p in (tmp_path / "runs" / exp.run_name).iterdir() if not p.name.startswith("events.")) == [
        ".writer.lock"
    ]
    monkeypatch.setattr(torch, "save", real_save)


def test_a_full_disk_when_the_envs_close_is_one_line(tmp_path, monkeypatch, capsys):
    """A video being recorded is written when the envs close: a full disk then is one line too."""
    monkeypatch.chdir(tmp_path)
    exp = Experiment(Args(), SCRIPT)
    exp.envs = Closable()
    exp.envs.close = disk_full
    with pytest.raises(SystemExit) as stopped, exp:
        exp.start_logging()
    assert stopped.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"algo.py: error: cannot write runs/{exp.run_name}: no space left on the disk"
    ]


def test_disk_full_is_told_through_wrappers_and_child_messages():
    wrapped = RuntimeError("writing the file failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert atomic.disk_full(wrapped) and atomic.disk_full(OSError("ffmpeg: No space left on device"))
    assert not atomic.disk_full(OSError(errno.EACCES, "Permission denied"))
    said = SystemExit(1)
    said.__context__, said.__suppress_context__ = wrapped, True  # `raise SystemExit(1) from None`: already said
    assert not atomic.disk_full(said)


def test_no_algorithm_file_writes_a_file_itself():
    """Models go through `exp.save_model` (whole or absent, a full disk in one line); a plain `torch.save` or
    `open(path, "wb")` in a script would leave a truncated model under its final name on a full disk."""
    import ast

    writers = {"save", "savez", "savez_compressed", "write_text", "write_bytes", "dump"}
    found = []
    for path in sorted((REPO / "cleanrl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            owner = getattr(node.func, "value", None)
            if name == "open" or (name in writers and not (isinstance(owner, ast.Name) and owner.id == "exp")):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {name}()")
    assert not found, found
