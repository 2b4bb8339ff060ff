"""Every loader a user can point at a file someone handed them runs nothing from it: the hostile-file matrix.

The files come from tests/fixtures/hostile_files.py: five kinds that run code when loaded the default way of torch
or pickle (a TorchScript archive whose `__setstate__` writes a file, torch's legacy format, a `__reduce__` pickle,
a torch.save zip whose data.pkl was swapped, a checkpoint of the old pickled format), each writing a marker file if
anything runs, and malformed files that try to make a loader allocate or loop without end. Each loader must refuse
each file in one line (a command-line tool: exit code 2), leave no marker, and, given a run folder whose newest
checkpoint is hostile, fail rather than fall back to the older one.

| loader | how the test reaches it |
|---|---|
| `--resume FILE`, `--resume FOLDER` | ppo.py, in this process (`run_in_process`) |
| `python -m cleanrl_utils.enjoy --model-path` | `enjoy.main` |
| `python -m cleanrl_utils.enjoy` from the Hub | a fake Hub serving each file (`extended`) |
| the evaluators | each zoo entry's evaluator, as scripts and enjoy call it |
| the QDagger teachers (torch, JAX) | the scripts' `--teacher-model-path` |
| `benchmark/checks/trxl_memory.py cue`, `cleanrl/ppo_trxl/enjoy.py --name` | their command lines |
| `benchmark/checks/cartpole_failure_modes.py` | its command line |
"""

import collections
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime import env_state, model_files, plain_data
from cleanrl_utils.zoo import ZOO, entry
from tests.fixtures import hostile_files as hostile
from tests.helpers import run_in_process

CODE_RUNNING = list(hostile.CODE_RUNNING)


def hostile_file(kind: str, tmp_path: Path, name: str = "file.pt", wrap=None) -> tuple[Path, Path]:
    """The file of `kind` at tmp_path/name, and the marker it writes if anything of it runs."""
    marker = tmp_path / f"marker-{kind}"
    make = hostile.CODE_RUNNING[kind]
    path = make(tmp_path / name, marker) if wrap is None else make(tmp_path / name, marker, wrap)
    return path, marker


def assert_one_error_line(stderr: str, starts: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts) and "Traceback" not in stderr, stderr


@pytest.mark.parametrize("kind", CODE_RUNNING)
def test_each_payload_runs_code_when_loaded_the_unsafe_way(kind, tmp_path):
    """The control: loaded as torch.load(weights_only=False) or pickle.loads would, each file writes its marker."""
    path, marker = hostile_file(kind, tmp_path)
    try:
        hostile.prove_payload(kind, path)
    except Exception:  # the payload ran before the load failed (a marker is no model)
        pass
    assert marker.exists()


# ---------------------------------------------------------------- checkpoints: --resume FILE and --resume FOLDER


@pytest.mark.parametrize("kind", CODE_RUNNING)
def test_resume_file_refuses_a_file_that_runs_code(kind, tmp_path):
    path, marker = hostile_file(kind, tmp_path, "checkpoint_100.pt")
    run = run_in_process("ppo.py", "--resume", str(path), cwd=tmp_path)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, f"ppo.py: error: --resume {path}: refused, it is ")
    assert not marker.exists() and not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A real ppo.py run folder with two checkpoints (steps 512 and 1024)."""
    cwd = tmp_path_factory.mktemp("run")
    run = run_in_process("ppo.py", "--total-timesteps", "1024", "--num-steps", "64", "--checkpoint-frequency", "2", cwd=cwd)
    assert run.returncode == 0, run.stderr[-2000:]
    assert [p.name for p in ckpt.checkpoints(run.run_dir / "checkpoints")] == ["checkpoint_512.pt", "checkpoint_1024.pt"]
    return run.run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / run_dir.name
    shutil.copytree(run_dir, copy)
    return copy


@pytest.mark.parametrize("kind", CODE_RUNNING + list(hostile.MALFORMED_CHECKPOINTS))
def test_resume_folder_whose_newest_checkpoint_is_hostile_fails_without_falling_back(kind, run_folder, tmp_path):
    folder = copy_of(run_folder, tmp_path)
    newest = folder / "checkpoints" / "checkpoint_99999.pt"
    marker = tmp_path / f"marker-{kind}"
    if kind in hostile.CODE_RUNNING:
        hostile.CODE_RUNNING[kind](newest, marker)
    else:
        newest.write_bytes(hostile.MALFORMED_CHECKPOINTS[kind])
    started = time.monotonic()
    run = run_in_process("ppo.py", "--resume", str(folder.relative_to(tmp_path)), cwd=tmp_path)
    assert time.monotonic() - started < 10
    assert run.returncode == 2, "a hostile newest checkpoint is an error, never a quiet resume from the older one"
    assert_one_error_line(run.stderr, f"ppo.py: error: --resume {newest.relative_to(tmp_path)}: refused, ")
    assert "resuming from" not in run.stdout and not marker.exists()


def test_resume_folder_skips_a_checkpoint_cut_short_for_the_older_one(run_folder, tmp_path):
    """A write or a copy that stopped is what the fallback is for: named on stderr, the older checkpoint used."""
    folder = copy_of(run_folder, tmp_path)
    newest = folder / "checkpoints" / "checkpoint_1024.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    assert ckpt.load(folder)["global_step"] == 512


@pytest.mark.parametrize("kind", list(hostile.MALFORMED_CHECKPOINTS))
def test_malformed_checkpoints_are_refused_at_once_without_allocating(kind, tmp_path):
    path = tmp_path / "checkpoint_1.pt"
    path.write_bytes(hostile.MALFORMED_CHECKPOINTS[kind])
    started = time.monotonic()
    with pytest.raises(ckpt.RefusedCheckpoint) as refused:
        ckpt.load(path)
    assert time.monotonic() - started < 1 and "\n" not in str(refused.value)


def test_links_and_special_files_in_a_run_folder_are_refused(run_folder, tmp_path):
    folder = copy_of(run_folder, tmp_path)
    fifo = folder / "checkpoints" / "checkpoint_99999.pt"
    os.mkfifo(fifo)  # opening one for reading would wait for a writer forever
    with pytest.raises(ckpt.RefusedCheckpoint, match="not a regular file"):
        ckpt.load(folder)
    fifo.unlink()
    (folder / "checkpoints" / "checkpoint_99999.pt").symlink_to("/dev/zero")  # endless
    with pytest.raises(ckpt.RefusedCheckpoint, match="not a regular file"):
        ckpt.load(folder)
    (folder / "checkpoints" / "checkpoint_99999.pt").unlink()
    (folder / "checkpoints" / "checkpoint_99999.pt").mkdir()  # a folder named like the newest checkpoint
    with pytest.raises(ckpt.RefusedCheckpoint, match="not a regular file"):
        ckpt.load(folder)


# ---------------------------------------------------------------- what a checkpoint of the right format may not do


def valid_checkpoint(run_folder: Path) -> dict:
    return ckpt.read(ckpt.find(run_folder))


@pytest.mark.parametrize(
    ("change", "refused_for"),
    [
        ({"run_name": "../../outside"}, "run-name cannot contain /"),
        ({"run_name": ".."}, "run-name cannot be '..'"),
        ({"wandb_id": "a/../../b"}, "wandb-id cannot contain /"),
        ({"args": {"env_id": "os:system"}}, "would import a module"),
        ({"args": {"exp_name": "a/b"}}, "--exp-name cannot contain /"),
        ({"args": {"seed": -1}}, "--seed must be between 0"),
        ({"args": {"learning_rate": float("nan")}}, "--learning-rate must be a finite number"),
        ({"args": {"total_timesteps": "many"}}, "--total-timesteps is a str"),
        ({"global_step": "0"}, "global_step is not a int"),
        ({"global_step": 2**70}, "global step or clock is out of range"),
        ({"agent": {"critic.0.weight": torch.zeros(3, 3)}}, "agent critic.0.weight is torch.float32 (3, 3), this run's"),
        ({"optimizer": {"param_groups": "all"}}, "optimizer is not a state of this run's optimizer"),
    ],
)
def test_a_checkpoints_values_pass_the_command_lines_checks(change, refused_for, run_folder, tmp_path):
    state = valid_checkpoint(run_folder)
    for key, value in change.items():
        state[key] = {**state[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "checkpoint_1.pt"
    path.write_bytes(plain_data.dumps(state))
    run = run_in_process("ppo.py", "--resume", str(path), cwd=tmp_path)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, "ppo.py: error: --resume")
    assert refused_for in run.stderr and "refused" in run.stderr
    assert not (tmp_path / "outside").exists() and not (tmp_path.parent / "outside").exists()


def fresh_cartpole_snapshot():
    from cleanrl import ppo

    envs = ppo.make_vector_env("CartPole-v1", 1, False, "unused")
    envs.reset(seed=1)
    return envs, env_state.snapshot(envs)


@pytest.mark.parametrize(
    ("layer", "values", "refused_for"),
    [
        (0, {"__class__": 1}, "sets the attribute '__class__'"),
        (0, {"__dict__": {}}, "sets the attribute '__dict__'"),
        (0, {"step": 1}, "would hide RecordEpisodeStatistics.step"),  # a method of the class, shadowed
        (0, {"close": "rm -rf"}, "would hide RecordEpisodeStatistics.close"),
        (0, {"env": 0}, "sets the attribute 'env'"),  # the wrapper chain itself
        (1, {"render_mode": "/home/user/.bashrc"}, "to a path this run does not use"),
        (1, {"_env_obs": ["../../../x"]}, "to a path this run does not use"),
    ],
)
def test_an_env_snapshot_sets_values_but_no_attribute_tricks(layer, values, refused_for):
    """No BUILD/setattr trick: dunder names, names of the class's methods and paths are refused before anything is set."""
    envs, snapshot = fresh_cartpole_snapshot()
    snapshot[layer]["values"].update(values)
    fresh, _ = fresh_cartpole_snapshot()
    with pytest.raises(env_state.EnvStateError, match=refused_for):
        env_state.restore(fresh, plain_data.loads(plain_data.dumps(snapshot)))
    assert type(fresh).__name__ == "RecordEpisodeStatistics" and callable(fresh.step)


def test_an_env_snapshot_puts_state_into_the_fresh_envs_objects_only():
    envs, snapshot = fresh_cartpole_snapshot()
    snapshot[1]["objects"]["action_space"]["class"] = "Box"  # a space of another kind than the fresh one
    fresh, _ = fresh_cartpole_snapshot()
    with pytest.raises(env_state.EnvStateError, match="is a Box"):
        env_state.restore(fresh, snapshot)
    _, snapshot = fresh_cartpole_snapshot()
    snapshot[1]["objects"]["not_there"] = {"kind": "running_mean_std", "mean": 0, "var": 0, "count": 0.0}
    with pytest.raises(env_state.EnvStateError, match="where this run's env has none"):
        env_state.restore(fresh, snapshot)


def stepped_cartpoles():
    """Two CartPoles as ppo.py makes them, 30 steps into a run."""
    from cleanrl import ppo

    envs = ppo.make_vector_env("CartPole-v1", 2, False, "unused")
    envs.reset(seed=1)
    envs.action_space.seed(1)
    for _ in range(30):
        envs.step(envs.action_space.sample())
    return envs


def snapshot_positions(layers: list, where: tuple = ()) -> list[tuple]:
    """Where a value or object sits in a snapshot: (layer, "values" or "objects", name), sub-envs' layers too."""
    found = []
    for index, layer in enumerate(layers):
        found += [(*where, index, field, name) for field in ("values", "objects") for name in layer[field]]
        for sub, sub_layers in enumerate(layer["sub_envs"] or []):
            found += snapshot_positions(sub_layers, (*where, index, "sub_envs", sub))
    return found


def with_value(tree, position: tuple, value):
    if not position:
        return value
    head, rest = position[0], position[1:]
    copy = dict(tree) if isinstance(tree, dict) else list(tree)
    copy[head] = with_value(tree[head], rest, value)
    return copy


def at(tree, position: tuple):
    for key in position:
        tree = tree[key]
    return tree


# of another kind than any CartPole attribute holds, or a malformed object state
MISFITS = [-1, "x", [], {"kind": ["x"]}, np.zeros(3), collections.deque([1.0], maxlen=7), True]


def test_an_env_snapshot_of_the_wrong_kinds_is_refused_in_one_line_or_steps_on():
    """Each value and object of a real snapshot replaced by each misfit: the restore refuses it (EnvStateError, one
    line) or the env steps on with it; no other error from the restore, none from the next steps where the fresh env
    held a value (where it held None, before its first reset, any plain value goes: a known limit)."""
    snapshot = env_state.snapshot(stepped_cartpoles())
    positions = snapshot_positions(snapshot)
    assert len(positions) > 40  # both sub-envs' layers were walked
    fresh_values = {position: at(env_state.snapshot(stepped_cartpoles()), position) for position in positions}
    for position in positions:
        for misfit in MISFITS:
            hostile_snapshot = plain_data.loads(plain_data.dumps(with_value(snapshot, position, misfit)))
            envs = stepped_cartpoles()
            try:
                env_state.restore(envs, hostile_snapshot)
            except env_state.EnvStateError as e:
                assert "\n" not in str(e)
                continue
            if fresh_values[position] is not None:
                for _ in range(3):
                    envs.step(envs.action_space.sample())


@pytest.mark.parametrize(
    "stream",
    [
        {"python": (3, (2**70,) * 625, None)},  # beyond a C unsigned long: OverflowError in random.setstate
        {"python": (3, tuple(range(624)) + (624,), "not a float")},  # random.setstate takes it; random.gauss fails
        {"numpy": ("MT19937", np.zeros(624, np.uint32), 2**70, 0, 0.0)},
        {"numpy": ("MT19937", np.zeros(3, np.uint32), 0, 0, 0.0)},
        {"torch": torch.zeros(5)},
    ],
    ids=["python-overflow", "python-gauss", "numpy-overflow", "numpy-short", "torch-floats"],
)
def test_random_states_that_do_not_fit_are_refused_in_one_line(stream):
    saved = ckpt.rng_state()
    try:
        with pytest.raises(ckpt.RefusedCheckpoint, match="random states are not valid"):
            ckpt.set_rng_state(plain_data.loads(plain_data.dumps({**saved, **stream})))
    finally:
        ckpt.set_rng_state(saved)


# ---------------------------------------------------------------- model files: enjoy, the evaluators


def model_file_kinds(tmp_path: Path, wrap=lambda payload: payload) -> list[tuple[str, Path, Path | None]]:
    """Every hostile model file: (kind, path, marker or None)."""
    tmp_path.mkdir(exist_ok=True)
    files = []
    for kind in CODE_RUNNING:
        path, marker = hostile_file(kind, tmp_path, f"{kind}.cleanrl_model", None if kind == "torchscript" else wrap)
        files.append((kind, path, marker))
    for kind, data in hostile.MALFORMED_MODEL_FILES.items():
        (path := tmp_path / f"{kind}.cleanrl_model").write_bytes(data)
        files.append((kind, path, None))
    return files


def test_read_torch_refuses_every_hostile_model_file_by_its_bytes(tmp_path, monkeypatch):
    """The checks come before torch reads anything: torch.load is never called for these files."""
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was reached"))
    for kind, path, marker in model_file_kinds(tmp_path):
        if kind in ("swapped_data_pkl", "old_checkpoint"):
            continue  # genuine torch.save zips: torch.load(weights_only=True) refuses their pickles (below)
        with pytest.raises(model_files.ModelFileError) as refused:
            model_files.read_torch(path)
        assert str(refused.value).startswith(str(path)), kind
        assert marker is None or not marker.exists()


@pytest.mark.parametrize("kind", ["swapped_data_pkl", "old_checkpoint"])
def test_weights_only_refuses_the_pickle_inside_a_genuine_torch_zip(kind, tmp_path):
    path, marker = hostile_file(kind, tmp_path)
    model_files.check_torch_file(path)  # its entries are torch.save's own
    with pytest.raises(Exception, match="Weights only load failed"):
        model_files.read_torch(path)
    assert not marker.exists()


@pytest.mark.parametrize("exp_name", ["dqn", "dqn_jax"])
def test_enjoy_refuses_every_hostile_model_file(exp_name, tmp_path, monkeypatch, capsys):
    from cleanrl_utils import enjoy

    monkeypatch.chdir(tmp_path)
    for kind, path, marker in model_file_kinds(tmp_path):
        with pytest.raises(SystemExit) as stopped:
            enjoy.main(["--exp-name", exp_name, "--model-path", str(path), "--eval-episodes", "1"])
        assert stopped.value.code == 2, kind
        assert_one_error_line(capsys.readouterr().err, f"enjoy: error: {path} is not a model file saved by an algorithm")
        assert marker is None or not marker.exists(), kind


@pytest.mark.extended  # five enjoy processes, 30-60 s of one core: CI runs it after the quick run
def test_enjoy_refuses_every_hostile_model_file_downloaded_from_the_hub(tmp_path):
    """The Hub path: the file `enjoy` downloads into the Hub cache goes through the same checks as --model-path."""
    from tests.fixtures.fake_hub import FakeHub
    from tests.tools.test_zoo import run_enjoy

    hub = FakeHub().start()
    try:
        for seed, (kind, path, marker) in enumerate(model_file_kinds(tmp_path / "files")):
            if marker is None:
                continue
            hub.repos[f"tester/CartPole-v1-dqn-seed{seed}"] = {"dqn.cleanrl_model": path.read_bytes()}
            hub_env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf_home"), "HF_TOKEN": hub.token}
            run = run_enjoy("--exp-name", "dqn", "--hf-entity", "tester", "--seed", str(seed), cwd=tmp_path, **hub_env)
            assert run.returncode == 2, (kind, run.stderr)
            assert_one_error_line(run.stderr, "enjoy: error: ")
            assert "is not a model file saved by an algorithm script" in run.stderr and not marker.exists(), kind
    finally:
        hub.stop()


def evaluation_env(exp_name: str) -> str:
    from tests.tools.test_zoo import ATARI, PLAYED_IN_PENDULUM

    if exp_name in PLAYED_IN_PENDULUM:
        return "Pendulum-v1"
    if exp_name == "ppo_continuous_action_playground":
        return "CartpoleBalance"
    if exp_name == "ppo_pettingzoo_ma_atari":
        return "pong_v3"
    if exp_name == "ppo_atari_envpool_xla_jax_scan":
        return "Breakout-v5"
    return "BreakoutNoFrameskip-v4" if exp_name in ATARI else "CartPole-v1"


def extended_zoo() -> set[str]:
    from tests.tools.test_zoo import EXTENDED_ZOO

    return set(EXTENDED_ZOO)


@pytest.mark.parametrize(
    "exp_name", [pytest.param(name, marks=pytest.mark.extended) if name in extended_zoo() else name for name in sorted(ZOO)]
)
def test_each_evaluator_refuses_every_hostile_model_file(exp_name, tmp_path, monkeypatch):
    """The evaluators themselves, as the scripts call them after training and enjoy after its own check; the
    payload inside the dict the evaluator expects, and bare."""
    monkeypatch.chdir(tmp_path)
    zoo_entry = entry(exp_name)
    as_saved = lambda payload: {"model_weights": payload, "args": {}, "agent": payload, "actor": payload}  # noqa: E731
    bare = model_file_kinds(tmp_path)
    in_a_dict = [(kind, path, marker) for kind, path, marker in model_file_kinds(tmp_path / "dict", as_saved) if marker]
    for kind, path, marker in bare + in_a_dict:
        with pytest.raises(Exception):  # noqa: B017 - which error depends on the evaluator; that none ran code matters
            zoo_entry.evaluate(
                str(path), zoo_entry.make_env, evaluation_env(exp_name), eval_episodes=1, run_name="untrusted",
                Model=zoo_entry.Model, device=torch.device("cpu"), capture_video=False, seed=1, **zoo_entry.eval_kwargs,
            )  # fmt: skip
        assert marker is None or not marker.exists(), f"{exp_name}'s evaluator ran code from a {kind} file"


@pytest.mark.parametrize("exp_name", ["dqn_jax", "ddpg_continuous_action_jax", "dqn"])
def test_an_evaluator_given_a_fifo_or_a_device_refuses_it_without_waiting(exp_name, tmp_path, monkeypatch):
    """Opening a FIFO for reading waits for a writer, /dev/zero never ends: the evaluators read regular files only."""
    monkeypatch.chdir(tmp_path)
    played = entry(exp_name)
    os.mkfifo(fifo := tmp_path / "fifo.cleanrl_model")
    (zeros := tmp_path / "zeros.cleanrl_model").symlink_to("/dev/zero")

    def waited(signum, frame):
        raise TimeoutError("the evaluator waited on the file")

    previous = signal.signal(signal.SIGALRM, waited)
    try:
        for path in (fifo, zeros):
            signal.alarm(120)  # a wait would be endless: cut it short as a failure (building the env takes seconds)
            with pytest.raises(ValueError, match="not a regular file"):
                played.evaluate(
                    str(path), played.make_env, evaluation_env(exp_name), eval_episodes=1, run_name="untrusted",
                    Model=played.Model, device=torch.device("cpu"), capture_video=False, seed=1, **played.eval_kwargs,
                )  # fmt: skip
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- the QDagger teachers


@pytest.mark.parametrize(
    ("script", "kinds"),
    [
        ("qdagger_dqn_atari_impalacnn.py", CODE_RUNNING + ["zip_entry_claims_4gb", "nested_zip_entry"]),
        pytest.param("qdagger_dqn_atari_jax_impalacnn.py", CODE_RUNNING, marks=pytest.mark.extended),
    ],
)
def test_qdagger_refuses_every_hostile_teacher_file(script, kinds, tmp_path):
    files = {kind: (path, marker) for kind, path, marker in model_file_kinds(tmp_path)}
    for kind in kinds:
        path, marker = files[kind]
        run = run_in_process(script, "--teacher-model-path", str(path), cwd=tmp_path / kind)
        assert run.returncode == 2, (kind, run.stderr[-2000:])
        assert_one_error_line(run.stderr, f"{script}: error: the teacher {path} is not a model file")
        assert marker is None or not marker.exists(), kind
        assert not (tmp_path / kind / "runs").exists() or not any((tmp_path / kind / "runs").iterdir())


# ---------------------------------------------------------------- the TrXL tools


@pytest.mark.parametrize("kind", CODE_RUNNING + ["nested_zip_entry", "zip_entry_claims_4gb"])
def test_trxl_cue_refuses_every_hostile_file(kind, tmp_path, monkeypatch, capsys):
    from benchmark.checks import trxl_memory as bench

    if kind in hostile.CODE_RUNNING:
        wrap = lambda payload: {"args": {"env_id": "MiniGrid-MemoryS7-v0"}, "agent": payload}  # noqa: E731
        path, marker = hostile_file(kind, tmp_path, "checkpoint_100.pt", None if kind == "torchscript" else wrap)
    else:
        (path := tmp_path / "checkpoint_100.pt").write_bytes(hostile.MALFORMED_MODEL_FILES[kind])
        marker = None
    monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(path), "--episodes", "1"])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2
    assert_one_error_line(capsys.readouterr().err, f"trxl_memory.py: error: cue: {path} is not a ppo_trxl.py checkpoint")
    assert marker is None or not marker.exists()


@pytest.mark.parametrize("kind", CODE_RUNNING + ["fifo", "zip_entry_claims_4gb"])
def test_cartpole_failure_modes_refuses_every_hostile_model_file(kind, tmp_path, monkeypatch, capsys):
    from benchmark.checks import cartpole_failure_modes as tool

    marker = None
    if kind in hostile.CODE_RUNNING:
        path, marker = hostile_file(kind, tmp_path, "pqn.cleanrl_model")
    elif kind == "fifo":
        os.mkfifo(path := tmp_path / "pqn.cleanrl_model")
    else:
        (path := tmp_path / "pqn.cleanrl_model").write_bytes(hostile.MALFORMED_MODEL_FILES[kind])
    monkeypatch.setattr(sys, "argv", ["cartpole_failure_modes.py", str(path), "--episodes", "1"])
    with pytest.raises(SystemExit) as stopped:
        tool.main()
    assert stopped.value.code == 2
    assert_one_error_line(capsys.readouterr().err, f"cartpole_failure_modes.py: error: {path} is not a pqn.py CartPole")
    assert marker is None or not marker.exists()


@pytest.mark.parametrize(
    "args",
    [{"env_id": "MiniGrid-MemoryS7-v0", 1: 2}, {"env_id": "MiniGrid-MemoryS7-v0"}],
    ids=["a-key-that-is-no-name", "arguments-missing"],
)
def test_trxl_cue_refuses_a_checkpoint_whose_network_cannot_be_built(args, tmp_path, monkeypatch, capsys):
    from benchmark.checks import trxl_memory as bench

    path = tmp_path / "checkpoint_100.pt"
    path.write_bytes(plain_data.dumps({"args": args, "agent": {"weight": torch.zeros(1)}}))
    monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(path), "--episodes", "1"])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2
    assert_one_error_line(capsys.readouterr().err, f"trxl_memory.py: error: cue: {path} holds no ppo_trxl.py network")


@pytest.mark.parametrize("kind", CODE_RUNNING)
def test_trxl_enjoy_refuses_every_hostile_model_file(kind, tmp_path):
    wrap = lambda payload: {"args": {"env_id": "CartPole-v1"}, "model_weights": payload, "max_episode_steps": 500}  # noqa: E731
    path, marker = hostile_file(kind, tmp_path, "ppo_trxl.cleanrl_model", None if kind == "torchscript" else wrap)
    run = run_in_process("ppo_trxl/enjoy.py", "--name", str(path), "--no-render", cwd=tmp_path)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, f"enjoy.py: error: {path} is not a model file saved by ppo_trxl.py")
    assert not marker.exists()


@pytest.mark.parametrize("case", ["not a torch file", "another script's model"])
def test_trxl_enjoy_says_in_one_line_what_a_file_is_not(tmp_path, case):
    path = tmp_path / "model.cleanrl_model"
    if case == "not a torch file":
        path.write_text("not a model\n")
    else:  # dqn.py saves a bare state dict: no args, no env id
        torch.save({"network.0.weight": torch.zeros(2, 2)}, path)
    run = run_in_process("ppo_trxl/enjoy.py", "--name", str(path), "--no-render", cwd=tmp_path)
    assert run.returncode == 2
    assert_one_error_line(run.stderr, f"enjoy.py: error: {path} is not a model file saved by ppo_trxl.py")
