"""Search the hyperparameters of a training script with Optuna, scoring each trial from its TensorBoard logs.

    tuner = Tuner(
        script="cleanrl/ppo.py",
        metric="charts/episodic_return",
        target_scores={"CartPole-v1": [0, 500], "Acrobot-v1": [-500, 0]},
        params_fn=lambda trial: {"learning-rate": trial.suggest_float("learning-rate", 3e-4, 3e-3, log=True)},
    )
    best_flags = tuner.tune(num_trials=100, num_seeds=3)

Each trial asks `params_fn` for a set of flags, runs `python <script> <flags> --env-id E --seed S
--exp-name <study>-trial<N>` as a subprocess for every seed and environment, reads `metric` back
from the run's TensorBoard events, normalises it with the environment's `[low, high]` target,
combines the environments with `aggregation_type`, and scores the trial with the mean over seeds.

A study lives in `storage` under `study_name`: running the same tuning again resumes it, and
several processes (on several machines, with a PostgreSQL or MySQL storage) share one study.
`tune(num_trials)` works until the study holds `num_trials` trials, whoever ran them.
Ctrl-C and SIGTERM fail the running trial as `interrupted` (it does not use up the budget) and
stop its training run with everything that run started; with a database storage, workers send
Optuna heartbeats, so a trial left running by a worker that died is failed and run again.
This module is a library; `tuner_example.py` is a command line built on it.
See docs/advanced/hyperparameter-tuning.md.
"""

import glob
import importlib.util
import json
import math
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean, median
from typing import Any

if __name__ == "__main__":  # said at once, before Optuna and SQLAlchemy are imported (seconds)
    if sys.argv[1:] in (["--help"], ["-h"]):  # what the module is, as every tool's --help says
        print(__doc__)
        sys.exit(0)
    print(
        "tuner: error: cleanrl_utils.tuner is a library with nothing to run on its own; tune with a script that"
        " builds a Tuner, e.g. python tuner_example.py (docs/advanced/hyperparameter-tuning.md)",
        file=sys.stderr,
    )
    sys.exit(2)

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage, fail_stale_trials
from optuna.trial import FrozenTrial, Trial, TrialState
from sqlalchemy.exc import IntegrityError, ProgrammingError, SQLAlchemyError

from cleanrl_utils.benchmark.common import describe_exit
from cleanrl_utils.benchmark.local import stop_process_group
from cleanrl_utils.runtime.command_line import run_name_problems
from cleanrl_utils.tensorboard_reader import read_scalars

AGGREGATIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "average": fmean,
    "median": median,
    "max": max,
    "min": min,
}
DIRECTIONS = ("maximize", "minimize")
# Flags the tuner sets itself for every run; params_fn must leave them alone.
RESERVED_FLAGS = ("env-id", "seed", "exp-name")
FAILURE_TAIL_LINES = 20
OPEN_ATTEMPTS = 5
FAILURE_LINE_CHARS = 300
# The storage URL may come from this variable instead of a command line, where `ps` shows its password.
STORAGE_ENV = "OPTUNA_STORAGE"
DEFAULT_STORAGE = "sqlite:///cleanrl_hpopt.db"
# Seconds between a running trial's heartbeats, and how long without one makes it stale (database storages).
HEARTBEAT_SECONDS = 60
# How long a stopped training run gets to exit after SIGTERM before its process group is killed.
STOP_GRACE_SECONDS = 10.0

# Trial user attributes written by the tuner.
FLAGS_ATTR = "flags"  # everything params_fn returned, constants included
ERROR_ATTR = "error"  # why a failed trial failed
INTERRUPTED_ATTR = "interrupted"  # failed because the worker was stopped: does not use up the budget

Target = tuple[float, float] | None


class RunFailed(Exception):
    """One training run of a trial crashed, or left no value of the metric to score it by."""


class StorageError(Exception):
    """The study storage cannot be opened (a bad URL, a server that cannot be reached); the message is one line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `scancel`, a time limit) while tuning: handled exactly as Ctrl-C is."""

    def __init__(self) -> None:
        super().__init__("SIGTERM")


def log(message: str) -> None:
    print(f"tuner: {message}", flush=True)


def flag_name(name: str) -> str:
    """`learning_rate`, `learning-rate` and `--learning-rate` all name the flag `learning-rate`."""
    return name.removeprefix("--").replace("_", "-")


def flag_arguments(params: Mapping[str, Any]) -> list[str]:
    """Command-line words for `params`: `--name value`; booleans as `--name` / `--no-name`; lists as `--name a b`."""
    words: list[str] = []
    for name, value in params.items():
        flag = flag_name(name)
        if isinstance(value, bool):
            words.append(f"--{flag}" if value else f"--no-{flag}")
        elif isinstance(value, list | tuple):
            words += [f"--{flag}", *map(str, value)]
        else:
            words += [f"--{flag}", str(value)]
    return words


def check_target_scores(target_scores: Mapping[str, Sequence[float] | None]) -> dict[str, Target]:
    """Validated targets: `[low, high]` pairs with low != high, or None for a single environment."""
    if not target_scores:
        raise ValueError("target_scores is empty: give at least one environment id, e.g. {'CartPole-v1': [0, 500]}")
    checked: dict[str, Target] = {}
    for env_id, target in target_scores.items():
        if target is None:
            checked[env_id] = None
            continue
        if len(target) != 2:
            raise ValueError(f"target_scores[{env_id!r}] must be [low, high] or None, got {target!r}")
        low, high = float(target[0]), float(target[1])
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"target_scores[{env_id!r}] = {target!r}: low and high must be finite numbers")
        if low == high:
            raise ValueError(f"target_scores[{env_id!r}] = {target!r}: low and high must differ to normalise by them")
        checked[env_id] = (low, high)
    unscaled = [env_id for env_id, target in checked.items() if target is None]
    if unscaled and len(checked) > 1:
        # Raw scores of different environments live on different scales: combining them means nothing.
        raise ValueError(
            f"target_scores of {unscaled} is None, which is only allowed when tuning on a single environment;"
            " give every environment a [low, high] range"
        )
    return checked


def normalize(score: float, target: Target) -> float:
    """Map `score` so that the target's low is 0 and its high is 1; None keeps the raw score."""
    if target is None:
        return score
    low, high = target
    return (score - low) / (high - low)


def mean_of_last(values: Sequence[float], window: int) -> float:
    return fmean(values[-window:])


def json_safe(params: Mapping[str, Any]) -> dict[str, Any]:
    """Optuna stores user attributes as JSON: anything else is kept as its string."""
    return json.loads(json.dumps(dict(params), default=str))


def output_tail(output: str) -> list[str]:
    return [line[:FAILURE_LINE_CHARS] for line in output.splitlines()[-FAILURE_TAIL_LINES:]]


def describe_failure(command: list[str], reason: str, output: str) -> str:
    lines = [f"{reason}: {shlex.join(command)}", "last lines of its output:"]
    lines += [f"| {line}" for line in output_tail(output)] or ["| (no output)"]
    return "\n".join(lines)


def uses_budget(trial: FrozenTrial) -> bool:
    """Whether a trial counts toward `num_trials`: running or finished, unless it failed because its worker was stopped.

    A failed trial counts when the tuner recorded why (its `error`), unless that was an interruption.
    One failed without a reason was left running by a worker that died, and failed by the heartbeat
    check: it does not count either. Waiting trials (handed back, or queued with `enqueue_trial`)
    do not count: the next worker picks them up.
    """
    if trial.state == TrialState.FAIL:
        return ERROR_ATTR in trial.user_attrs and not trial.user_attrs.get(INTERRUPTED_ATTR, False)
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)


def storage_url(given: str | None) -> str:
    """The storage URL to use: `given`, else the OPTUNA_STORAGE variable, else the local SQLite file."""
    return given or os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE


def with_available_driver(url: str) -> str:
    """Spell out the psycopg2 driver in a plain `postgresql://` URL when psycopg 3 is not installed.

    SQLAlchemy 2.1 reads `postgresql://` as psycopg 3, while the `optuna` extra installs
    psycopg2 (`psycopg2-binary`); an explicit `postgresql+driver://` URL is left as it is.
    """
    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg") is None:
        if importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def printable_storage(storage: str | BaseStorage | None) -> str:
    if storage is None:
        return "memory"
    if not isinstance(storage, str):
        return type(storage).__name__
    from sqlalchemy.engine import make_url

    try:
        return make_url(storage).render_as_string(hide_password=True)
    except SQLAlchemyError:
        return "an unreadable storage URL"  # not echoed: it may hold a password


def storage_failure(storage: str | BaseStorage | None, error: BaseException) -> StorageError:
    """One line for a storage that cannot be opened, the URL's password left out."""
    reason = " ".join(str(error).split("\n")[0].split()) or type(error).__name__
    if isinstance(storage, str):
        from sqlalchemy.engine import make_url

        try:
            password = make_url(storage).password
        except SQLAlchemyError:
            password = None
        if password:
            reason = reason.replace(str(password), "***")
    return StorageError(f"cannot open the study storage {printable_storage(storage)}: {reason}"[:500])


def on_stale_trial(study: optuna.Study, trial: FrozenTrial) -> None:
    log(f"trial {trial.number} was left running by a worker that stopped: failed, and its slot is run again")


class Tuner:
    """Tune `script`'s flags with Optuna so that `metric` does well on every environment of `target_scores`.

    Args:
        script: path of the training script, run as `python <script> ...` in the current folder.
        metric: TensorBoard scalar tag that scores a run, e.g. `charts/episodic_return`.
        target_scores: environment id -> `[low, high]`; a run's score is normalised to
            `(score - low) / (high - low)`. None keeps the raw score, allowed only with a single environment.
        params_fn: trial -> {flag name: value}, e.g. `{"learning-rate": trial.suggest_float(...), "num-envs": 16}`.
        direction: "maximize" or "minimize" the trial score.
        aggregation_type: how one seed's normalised scores of the environments are combined:
            "average", "median", "max" or "min".
        metric_last_n_average_window: a run's score is the mean of the last this-many values of `metric`.
        sampler: an Optuna sampler (default: Optuna's, TPE).
        pruner: an Optuna pruner (default: Optuna's, median); it is asked after each seed.
        storage: Optuna storage URL (`sqlite:///file.db`, `postgresql://user:pw@host/db`, ...), a storage
            object, or None for an in-memory study that ends with the process. `storage_url()` reads the URL
            from the OPTUNA_STORAGE variable, keeping a password off the command line.
        study_name: name of the study in the storage; None makes a new one, `tuner_<unix time>`.
        wandb_kwargs: when given, each trial is also a Weights & Biases run; these go to `wandb.init`.
        heartbeat_interval: seconds between the heartbeats of a running trial (storage URLs only).
        grace_period: seconds without a heartbeat after which another worker fails the trial as stale
            (default: twice the interval).
    """

    def __init__(
        self,
        script: str,
        metric: str,
        target_scores: Mapping[str, Sequence[float] | None],
        params_fn: Callable[[Trial], Mapping[str, Any]],
        direction: str = "maximize",
        aggregation_type: str = "average",
        metric_last_n_average_window: int = 50,
        sampler: optuna.samplers.BaseSampler | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        storage: str | BaseStorage | None = DEFAULT_STORAGE,
        study_name: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        heartbeat_interval: int = HEARTBEAT_SECONDS,
        grace_period: int | None = None,
    ):
        if not Path(script).is_file():
            raise ValueError(f"script {script!r} not found (from the folder {Path.cwd()})")
        if not metric:
            raise ValueError("metric is empty: name a TensorBoard scalar tag, e.g. 'charts/episodic_return'")
        if not callable(params_fn):
            raise ValueError("params_fn must be a function taking an optuna trial and returning {flag: value}")
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {list(DIRECTIONS)}, got {direction!r}")
        if aggregation_type not in AGGREGATIONS:
            raise ValueError(f"aggregation_type must be one of {list(AGGREGATIONS)}, got {aggregation_type!r}")
        if metric_last_n_average_window < 1:
            raise ValueError(f"metric_last_n_average_window must be at least 1, got {metric_last_n_average_window}")
        if heartbeat_interval < 1 or (grace_period is not None and grace_period <= heartbeat_interval):
            raise ValueError(
                f"heartbeat_interval must be at least 1 and grace_period above it, got {heartbeat_interval} and {grace_period}"
            )
        if wandb_kwargs and importlib.util.find_spec("wandb") is None:
            raise ValueError("wandb_kwargs needs the wandb package: pip install wandb")
        self.script = script
        self.metric = metric
        self.target_scores = check_target_scores(target_scores)
        self.params_fn = params_fn
        self.direction = direction
        self.aggregation_type = aggregation_type
        self.aggregate = AGGREGATIONS[aggregation_type]
        self.metric_last_n_average_window = metric_last_n_average_window
        self.sampler = sampler
        self.pruner = pruner
        self.storage = storage
        self.study_name = study_name or f"tuner_{int(time.time())}"
        for env_id in self.target_scores:  # every trial's runs must have a folder name that fits
            if run_name_problems(env_id, exp_name_of(self.study_name, 10**6), 2**31 - 1):
                raise ValueError(
                    f"study_name {self.study_name!r} is too long for the run folders {env_id}__<study>-trial<N>__..."
                )
        self.wandb_kwargs = dict(wandb_kwargs or {})
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.study: optuna.Study | None = None
        self._storage: BaseStorage | None = None

    # The study and its trial budget

    def tune(self, num_trials: int, num_seeds: int) -> dict[str, Any] | None:
        """Run trials until the study holds `num_trials` of them; returns the best trial's flags (None if none completed).

        Trials that completed, were pruned or failed count, and so do trials other workers are
        running; a trial interrupted by Ctrl-C or SIGTERM does not, so tuning again redoes it.
        Raises StorageError when the storage cannot be opened, and KeyboardInterrupt (Terminated
        for SIGTERM) once the interrupted trial is recorded.
        """
        if num_trials < 1 or num_seeds < 1:
            raise ValueError(f"num_trials and num_seeds must be at least 1, got {num_trials} and {num_seeds}")
        with sigterm_as_interrupt(), warnings.catch_warnings():
            # Optuna warns that heartbeats are meant for study.optimize; this loop sends them itself.
            warnings.filterwarnings("ignore", message=".*[Hh]eartbeat.*")
            study = self._open_study()
            used = sum(map(uses_budget, study.get_trials(deepcopy=False)))
            log(
                f"study {self.study_name!r} in {printable_storage(self.storage)}: {used} of {num_trials} trials"
                f" run or running; {num_seeds} seed(s) x {len(self.target_scores)} environment(s) per trial"
            )
            log(f"other workers join with the same storage and study_name={self.study_name!r}")
            while (trial := self._claim_trial(study, num_trials)) is not None:
                with self._heartbeat(study, trial):
                    self._run_and_tell(study, trial, num_seeds)
            return self._report_best(study)

    def _open_study(self) -> optuna.Study:
        try:
            return self._create_or_load_study()
        except (SQLAlchemyError, ImportError, OSError) as error:  # ImportError: the URL's database driver is missing
            raise storage_failure(self.storage, error) from None

    def _create_or_load_study(self) -> optuna.Study:
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                self._storage = self._make_storage()
                study = optuna.create_study(
                    storage=self._storage,
                    sampler=self.sampler,
                    pruner=self.pruner,
                    study_name=self.study_name,
                    direction=self.direction,
                    load_if_exists=True,
                )
                break
            except (IntegrityError, ProgrammingError):
                # Workers starting together on an empty database race to create Optuna's tables;
                # the loser finds them there when it tries again.
                if attempt == OPEN_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0.2, 1.0))
        stored_direction = study.direction.name.lower()
        if stored_direction != self.direction:
            raise ValueError(
                f"study {self.study_name!r} already exists with direction {stored_direction!r}, not {self.direction!r}"
            )
        self.study = study
        return study

    def _make_storage(self) -> BaseStorage:
        if self.storage is None:
            return InMemoryStorage()
        if isinstance(self.storage, str):
            # pre-ping: trials can take hours, long enough for a database server to drop idle connections.
            return RDBStorage(
                with_available_driver(self.storage),
                engine_kwargs={"pool_pre_ping": True},
                heartbeat_interval=self.heartbeat_interval,
                grace_period=self.grace_period,
                heartbeat_stale_trial_callback=on_stale_trial,
            )
        return self.storage

    def _trial_id(self, study: optuna.Study, trial: Trial) -> int:
        assert self._storage is not None
        study_id = self._storage.get_study_id_from_name(study.study_name)
        return self._storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)

    @contextmanager
    def _heartbeat(self, study: optuna.Study, trial: Trial) -> Iterator[None]:
        """While the block runs, record the trial's heartbeat every interval (database storages only)."""
        if not isinstance(self._storage, RDBStorage):
            yield
            return
        storage, trial_id, stop = self._storage, self._trial_id(study, trial), threading.Event()
        # the first beat before the trial runs: a trial without any heartbeat is never found stale
        storage.record_heartbeat(trial_id)

        def beat() -> None:
            while not stop.wait(self.heartbeat_interval):
                storage.record_heartbeat(trial_id)

        thread = threading.Thread(target=beat, name=f"heartbeat-trial-{trial.number}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _claim_trial(self, study: optuna.Study, num_trials: int) -> Trial | None:
        """A new trial to run, or None once the study holds `num_trials` trials.

        Optuna numbers new trials one at a time, in order, even across processes. A worker that
        counted a free slot may still lose it to another worker asking at the same moment: it sees
        that `num_trials` budget trials came before its own, and hands its trial back unrun.
        (Optuna's MaxTrialsCallback counts finished trials only, so each worker would start one
        more while the others' last trials are still running.)
        """
        with warnings.catch_warnings():  # Optuna marks fail_stale_trials experimental
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(study)  # trials of workers that died free their slots
        if sum(map(uses_budget, study.get_trials(deepcopy=False))) >= num_trials:
            return None
        trial = study.ask()
        earlier = [t for t in study.get_trials(deepcopy=False) if t.number < trial.number and uses_budget(t)]
        if len(earlier) < num_trials:
            return trial
        self._hand_back(study, trial)
        return None

    def _hand_back(self, study: optuna.Study, trial: Trial) -> None:
        # Back to WAITING, not failed: the study then holds exactly num_trials trials, and a later
        # tuning with a larger budget picks this one up first.
        assert self._storage is not None
        self._storage.set_trial_state_values(self._trial_id(study, trial), TrialState.WAITING)

    def _report_best(self, study: optuna.Study) -> dict[str, Any] | None:
        completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not completed:
            log(f"study {self.study_name!r} has no completed trial yet")
            return None
        best = study.best_trial
        flags = dict(best.user_attrs.get(FLAGS_ATTR, best.params))
        log(f"best trial: {best.number} with score {best.value:.6g} ({len(completed)} completed trials)")
        log(f"best parameters: {flags}")
        command = shlex.join(["python", self.script, *flag_arguments(flags)])
        log(f"rerun it with: {command} --env-id ... --seed ...")
        return flags

    # One trial

    def _run_and_tell(self, study: optuna.Study, trial: Trial, num_seeds: int) -> None:
        """Run a trial and record its outcome; a failed run fails the trial, and the study goes on."""
        try:
            score = self._objective(trial, num_seeds)
        except optuna.TrialPruned as pruned:
            study.tell(trial, state=TrialState.PRUNED)
            log(f"trial {trial.number} pruned: {pruned}")
        except RunFailed as failure:
            trial.set_user_attr(ERROR_ATTR, str(failure))
            study.tell(trial, state=TrialState.FAIL)
            print(f"tuner: trial {trial.number} failed: {failure}", file=sys.stderr, flush=True)
        except BaseException as error:
            # Ctrl-C, SIGTERM, or a bug in params_fn: leave no trial RUNNING forever, then stop.
            trial.set_user_attr(ERROR_ATTR, f"{type(error).__name__}: {error}")
            if isinstance(error, KeyboardInterrupt | SystemExit):
                trial.set_user_attr(INTERRUPTED_ATTR, True)
            study.tell(trial, state=TrialState.FAIL)
            raise
        else:
            study.tell(trial, score)
            log(f"trial {trial.number} finished with score {score:.6g}")

    def _objective(self, trial: Trial, num_seeds: int) -> float:
        params = dict(self.params_fn(trial))
        reserved = [name for name in params if flag_name(name) in RESERVED_FLAGS]
        if reserved:
            raise ValueError(f"params_fn must not set {reserved}: the tuner sets --env-id, --seed and --exp-name")
        trial.set_user_attr(FLAGS_ATTR, json_safe(params))
        wandb_run = self._start_wandb(trial, params)
        try:
            seed_scores = []
            for seed in range(num_seeds):
                seed_scores.append(self._score_seed(trial, seed, params, wandb_run))
                if trial.should_prune():
                    raise optuna.TrialPruned(f"score {seed_scores[-1]:.6g} after seed {seed}")
            return fmean(seed_scores)
        finally:
            if wandb_run is not None:
                wandb_run.finish()

    def _score_seed(self, trial: Trial, seed: int, params: Mapping[str, Any], wandb_run: Any) -> float:
        """Run every environment with one seed; reports their aggregated normalised score to Optuna and returns it."""
        raw_scores = {env_id: self._run_once(trial, env_id, seed, params) for env_id in self.target_scores}
        normalized = [normalize(raw_scores[env_id], target) for env_id, target in self.target_scores.items()]
        aggregated = float(self.aggregate(normalized))
        trial.set_user_attr(f"seed{seed}_scores", raw_scores)
        trial.report(aggregated, step=seed)
        if wandb_run is not None:
            wandb_run.log(
                {
                    **{f"{env_id}_return": score for env_id, score in raw_scores.items()},
                    "aggregated_normalized_score": aggregated,
                }
            )
        return aggregated

    # One training run

    def _exp_name(self, trial: Trial) -> str:
        return exp_name_of(self.study_name, trial.number)

    def _run_once(self, trial: Trial, env_id: str, seed: int, params: Mapping[str, Any]) -> float:
        """Train once and return the mean of the last `metric_last_n_average_window` logged values of `metric`."""
        exp_name = self._exp_name(trial)
        command = [
            sys.executable,
            self.script,
            *flag_arguments(params),
            *("--env-id", env_id, "--seed", str(seed), "--exp-name", exp_name),
        ]
        # Scripts write runs/{env_id}__{exp_name}__{seed}__{unix time}; the new folder is this run's.
        prefix = f"{env_id}__{exp_name}__{seed}__"
        pattern = glob.escape(prefix) + "*"
        before = set(Path("runs").glob(pattern))
        output, returncode = run_in_own_group(command)
        if returncode != 0:
            raise RunFailed(describe_failure(command, describe_exit(returncode), output))
        new_dirs = sorted(set(Path("runs").glob(pattern)) - before, key=lambda path: path.stat().st_mtime)
        if not new_dirs:
            raise RunFailed(describe_failure(command, f"no run folder runs/{prefix}* after", output))
        scalars = read_scalars(new_dirs[-1])
        values = [value for _, value in scalars.get(self.metric, [])]
        if not values:
            reason = f"no {self.metric!r} values in {new_dirs[-1]} (it logged {sorted(scalars)}) after"
            raise RunFailed(describe_failure(command, reason, output))
        score = mean_of_last(values, self.metric_last_n_average_window)
        target = self.target_scores[env_id]
        log(
            f"trial {trial.number}, seed {seed}, {env_id}: {self.metric} {score:.6g}"
            + ("" if target is None else f" -> normalised {normalize(score, target):.6g}")
        )
        return score

    def _start_wandb(self, trial: Trial, params: Mapping[str, Any]) -> Any:
        if not self.wandb_kwargs:
            return None
        import wandb

        settings: dict[str, Any] = {
            "name": f"{self.study_name}_{trial.number}",
            "group": self.study_name,
            "config": {**json_safe(params), "trial_number": trial.number},
        }
        return wandb.init(**{**settings, **self.wandb_kwargs})


def exp_name_of(study_name: str, trial_number: int) -> str:
    """The --exp-name of a trial's runs. Their folder is found by it, so it keeps to characters that need no escaping."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{study_name}-trial{trial_number}")


def run_in_own_group(command: list[str]) -> tuple[str, int]:
    """Run a training command in a process group of its own; returns its output and exit code.

    Whatever stops the tuner meanwhile (Ctrl-C, SIGTERM, an error) stops the run and everything it
    started: SIGTERM to the group, then SIGKILL to what is left after a grace period.
    """
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a Ctrl-C at the terminal reaches the tuner, which stops the group
    )
    try:
        output, _ = process.communicate()
    except BaseException:
        stop_process_group(process, STOP_GRACE_SECONDS)
        raise
    return output, process.returncode


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated (a KeyboardInterrupt), so it is handled as Ctrl-C is."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
