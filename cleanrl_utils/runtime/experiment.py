"""What every algorithm script does around its algorithm, in one place.

An algorithm file keeps its networks, losses and whole training loop visible; the lines that are
the same in every file live here and are called from the script in plain statements:

    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume: the checkpointed run's args
    exp.require(args.num_envs > 0, "...")        # bad input: one line on stderr, exit code 2
    exp.seed_global_rngs()                       # Python, NumPy, PyTorch
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = exp.make_envs(lambda: gym.vector.SyncVectorEnv(...), args.env_id)
    writer = exp.start_logging()                 # W&B (--track), TensorBoard with the hyperparameters
    if exp.loaded_checkpoint:
        checkpoint = exp.restore_run_state()     # envs, RNGs, clock (after make_envs)
    with exp:                                    # Ctrl-C/SIGTERM stop the run between steps, logs kept
        for ...:
            exp.raise_if_stopped()
            ...
            if exp.checkpoint_due(iteration):
                exp.save_checkpoint(global_step, {...}, learners)
        if args.save_model:
            exp.save_model(agent.state_dict())   # whole or absent; a full disk is one line
            exp.log_evaluation_and_upload(evaluate(exp.model_path, ...), hub_algorithm_name="PPO")

There is no base class, no callback and no loop here: `Experiment` holds the run's arguments and
name, the loaded checkpoint, its writer and the signals received, and cleans up when the `with`
block ends (envs closed, event file flushed, videos sent to W&B, W&B run finished) whatever ended it.

A run's folder `runs/{run_name}` is made when the Experiment is (`run_folder.claim`: atomically, the next free
name if another run took this one) and has one writer: the run holds its lock until it ends, and a `--resume`
takes it before it writes anything, or is refused in one line naming the pid that holds it. A folder that a run
claimed and never wrote to (bad input found after the Experiment was made) is removed again. A full disk while
the run writes (model, checkpoint, TensorBoard events, videos) ends it with one line naming the path, exit 1.
docs/community/script-contract.md lists every call, what it does and when.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import math
import os
import random
import re
import signal
import sys
import sysconfig
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import gymnasium as gym

from cleanrl_utils.runtime import atomic, env_state, run_folder
from cleanrl_utils.runtime import checkpoint as ckpt
from cleanrl_utils.runtime.command_line import parse_args, path_component_problems

T = TypeVar("T")
E = TypeVar("E")

# the extra of pyproject.toml that brings what an env family needs, keyed by its entry-point module
ENV_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "ale_py": "atari", "dm_control": "dm_control", "ALE": "atari"}
ATARI_INSTALL = 'the Atari games need ale-py: pip install -e ".[atari]"'
# When set, `start_logging` writes the run's folder name into this file (the benchmark runner sets it per run).
RUN_NAME_FILE = "CLEANRL_RUN_NAME_FILE"


def one_line(message: str) -> str:
    return " ".join(str(message).split())  # library messages can span lines


class Experiment:
    """One run of an algorithm script: its arguments, name, loaded checkpoint, logs and shutdown."""

    @classmethod
    def from_command_line(cls, Args: type[T], script_file: str) -> tuple[T, Experiment]:
        """The run's arguments and its Experiment, from the command line (`parse_args`).

        With `--resume`, the arguments are the checkpointed run's (run-control flags given now still win, see
        `checkpoint.restored_args`): a script takes them from here, the only place that has them right.
        """
        exp = cls(parse_args(Args), script_file, sys.argv[1:])
        return exp.args, exp

    def __init__(self, args: Any, script_file: str, argv: Sequence[str] | None = None) -> None:
        """Check the run flags and load a `--resume` checkpoint, whose arguments then replace `args`'s values in place
        but for the run-control flags `argv` (the command line `args` came from, if any) names."""
        self.args = args
        self.script_file = script_file
        self.script = os.path.basename(script_file)
        self.loaded_checkpoint: dict[str, Any] | None = None
        self.envs: Any = None
        self.writer: Any = None
        self.stop_signals: list[int] = []
        self._closed = self._training = False
        self._files_before_resume: set[str] | None = None  # the run folder's files before a resume's writer began
        self.elapsed_before = 0.0  # seconds of training before a --resume
        self.start_time = time.time()  # the SPS clock; it restarts when training does (`with exp:`)
        self.writer_lock: run_folder.WriterLock | None = None
        self.claimed = False  # this Experiment made its run folder (not a resume's)
        if getattr(args, "resume", None):
            # the lock of a folder that exists (a resume in place, a second resume of it) before GBs of replay memory
            # are read; one made by the resume is locked once the checkpoint has passed its checks
            early = ckpt.peek_run_name(args.resume)
            if early is not None and not path_component_problems("run_name", early) and os.path.isdir(f"runs/{early}"):
                self._lock_resumed_folder(early)
            try:  # a resumed run goes on with the arguments it was started with
                self.loaded_checkpoint = ckpt.load(args.resume)
                ckpt.restored_args(args, self.loaded_checkpoint, argv)  # first: a checkpoint of another script is named so
                ckpt.check_run_state(self.loaded_checkpoint)
            except ckpt.CheckpointError as e:
                self.fail(str(e))
        # read after a resume: without the flag on its command line, a resumed run keeps checkpointing as it did
        self.checkpoint_frequency = getattr(args, "checkpoint_frequency", 0)
        if self.checkpoint_frequency < 0:
            self.fail(f"--checkpoint-frequency must be 0 (off) or positive, got {self.checkpoint_frequency}")
        if getattr(args, "upload_model", False):
            from cleanrl_utils.runtime.huggingface import UploadError, require_token

            self.require(args.save_model, "--upload-model uploads the saved model: add --save-model, or --no-upload-model")
            try:  # checked now, not after training
                require_token()
            except UploadError as e:
                self.fail(str(e))
        try:
            if self.loaded_checkpoint:
                self.run_name = self.loaded_checkpoint["run_name"]
                # it films and evaluates again into the run's video folders: gymnasium's "Overwriting" says nothing new
                warnings.filterwarnings("ignore", f".*Overwriting existing videos at .*{re.escape(self.run_name)}")
                if self.writer_lock is None or self.writer_lock.folder.name != self.run_name:
                    self._lock_resumed_folder(self.run_name)
            else:
                base = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
                self.run_name, self.writer_lock = run_folder.claim(base)
                self.claimed = True
                atexit.register(run_folder.release_if_unused, self.run_name, self.writer_lock)  # a crash before logging
        except run_folder.RunFolderError as e:
            self.fail(str(e))

    def _lock_resumed_folder(self, name: str) -> None:
        """Take the lock of the resumed run's folder, where nothing may be a link elsewhere; one line if it cannot."""
        if self.writer_lock is not None:
            self.writer_lock.release()
        try:
            run_folder.refuse_links(f"runs/{name}/checkpoints", f"videos/{name}", f"videos/{name}-eval")
            self.writer_lock = run_folder.lock(f"runs/{name}")
        except run_folder.RunFolderError as e:
            self.fail(str(e))

    # bad input
    def fail(self, message: str) -> NoReturn:
        """Bad input: one line on stderr and exit code 2, no traceback. What the run opened is closed first, quietly
        (W&B's run ends with exit code 2); a resume refused before training removes the event file it began (its
        purge step would hide the run's later steps); a run folder claimed and not yet written to is removed."""
        with warnings.catch_warnings(), contextlib.suppress(Exception):  # the bad input is the line to read
            warnings.simplefilter("ignore")
            self._close(exit_code=2)
        if self._files_before_resume is not None and not self._training:
            with contextlib.suppress(OSError):
                for name in set(os.listdir(f"runs/{self.run_name}")) - self._files_before_resume:
                    if name.startswith("events.out.tfevents."):
                        os.remove(f"runs/{self.run_name}/{name}")
        self._give_up_folder()
        print(f"{self.script}: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)

    def _give_up_folder(self) -> None:
        lock = getattr(self, "writer_lock", None)
        if lock is not None and getattr(self, "claimed", False):
            run_folder.release_if_unused(self.run_name, lock)
        elif lock is not None:
            lock.release()

    def require(self, condition: Any, message: str) -> None:
        if not condition:
            self.fail(message)

    def require_positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self.args, name)
            self.require(value > 0, f"--{name.replace('_', '-')} must be positive, got {value}")

    # run start
    def seed_global_rngs(self) -> None:
        """Seed the global random generators with --seed: Python's, NumPy's and PyTorch's (CPU and CUDA).

        cuDNN is made deterministic unless --no-torch-deterministic. JAX has no global generator: JAX
        scripts derive their keys from --seed themselves.
        """
        import numpy as np
        import torch

        random.seed(self.args.seed)
        np.random.seed(self.args.seed)
        torch.manual_seed(self.args.seed)
        torch.backends.cudnn.deterministic = getattr(self.args, "torch_deterministic", True)

    # environments
    def make_envs(self, make: Callable[[], E], env_id: str) -> E:
        """`make()`, with a missing dependency or a bad env id turned into one line naming what to install.

        Warnings raised meanwhile (e.g. "Hopper-v4 is out of date") are shown once the envs exist, so that
        a failure stays one line; so is a MuJoCo that cannot start or film here (`mujoco_problem`).
        """
        if (extra := extra_for(env_id)) in ("mujoco", "dm_control"):
            filming = getattr(self.args, "capture_video", False)
            self.require(not (problem := mujoco_problem(filming, dm_control=extra == "dm_control")), problem)
        with warnings.catch_warnings(record=True) as held:
            try:
                self.envs = make()
            except gym.error.DependencyNotInstalled as e:
                self.fail(not_installed(env_id, e))
            except (gym.error.Error, ImportError, OSError) as e:  # OSError: a system library the env loads is missing
                self.fail(f"cannot make env {env_id!r}: {e}")
        for warning in held:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
        return self.envs

    def require_action_space(self, space: Any, kind: type | tuple[type, ...], see: str | None = None) -> None:
        """One line when the env's actions are not of the `kind`(s) the script handles; `see` names a script that does."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        names, hint = " or ".join(k.__name__ for k in kinds), f" (see {see})" if see else ""
        self.require(
            isinstance(space, kinds), f"{self.args.env_id} has {space} actions; {self.script} needs {names} ones{hint}"
        )

    def require_atari_game(self, see: str, see_continuous: str) -> None:
        """One line unless --env-id is an ale-py game, saying what it is instead: ale-py missing, an unknown id,
        an env with other actions (`see_continuous` names a script for them) or another env (`see`)."""
        env_id, installed = self.args.env_id, register_atari_games()
        spec = gym.registry.get(env_id)
        if spec is None or "ale_py" not in str(spec.entry_point):
            self.require(spec or installed, f"{env_id}: not a known env, and {ATARI_INSTALL}")
            env = self.make_envs(lambda: gym.make(env_id, disable_env_checker=True), env_id)  # made to say what it is
            self.require_action_space(env.action_space, gym.spaces.Discrete, see=see_continuous)
            self.fail(f"{env_id} is not an Atari game of ale-py; {self.script} needs one (see {see})")

    def require_flat_observations(self, space: Any, see: str) -> None:
        """One line when observations are not a flat Box (vectors); `see` names a script for the others."""
        flat = isinstance(space, gym.spaces.Box) and len(space.shape) == 1
        self.require(flat, f"{self.args.env_id} observations are {space}; {self.script} needs a flat Box (see {see})")

    def start_logging(self, log: bool = True) -> Any:
        """Start W&B (with --track) and the TensorBoard writer; call it once the envs exist (bad input fails first).

        The writer's first texts are the hyperparameter table and the run's `WANDB_TAGS` (read back by
        `cleanrl_utils.rlops`). A resumed run appends to its folder and goes on in its W&B run;
        TensorBoard drops what the old run logged after the checkpoint. `log=False` (a worker process
        of a multi-process run) starts neither and returns None.
        """
        from torch.utils.tensorboard import SummaryWriter

        if not log:  # a worker process: the run's first process writes the folder
            self._give_up_folder()
            return None
        args, checkpoint = self.args, self.loaded_checkpoint
        if os.environ.get(RUN_NAME_FILE):  # the benchmark runner learns which folder to --resume if this run stops
            try:
                atomic.write_text(os.environ[RUN_NAME_FILE], self.run_name + "\n")
            except OSError as e:
                self._stop_writing(os.environ[RUN_NAME_FILE], e)
        if args.track:
            import wandb

            # W&B reads the run's TensorBoard events, keys as logged; naming the root saves it guessing one
            wandb.tensorboard.patch(root_logdir=f"runs/{self.run_name}")
            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                sync_tensorboard=True,
                config=vars(args),
                name=self.run_name,
                save_code=True,
                id=checkpoint["wandb_id"] if checkpoint else None,
                resume="allow" if checkpoint else None,
            )
        purge_step = checkpoint["global_step"] + 1 if checkpoint else None
        threading.excepthook = _quiet_about_full_disks  # the event writer's thread: said in one line, by this one
        try:
            self._files_before_resume = set(os.listdir(f"runs/{self.run_name}")) if checkpoint else None
            self.writer = SummaryWriter(f"runs/{self.run_name}", purge_step=purge_step)
            table = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
            self.writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
            self.writer.add_text("tags", os.environ.get("WANDB_TAGS", ""))  # comma-separated
        except OSError as e:
            self._stop_writing(f"runs/{self.run_name}", e)
        return self.writer

    # shutdown
    def _request_stop(self, signum: int, frame: Any) -> None:
        """Note the signal; `raise_if_stopped` ends the run at the next step (a second signal ends it at once).

        Raising wherever the signal lands could hit TensorBoard's event writer mid-call and deadlock its
        close, losing the logs; the check at the top of each step cannot.
        """
        if self.stop_signals:
            raise KeyboardInterrupt
        self.stop_signals.append(signum)

    def raise_if_stopped(self) -> None:
        if self.stop_signals:
            raise KeyboardInterrupt

    def stop_requested(self) -> bool:
        """Whether Ctrl-C or SIGTERM has arrived, for a script that must stop at a point of its own choosing (the
        ranks of `ppo_atari_multigpu.py` stop together) rather than at the next `raise_if_stopped`."""
        return bool(self.stop_signals)

    def __enter__(self) -> Experiment:
        """Training starts: catch Ctrl-C and SIGTERM from now on, and start the SPS clock (setup is not training)."""
        self.start_time, self._training = time.time() - self.elapsed_before, True
        self._previous_handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> bool:
        """Close everything, on success, crash or interruption alike; an interruption exits with code 130, a full
        disk (while training, or now as the logs are flushed) with one line and code 1. The folder's lock is let go."""
        stopped = kind is KeyboardInterrupt or (kind is None and bool(self.stop_signals))
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        full = error if isinstance(error, Exception) and atomic.disk_full(error) else None  # not an exit already said
        try:
            full = self._close() or full
        finally:
            if self.writer_lock is not None:
                self.writer_lock.release()
        if full is not None and kind is not KeyboardInterrupt:
            self._stop_writing(getattr(atomic.os_error(full), "filename", None) or f"runs/{self.run_name}", full)
        if stopped:
            print(f"{self.script}: interrupted; what was logged is in runs/{self.run_name}", file=sys.stderr)
            raise SystemExit(130) from None
        return False

    def _close(self, exit_code: int | None = None) -> BaseException | None:
        """Close the envs (a video being recorded is written) and the writer (events flushed), each whatever the other
        raised, and finish W&B's run (its videos sent if training began); once. Returns a full-disk error met on the
        way; the first other error is raised after."""
        if self._closed:
            return None
        self._closed, full, other = True, None, None
        for closable in (self.envs, self.writer):
            try:
                if closable is not None:
                    closable.close()
            except Exception as e:
                full, other = (full or e, other) if atomic.disk_full(e) else (full, other or e)
                for file_writer in (getattr(closable, "all_writers", None) or {}).values():  # a flush failed first:
                    with contextlib.suppress(Exception):  # each file's close stops its thread before flushing
                        file_writer.close()
        if self.writer is not None and self.args.track:
            import wandb

            videos = f"videos/{self.run_name}"  # a refused resume's are the old run's, already sent
            for video in sorted(os.listdir(videos)) if os.path.isdir(videos) and self._training else []:
                wandb.log({"videos": wandb.Video(f"{videos}/{video}", format="mp4")})
            wandb.finish(exit_code=exit_code)
            wandb.tensorboard.unpatch()  # a later run in this process (the tuner's, a test's) starts afresh
        if other is not None:
            raise other
        return full

    def _stop_writing(self, path: str, error: BaseException) -> NoReturn:
        """A write that failed (a full disk): one line naming the file, exit code 1 (not bad input)."""
        print(f"{self.script}: error: cannot write {path}: {atomic.write_failure(error)}", file=sys.stderr)
        raise SystemExit(1) from None

    # checkpoints
    def checkpoint_due(self, count: int, since: int | None = None) -> bool:
        """True when --checkpoint-frequency divides `count` (iterations or steps done), or, given `since` (the count
        before this iteration), when a multiple of it lies in (since, count]: steps taken `num_envs` at a time."""
        previous = count - 1 if since is None else since
        return bool(self.checkpoint_frequency) and count // self.checkpoint_frequency > previous // self.checkpoint_frequency

    def save_checkpoint(self, global_step: int, state: dict[str, Any], learners: dict[str, Any] | None = None) -> None:
        """Save the script's `state` (plain data) with what the run itself needs to go on (arguments, envs, RNGs,
        clock), and `learners` (name -> network, optimizer or replay buffer: `checkpoint.state_of`), which
        `restore_run_state(learners)` loads back into the resumed run's own objects."""
        if self.writer is not None:
            self.writer.flush()  # the logs on disk reach the checkpoint, whatever happens next
        wandb_id = None
        if self.args.track:
            import wandb

            wandb_id = wandb.run.id
        try:
            run_state = {
                "args": vars(self.args),
                "run_name": self.run_name,
                "wandb_id": wandb_id,
                "global_step": global_step,
                "elapsed_time": time.time() - self.start_time,
                "rng": ckpt.rng_state(),
                "envs": ckpt.env_state(self.envs) if self.envs is not None else None,
            }
            learner_states = {name: ckpt.state_of(learner) for name, learner in (learners or {}).items()}
            ckpt.save(f"runs/{self.run_name}", global_step, {**run_state, **state, **learner_states})
        except (ckpt.CheckpointError, env_state.EnvStateError) as e:  # e.g. a full disk: exit code 1, logs closed by __exit__
            print(f"{self.script}: error: {one_line(str(e))}", file=sys.stderr)
            raise SystemExit(1) from None

    def restore_run_state(self, learners: dict[str, Any] | None = None) -> dict[str, Any]:
        """Put the envs, global random generators and SPS clock back as the loaded checkpoint saved them, load each
        of `learners` (name -> network, optimizer or replay buffer, made by this run) from it, and return it (for the
        script's own state).

        Call it after `make_envs`: it restores the envs that made. Called before, it fails with one line.
        """
        checkpoint = self.loaded_checkpoint
        if checkpoint is None:
            self.fail("restore_run_state() restores a --resume checkpoint, and none was given")
        try:
            if checkpoint["envs"] is not None:
                if self.envs is None:
                    self.fail("restore_run_state() restores the envs: call it after make_envs()")
                ckpt.restore_env(self.envs, checkpoint["envs"])
            ckpt.set_rng_state(checkpoint["rng"])
            for name, learner in (learners or {}).items():
                if name not in checkpoint:
                    raise ckpt.RefusedCheckpoint(f"--resume: the checkpoint holds no {name}")
                ckpt.load_state(learner, checkpoint[name], name)
        except ckpt.CheckpointError as e:
            self.fail(str(e))
        self.elapsed_before = checkpoint["elapsed_time"]
        self.start_time = time.time() - self.elapsed_before
        return checkpoint

    # the script's own values in the loaded checkpoint, checked as the command line is: one line, exit code 2
    def saved_int(self, name: str, low: int, high: int) -> int:
        """The loaded checkpoint's counter `name`, a whole number in [low, high] (`checkpoint.saved_int`)."""
        try:
            return ckpt.saved_int(self._checkpoint(), name, low, high)
        except ckpt.CheckpointError as e:
            self.fail(str(e))

    def saved_iteration(self, num_iterations: int, steps_each: int) -> tuple[int, int]:
        """The loaded checkpoint's global step and the iteration to go on from: its `iteration` (1 to `num_iterations`)
        plus one. Each iteration takes `steps_each` steps: a step count that disagrees would run past the budget."""
        done = self.saved_int("iteration", 1, num_iterations)
        global_step = self._checkpoint()["global_step"]  # a whole number (`checkpoint.check_run_state`)
        if global_step != done * steps_each:
            self.fail(f"--resume: refused, the checkpoint's global_step ({global_step}) is not {done} iterations' steps")
        return global_step, done + 1

    def saved_float(self, name: str, low: float = -math.inf, high: float = math.inf) -> float:
        """The loaded checkpoint's number `name`, finite and in [low, high] (`checkpoint.saved_float`)."""
        try:
            return ckpt.saved_float(self._checkpoint(), name, low, high)
        except ckpt.CheckpointError as e:
            self.fail(str(e))

    def saved_array(
        self, name: str, shape: tuple[int, ...], dtype: Any, low: float = -math.inf, high: float = math.inf
    ) -> Any:
        """The loaded checkpoint's array or tensor `name`, of exactly `shape` and `dtype`, finite, its values in
        [low, high] (`checkpoint.saved_array`)."""
        try:
            return ckpt.saved_array(self._checkpoint(), name, shape, dtype, low, high)
        except ckpt.CheckpointError as e:
            self.fail(str(e))

    def saved_list(self, name: str, max_length: int, like_item: Any) -> list[Any]:
        """The loaded checkpoint's list `name`, of at most `max_length` items like `like_item` (`checkpoint.saved_list`)."""
        try:
            return ckpt.saved_list(self._checkpoint(), name, max_length, like_item)
        except ckpt.CheckpointError as e:
            self.fail(str(e))

    def saved_tree(self, name: str, like: Any) -> Any:
        """The loaded checkpoint's `name`, of the structure, shapes and dtypes of `like` (`checkpoint.saved_tree`)."""
        try:
            return ckpt.saved_tree(self._checkpoint(), name, like)
        except ckpt.CheckpointError as e:
            self.fail(str(e))

    def _checkpoint(self) -> dict[str, Any]:
        if self.loaded_checkpoint is None:
            self.fail("a saved value is read from a --resume checkpoint, and none was given")
        return self.loaded_checkpoint

    def restart_sps_clock(self) -> None:
        """Start the SPS clock now: after JIT compilation or warm-up play, which are not training."""
        self.start_time = time.time()

    @property
    def elapsed(self) -> float:
        """Seconds of training, across resumes (for the SPS)."""
        return time.time() - self.start_time

    # saving, evaluation, upload
    @property
    def model_path(self) -> str:
        return f"runs/{self.run_name}/{self.args.exp_name}.cleanrl_model"

    def save_model(self, model: Any, name: str | None = None) -> str:
        """Write `model` to `model_path` (or `runs/{run_name}/{name}.cleanrl_model`) whole or not at all: bytes (Flax's
        `to_bytes`) as they are, anything else with `torch.save`. A failed write (a full disk) ends the run with one
        line naming the file, exit code 1, and leaves no file under that name. Returns the path."""
        path = self.model_path if name is None else f"runs/{self.run_name}/{name}.cleanrl_model"
        try:
            with atomic.atomic_path(path) as tmp:
                if isinstance(model, bytes):
                    tmp.write_bytes(model)
                else:
                    import torch

                    with open(tmp, "wb") as f:
                        torch.save(model, f)
        except (OSError, RuntimeError) as e:  # torch wraps the errors of the file it writes
            if atomic.os_error(e) is None:
                raise
            self._stop_writing(path, e)
        return path

    def log_evaluation_and_upload(self, episodic_returns: Sequence[float], hub_algorithm_name: str) -> None:
        """Log the saved model's evaluation returns as `eval/episodic_return`; with --upload-model, also push the
        model, logs, video and script to the Hugging Face Hub, `hub_algorithm_name` (e.g. "PPO") on its model card."""
        for idx, episodic_return in enumerate(episodic_returns):
            self.writer.add_scalar("eval/episodic_return", episodic_return, idx)
        if getattr(self.args, "upload_model", False):  # scripts without the flag only log
            from cleanrl_utils.runtime.huggingface import UploadError, push_to_hub

            self.writer.flush()  # the uploaded event file then holds the evaluation too
            try:
                run_dir, videos = f"runs/{self.run_name}", f"videos/{self.run_name}-eval"
                push_to_hub(self.args, list(episodic_returns), hub_algorithm_name, run_dir, videos, self.script_file)
            except UploadError as e:
                self.fail(str(e))


def _quiet_about_full_disks(failure: threading.ExceptHookArgs) -> None:
    """A thread that died of a full disk (TensorBoard's event writer) prints nothing: its writer raises the error again
    in the run's own thread, which says it in one line (`Experiment.__exit__`). Other failures print as always."""
    if not atomic.disk_full(failure.exc_value):
        threading.__excepthook__(failure)


def register_atari_games() -> bool:
    """Register ale-py's games with Gymnasium; False when ale-py (the `atari` extra) is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gym.register_envs(ale_py)
    return True


def check_atari_game(env_id: str) -> None:
    """Gymnasium's error unless `env_id` is an ale-py game: for the scripts' make_env, which enjoy and the evaluators call too."""
    if not register_atari_games():
        raise gym.error.DependencyNotInstalled(ATARI_INSTALL)
    if "ale_py" not in str(gym.spec(env_id).entry_point):
        raise gym.error.Error(f"{env_id} is not an Atari game of ale-py")


# MUJOCO_GL as MuJoCo's docs name the backends: `import mujoco` also takes variants (EGL, 1, off...), which dm_control
# or Gymnasium's renderer, reading the value as written, do not, so runs refuse them all alike
MUJOCO_GL_NAMES = ("egl", "osmesa", "glfw", "disable")
MUJOCO_GL_HINTS = {
    "egl": "install EGL and a driver (Debian: libegl1, libegl-mesa0)",
    "osmesa": "install libosmesa6",
    "glfw": "GLFW needs a display it can open: check DISPLAY, or set MUJOCO_GL=egl (or osmesa)",
}


# Where the code that loads a GL backend lives, by package: PyOpenGL, GLFW, MuJoCo's and dm_control's backend modules
GL_LOADERS = {
    "OpenGL": [""],
    "glfw": [""],
    "mujoco": ["egl", "osmesa", "glfw"],
    "dm_control": ["_render/pyopengl", "_render/glfw_renderer.py"],
}


def raised_loading_gl(error: BaseException) -> bool:
    """Whether `error` was raised in `GL_LOADERS`, judged by its innermost frame outside the standard library (a
    package's own failure, even under a folder named egl, is not GL's)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    frames = [Path(f.filename) for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith("<")]
    own = [f for f in frames if not f.is_relative_to(stdlib) or {"site-packages", "dist-packages"} & set(f.parts)]
    specs = {package: importlib.util.find_spec(package) for package in GL_LOADERS}
    places = [
        Path(spec.origin).parent / sub for name, spec in specs.items() if spec and spec.origin for sub in GL_LOADERS[name]
    ]
    return bool(own) and any(own[-1].is_relative_to(place) for place in places)


def mujoco_problem(filming: bool, dm_control: bool = False) -> str | None:
    """Why MuJoCo cannot start, or (`filming`) film, here, in one line before an import or the first frame fails in a
    traceback: MUJOCO_GL not in `MUJOCO_GL_NAMES`, a backend whose library, driver or display is missing."""
    backend = os.environ.get("MUJOCO_GL")
    if backend is not None and backend not in MUJOCO_GL_NAMES:
        return f"MUJOCO_GL={backend!r}: set it as MuJoCo names a backend (egl, osmesa, glfw, disable), or unset it"
    if backend in ("egl", "osmesa") and sys.platform != "linux":
        return f"MUJOCO_GL={backend!r}: EGL and OSMesa render on Linux only; unset it"
    if filming and backend == "disable":
        return "--capture-video: MUJOCO_GL=disable turns MuJoCo's rendering off; set egl, osmesa or glfw"
    headless = sys.platform == "linux" and not any(os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY"))
    if filming and headless and backend in (None, "glfw"):
        return "--capture-video: MuJoCo films without a display through EGL or OSMesa: set MUJOCO_GL=egl (or osmesa)"
    stage = "start"
    try:
        with warnings.catch_warnings():  # what fails is said below, in one line
            warnings.simplefilter("ignore")
            import mujoco  # reads MUJOCO_GL and loads that backend's library

            if dm_control and backend is not None:
                from dm_control import _render  # noqa: F401  (dm_control loads the backend it names, on import)
            stage = "film" if filming else stage
            if filming and backend in ("egl", "osmesa"):
                mujoco.GLContext(8, 8).free()  # each frame needs one: a library without a working driver fails here
            elif filming:
                import glfw

                if not glfw.init():  # it warns, not raises, when it cannot open the display
                    raise RuntimeError(f"GLFW cannot open the display {os.environ.get('DISPLAY', '')!r}")
    except ModuleNotFoundError:
        return None  # making the env names the extra that installs it
    except Exception as e:
        if stage == "start" and not raised_loading_gl(e):  # the package's own failure, a broken install
            if isinstance(e, ImportError):
                return None  # the script's import check names the extra to install
            return f"MuJoCo fails on import, not in its GL backend ({one_line(e)}): reinstall it"
        platform = os.environ.get("PYOPENGL_PLATFORM") or backend  # PyOpenGL reads it as written
        hint = MUJOCO_GL_HINTS.get(backend or "glfw", "unset it")
        if backend in ("egl", "osmesa") and platform != backend:  # MuJoCo sets it only where it is unset
            hint = f"PYOPENGL_PLATFORM={platform!r} is not {backend!r}: unset PYOPENGL_PLATFORM"
        setting = f"MUJOCO_GL={backend!r}" if backend else "MUJOCO_GL unset (GLFW)"
        return f"MuJoCo cannot {stage} with {setting} ({one_line(e)}): {hint}"
    return None


def not_installed(env_id: str, error: gym.error.DependencyNotInstalled) -> str:
    """One line naming the extra that installs what making `env_id` missed."""
    reason = str(error).split(",")[0]  # Gymnasium's advice after the comma names its extras, not ours
    return f'{env_id}: {reason}; install it with pip install -e ".[{extra_for(env_id)}]"'


def extra_for(env_id: str) -> str:
    """The pyproject extra that installs what `env_id` needs ("all" when unknown).

    Known from the registered entry point, or else from the id's namespace (`dm_control/...`,
    `ALE/...`), which is all there is when the package that registers those ids is missing.
    """
    env_id = env_id.split(":")[-1]
    entry_point = str(getattr(gym.registry.get(env_id), "entry_point", ""))
    namespace = env_id.split("/")[0] if "/" in env_id else None
    return next((extra for family, extra in ENV_EXTRAS.items() if family in entry_point or family == namespace), "all")
