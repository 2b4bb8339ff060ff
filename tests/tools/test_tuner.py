"""The Optuna tuner: scores worked out by hand, failures, pruning, resuming, and two workers sharing a PostgreSQL study.

Most tests tune tests/fixtures/fake_training_script.py, whose final logged returns are
`x * (seed + 1) + offset(env)` (offsets: EnvA 0, EnvB 10, EnvC 40), after 10 early values of 1000
that the default window of 50 leaves out. One test tunes the real cleanrl/ppo.py.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from cleanrl_utils.tensorboard_reader import read_scalars, read_texts
from cleanrl_utils.tuner import (
    ERROR_ATTR,
    FLAGS_ATTR,
    INTERRUPTED_ATTR,
    StorageError,
    Tuner,
    check_target_scores,
    flag_arguments,
    normalize,
    storage_url,
    with_available_driver,
)
from tests.fixtures.postgres import PostgresUnavailable, running_postgres
from tests.helpers import REPO, missing_system_package, process_is_alive, script_env, wait_for_wandb_history_keys

FAKE_SCRIPT = str(REPO / "tests" / "fixtures" / "fake_training_script.py")
METRIC = "charts/episodic_return"
OFFSETS = {"EnvA-v0": 0.0, "EnvB-v0": 10.0, "EnvC-v0": 40.0}

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Runs write runs/ into the current folder: make that a scratch folder."""
    monkeypatch.chdir(tmp_path)


def fake_tuner(params_fn, target_scores=None, **kwargs) -> Tuner:
    kwargs.setdefault("storage", None)
    kwargs.setdefault("study_name", "fake")
    return Tuner(
        script=FAKE_SCRIPT,
        metric=METRIC,
        target_scores=target_scores or {"EnvA-v0": None},
        params_fn=params_fn,
        **kwargs,
    )


def run_folders(study_name: str, trial_number: int) -> list[Path]:
    return sorted(Path("runs").glob(f"*__{study_name}-trial{trial_number}__*"))


# Pure pieces


def test_flag_arguments_spell_flags_like_the_scripts_take_them():
    params = {"learning_rate": 0.0025, "num-envs": 4, "--anneal-lr": False, "capture_video": True, "env-ids": ["A", "B"]}
    assert flag_arguments(params) == [
        *("--learning-rate", "0.0025", "--num-envs", "4", "--no-anneal-lr", "--capture-video"),
        *("--env-ids", "A", "B"),
    ]


def test_normalize_maps_low_to_zero_and_high_to_one():
    assert normalize(250.0, (0.0, 500.0)) == 0.5
    assert normalize(-400.0, (-500.0, 0.0)) == pytest.approx(0.2)
    assert normalize(-400.0, None) == -400.0
    assert check_target_scores({"CartPole-v1": [0, 500], "Acrobot-v1": (-500, 0)}) == {
        "CartPole-v1": (0.0, 500.0),
        "Acrobot-v1": (-500.0, 0.0),
    }


@pytest.mark.parametrize(
    "change, message",
    [
        ({"aggregation_type": "mean"}, "aggregation_type must be one of"),
        ({"script": "no/such/script.py"}, "script 'no/such/script.py' not found"),
        ({"target_scores": {}}, "target_scores is empty"),
        ({"target_scores": {"EnvA-v0": None, "EnvB-v0": None}}, "only allowed when tuning on a single environment"),
        ({"target_scores": {"EnvA-v0": None, "EnvB-v0": [0, 1]}}, "only allowed when tuning on a single environment"),
        ({"target_scores": {"EnvA-v0": [5, 5]}}, "low and high must differ"),
        ({"target_scores": {"EnvA-v0": [0, float("nan")]}}, "low and high must be finite numbers"),
        ({"target_scores": {"EnvA-v0": [float("-inf"), 0]}}, "low and high must be finite numbers"),
        ({"study_name": "x" * 240}, "study_name 'xxx.* is too long for the run folders EnvA-v0__<study>-trial<N>__"),
        ({"target_scores": {"EnvA-v0": [0, 1, 2]}}, r"must be \[low, high\] or None"),
        ({"direction": "up"}, "direction must be one of"),
        ({"metric_last_n_average_window": 0}, "metric_last_n_average_window must be at least 1"),
    ],
)
def test_bad_input_is_a_clear_value_error_at_construction(change, message):
    arguments = dict(script=FAKE_SCRIPT, metric=METRIC, target_scores={"EnvA-v0": None}, params_fn=lambda trial: {})
    with pytest.raises(ValueError, match=message):
        Tuner(**{**arguments, **change})


# Scores, end to end with the fake script


def test_scores_normalised_aggregated_over_envs_averaged_over_seeds():
    targets = {"EnvA-v0": [0, 10], "EnvB-v0": [10, 30], "EnvC-v0": [0, 80]}
    tuner = fake_tuner(lambda trial: {"x": 2.0}, targets)
    best_flags = tuner.tune(num_trials=1, num_seeds=2)

    # seed 0: raw 2, 12, 42 -> 0.2, 0.1, 0.525; seed 1: raw 4, 14, 44 -> 0.4, 0.2, 0.55
    trial = tuner.study.trials[0]
    assert trial.intermediate_values == pytest.approx({0: 0.825 / 3, 1: 1.15 / 3})
    assert trial.value == pytest.approx((0.825 / 3 + 1.15 / 3) / 2)
    assert trial.user_attrs["seed0_scores"] == {"EnvA-v0": 2.0, "EnvB-v0": 12.0, "EnvC-v0": 42.0}
    assert best_flags == {"x": 2.0}
    folders = run_folders("fake", 0)
    assert [folder.name.split("__")[0] for folder in folders] == [
        "EnvA-v0",
        "EnvA-v0",
        "EnvB-v0",
        "EnvB-v0",
        "EnvC-v0",
        "EnvC-v0",
    ]


@pytest.mark.parametrize(
    "aggregation_type, seed0, seed1",
    [
        ("average", 0.825 / 3, 1.15 / 3),
        ("median", 0.2, 0.4),
        ("max", 0.525, 0.55),
        ("min", 0.1, 0.2),
    ],
)
def test_each_aggregation_type(monkeypatch, aggregation_type, seed0, seed1):
    # The run itself is replaced by the fake script's formula: these numbers need no subprocess.
    monkeypatch.setattr(
        Tuner, "_run_once", lambda self, trial, env_id, seed, params: params["x"] * (seed + 1) + OFFSETS[env_id]
    )
    targets = {"EnvA-v0": [0, 10], "EnvB-v0": [10, 30], "EnvC-v0": [0, 80]}
    tuner = fake_tuner(lambda trial: {"x": 2.0}, targets, aggregation_type=aggregation_type)
    tuner.tune(num_trials=1, num_seeds=2)
    trial = tuner.study.trials[0]
    assert trial.intermediate_values == pytest.approx({0: seed0, 1: seed1})
    assert trial.value == pytest.approx((seed0 + seed1) / 2)


def test_the_window_sets_how_many_final_values_are_averaged():
    tuner = fake_tuner(lambda trial: {"x": 3.0}, metric_last_n_average_window=55)
    tuner.tune(num_trials=1, num_seeds=1)
    # 5 of the early values of 1000 fall into the window, with the 50 final values of 3; no target: raw score.
    assert tuner.study.trials[0].value == pytest.approx((5 * 1000 + 50 * 3) / 55)


# Failures and pruning


def test_a_crashed_or_silent_run_fails_its_trial_and_the_study_goes_on(capsys):
    def params_fn(trial):
        return {"x": trial.suggest_float("x", 1, 2), "crash": trial.number == 1, "log-metric": trial.number != 2}

    tuner = fake_tuner(params_fn)
    best_flags = tuner.tune(num_trials=4, num_seeds=1)

    trials = tuner.study.trials
    assert [trial.state for trial in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE]
    crash = trials[1].user_attrs[ERROR_ATTR]
    assert "exit code 3" in crash and "--crash" in crash and FAKE_SCRIPT in crash
    assert "| RuntimeError: the fake run crashed on purpose" in crash
    silent = trials[2].user_attrs[ERROR_ATTR]
    assert "no 'charts/episodic_return' values" in silent and "charts/something_else" in silent
    stderr = capsys.readouterr().err
    assert "trial 1 failed: exit code 3" in stderr and "trial 2 failed" in stderr
    best = max((trials[0], trials[3]), key=lambda trial: trial.value)
    assert best_flags == best.user_attrs[FLAGS_ATTR]


def test_pruning_is_asked_after_each_seed():
    # ThresholdPruner prunes a trial as soon as a reported score is below 0.5.
    tuner = fake_tuner(
        lambda trial: {"x": [0.25, 1.0][trial.number]},
        pruner=optuna.pruners.ThresholdPruner(lower=0.5),
    )
    tuner.tune(num_trials=2, num_seeds=3)
    pruned, completed = tuner.study.trials
    assert pruned.state == TrialState.PRUNED and pruned.intermediate_values == {0: 0.25}
    assert len(run_folders("fake", 0)) == 1, "a pruned trial runs no more seeds"
    assert completed.state == TrialState.COMPLETE
    assert completed.intermediate_values == {0: 1.0, 1: 2.0, 2: 3.0} and completed.value == 2.0
    assert len(run_folders("fake", 1)) == 3


# Resuming and sharing a study


def test_tuning_again_resumes_the_study_up_to_num_trials(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"

    def interrupted_at_first(trial):
        if trial.number == 0:
            raise KeyboardInterrupt
        return {"x": trial.suggest_float("x", 0, 1)}

    with pytest.raises(KeyboardInterrupt):
        fake_tuner(interrupted_at_first, storage=storage, study_name="resumed").tune(num_trials=2, num_seeds=1)
    stopped = optuna.load_study(study_name="resumed", storage=storage).trials[0]
    assert stopped.state == TrialState.FAIL and stopped.user_attrs[INTERRUPTED_ATTR]

    params_fn = lambda trial: {"x": trial.suggest_float("x", 0, 1)}  # noqa: E731
    # The interrupted trial does not count: two more trials run.
    fake_tuner(params_fn, storage=storage, study_name="resumed").tune(num_trials=2, num_seeds=1)
    assert len(list(Path("runs").iterdir())) == 2
    # Already there: nothing runs, and the best flags come back.
    flags = fake_tuner(params_fn, storage=storage, study_name="resumed").tune(num_trials=2, num_seeds=1)
    assert len(list(Path("runs").iterdir())) == 2
    assert set(flags) == {"x"}
    # A larger budget runs only the difference.
    fake_tuner(params_fn, storage=storage, study_name="resumed").tune(num_trials=3, num_seeds=1)
    study = optuna.load_study(study_name="resumed", storage=storage)
    assert [trial.state for trial in study.trials] == [TrialState.FAIL] + [TrialState.COMPLETE] * 3
    assert [len(run_folders("resumed", number)) for number in range(4)] == [0, 1, 1, 1]


def test_trial_claimed_after_the_last_slot_went_is_handed_back_unrun():
    tuner = fake_tuner(lambda trial: {"x": 1.0})
    study = tuner._open_study()
    ask = study.ask

    def ask_after_another_worker():
        ask()  # another worker's trial appears between our count and our ask
        return ask()

    study.ask = ask_after_another_worker
    assert tuner._claim_trial(study, num_trials=1) is None
    assert [trial.state for trial in study.trials] == [TrialState.RUNNING, TrialState.WAITING]
    assert ask().number == 1, "a later worker picks the handed-back trial up"


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import optuna

    from cleanrl_utils.tuner import Tuner

    script, storage, ready_dir, name = sys.argv[1:]
    # Start together, so that both workers take trials and both see the last ones end.
    Path(ready_dir, name).touch()
    deadline = time.monotonic() + 60
    while len(list(Path(ready_dir).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    tuner = Tuner(
        script=script,
        metric="charts/episodic_return",
        target_scores={"EnvA-v0": None},
        params_fn=lambda trial: {"x": trial.suggest_float("x", 0, 1), "sleep": 0.3},
        sampler=optuna.samplers.RandomSampler(),
        pruner=optuna.pruners.NopPruner(),
        storage=storage,
        study_name="shared",
    )
    tuner.tune(num_trials=6, num_seeds=1)
    """
)


@pytest.fixture
def postgres_url():
    pytest.importorskip("psycopg2", reason="psycopg2 is needed to reach PostgreSQL: pip install -e '.[test]'")
    try:
        with running_postgres() as url:
            yield url
    except PostgresUnavailable as reason:
        missing_system_package(f"no PostgreSQL server for the distributed-tuning test: {reason}")


def test_two_workers_share_one_postgresql_study(tmp_path, postgres_url):
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "ready").mkdir()
    workers = [
        subprocess.Popen(
            [sys.executable, "worker.py", FAKE_SCRIPT, postgres_url, str(tmp_path / "ready"), name],
            env=script_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("first", "second")
    ]
    outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], "\n".join(outputs)

    study = optuna.load_study(study_name="shared", storage=with_available_driver(postgres_url))
    completed = [trial.number for trial in study.trials if trial.state == TrialState.COMPLETE]
    assert sorted(completed) == list(range(6)), [(trial.number, trial.state) for trial in study.trials]
    # Any other trial is one a worker claimed too late and handed back unrun.
    assert all(trial.state == TrialState.WAITING for trial in study.trials if trial.number >= 6)
    # Each trial ran exactly once, and each worker ran some of them.
    assert [len(run_folders("shared", number)) for number in range(6)] == [1] * 6
    assert len(list(Path("runs").iterdir())) == 6
    finished_by = [{n for n in range(6) if f"trial {n} finished" in output} for output in outputs]
    assert finished_by[0] and finished_by[1] and not finished_by[0] & finished_by[1], outputs


# Stopping: signals, dead workers, storages

STOPPABLE_WORKER = textwrap.dedent(
    """
    import sys

    import optuna

    from cleanrl_utils import tuner as tuner_module
    from cleanrl_utils.tuner import Tuner

    script, storage, pid_file, heartbeat = sys.argv[1:]
    tuner_module.STOP_GRACE_SECONDS = 1.0  # the run's helper ignores SIGTERM: SIGKILL after this
    tuner = Tuner(
        script=script,
        metric="charts/episodic_return",
        target_scores={"EnvA-v0": None},
        params_fn=lambda trial: {"x": 1.0, "sleep": 120, "pid-file": pid_file},
        storage=storage,
        study_name="stopped",
        heartbeat_interval=int(heartbeat),
        grace_period=2 * int(heartbeat),
    )
    tuner.tune(num_trials=1, num_seeds=1)
    """
)


def start_stoppable_worker(tmp_path: Path, storage: str, heartbeat: int = 60, **popen) -> tuple[subprocess.Popen, list]:
    """A tuner process busy with a trial whose run sleeps; returns it once the run has started, and the pids of
    the run and of the helper process the run started."""
    (tmp_path / "worker.py").write_text(STOPPABLE_WORKER)
    pid_file = tmp_path / "pids.json"
    command = [sys.executable, "worker.py", FAKE_SCRIPT, storage, str(pid_file), str(heartbeat)]
    worker = subprocess.Popen(command, env=script_env(), **popen)
    deadline = time.monotonic() + 60
    while not pid_file.exists():
        assert worker.poll() is None, worker.communicate()[0]
        assert time.monotonic() < deadline, f"no {pid_file} after 60 s"
        time.sleep(0.05)
    return worker, json.loads(pid_file.read_text())


def test_sigterm_marks_trial_interrupted_and_stops_training_group(tmp_path, postgres_url):
    """`kill`, `scancel` or a time limit: the trial must not stay RUNNING (using up the budget) nor the run go on."""
    worker, (run_pid, helper_pid) = start_stoppable_worker(
        tmp_path, postgres_url, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    worker.send_signal(signal.SIGTERM)
    output = worker.communicate(timeout=60)[0]
    assert worker.returncode != 0, output

    (trial,) = optuna.load_study(study_name="stopped", storage=with_available_driver(postgres_url)).trials
    assert trial.state == TrialState.FAIL, output
    assert trial.user_attrs[INTERRUPTED_ATTR] is True and "SIGTERM" in trial.user_attrs[ERROR_ATTR]
    deadline = time.monotonic() + 10
    while (process_is_alive(run_pid) or process_is_alive(helper_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_is_alive(run_pid), "the training run was left running"
    assert not process_is_alive(helper_pid), "a process the training run started was left running"


def test_a_trial_left_running_by_a_dead_worker_is_failed_and_run_again(tmp_path):
    """A worker killed outright (SIGKILL, a lost machine) stops sending heartbeats; the next worker fails its trial
    and runs the slot again, so the study ends with num_trials runs that finished."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    worker, (run_pid, _) = start_stoppable_worker(
        tmp_path, storage, heartbeat=1, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    worker.kill()  # with no chance to record anything
    worker.wait()
    os.killpg(run_pid, signal.SIGKILL)  # its run (a process group of its own) and the run's helper, as the machine
    assert [t.state for t in optuna.load_study(study_name="stopped", storage=storage).trials] == [TrialState.RUNNING]

    # past the grace period (2 s), plus a second: SQLite's clock, which stamps the heartbeats, counts whole seconds
    time.sleep(3.5)
    tuner = fake_tuner(lambda trial: {"x": 1.0}, storage=storage, study_name="stopped", heartbeat_interval=1, grace_period=2)
    assert tuner.tune(num_trials=1, num_seeds=1) == {"x": 1.0}
    assert [t.state for t in tuner.study.trials] == [TrialState.FAIL, TrialState.COMPLETE]


def test_storage_url_comes_from_the_flag_else_the_environment(monkeypatch):
    monkeypatch.delenv("OPTUNA_STORAGE", raising=False)
    assert storage_url(None) == "sqlite:///cleanrl_hpopt.db"
    monkeypatch.setenv("OPTUNA_STORAGE", "postgresql://tuner:pw@db/optuna")
    assert storage_url(None) == "postgresql://tuner:pw@db/optuna"
    assert storage_url("sqlite:///other.db") == "sqlite:///other.db"


def run_tuner_example(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "tuner_example.py"), *args],
        cwd=cwd,
        env=script_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "storage, expected",
    [
        (
            "postgresql://tuner:hunter2@127.0.0.1:9/optuna",
            "cannot open the study storage postgresql://tuner:***@127.0.0.1:9/optuna: ",
        ),
        ("nosuchdb://x", "cannot open the study storage nosuchdb://x: "),
        ("not a url", "cannot open the study storage an unreadable storage URL: "),
        ("sqlite:////no/such/folder/study.db", "cannot open the study storage sqlite:////no/such/folder/study.db: "),
    ],
)
def test_a_bad_or_unreachable_storage_is_a_one_line_storage_error(storage, expected):
    pytest.importorskip("psycopg2")
    with pytest.raises(StorageError) as error:
        fake_tuner(lambda trial: {"x": 1.0}, storage=storage).tune(num_trials=1, num_seeds=1)
    message = str(error.value)
    assert message.startswith(expected) and "\n" not in message and "hunter2" not in message, message
    assert not Path("runs").exists()


@pytest.mark.parametrize("given_as", ["flag", "environment"])
def test_tuner_example_with_a_bad_storage_says_so_in_one_line(tmp_path, given_as):
    storage = "postgresql://tuner:hunter2@127.0.0.1:9/optuna"  # nothing listens on port 9
    if given_as == "flag":
        proc = run_tuner_example("--storage", storage, "--num-trials", "1", cwd=tmp_path)
    else:  # the way that keeps the password off the command line
        proc = run_tuner_example("--num-trials", "1", cwd=tmp_path, OPTUNA_STORAGE=storage)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("tuner_example.py: error: cannot open the study storage postgresql://tuner:***@127.0.0.1:9/")
    assert "hunter2" not in proc.stdout + proc.stderr


def test_study_name_too_long_for_a_folder_is_one_line_error(tmp_path):
    proc = run_tuner_example("--study-name", "x" * 300, "--num-trials", "1", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is too long for the run folders" in proc.stderr and not (tmp_path / "runs").exists()


def test_the_module_alone_is_not_a_silent_success():
    proc = subprocess.run([sys.executable, "-m", "cleanrl_utils.tuner"], env=script_env(), capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "tuner_example.py" in lines[0], proc.stderr


# The real thing


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_tunes_the_real_ppo_script():
    tuner = Tuner(
        script=str(REPO / "cleanrl" / "ppo.py"),
        metric=METRIC,
        target_scores={"CartPole-v1": [0, 500]},
        params_fn=lambda trial: {
            "learning-rate": trial.suggest_float("learning-rate", 1e-3, 3e-3, log=True),
            "total-timesteps": 2048,
            "num-envs": 4,
            "num-steps": 128,
            "cuda": False,
        },
        storage=None,
        study_name="ppo",
    )
    flags = tuner.tune(num_trials=1, num_seeds=1)

    trial = tuner.study.trials[0]
    assert trial.state == TrialState.COMPLETE
    (run_dir,) = run_folders("ppo", 0)
    returns = [value for _, value in read_scalars(run_dir)[METRIC]]
    assert trial.value == pytest.approx(sum(returns[-50:]) / len(returns[-50:]) / 500)
    assert f"{flags['learning-rate']}" in read_texts(run_dir)["hyperparameters"]
    assert flags["total-timesteps"] == 2048 and flags["cuda"] is False


def test_each_trial_can_be_a_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tuner = fake_tuner(lambda trial: {"x": 2.0}, wandb_kwargs={"project": "tuner-test", "dir": str(tmp_path)})
    tuner.tune(num_trials=1, num_seeds=1)
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    expected = {"EnvA-v0_return", "aggregated_normalized_score"}
    assert expected <= wait_for_wandb_history_keys(run_file, expected)
