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
                exp.save_checkpoint(global_step, {...})
        if args.save_model:
            torch.save(agent.state_dict(), exp.model_path)
            exp.log_evaluation_and_upload(evaluate(exp.model_path, ...), hub_algorithm_name="PPO")

There is no base class, no callback and no loop here: `Experiment` holds the run's arguments and
name, the loaded checkpoint, its writer and the signals received, and cleans up when the `with`
block ends (envs closed, event file flushed, videos sent to W&B, W&B run finished) whatever ended it.
docs/community/script-contract.md lists every call, what it does and when.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import gymnasium as gym

from cleanrl_utils import checkpoint as ckpt
from cleanrl_utils.command_line import parse_args

T = TypeVar("T")
E = TypeVar("E")

# the extra of pyproject.toml that brings what an env family needs, keyed by its entry-point module
ENV_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "ale_py": "atari", "dm_control": "dm_control", "ALE": "atari"}
ATARI_INSTALL = 'the Atari games need ale-py: pip install -e ".[atari]"'
# When set, `start_logging` writes the run's folder name into this file (the benchmark runner sets it per run).
RUN_NAME_FILE = "CLEANRL_RUN_NAME_FILE"


def free_run_name(base: str) -> str:
    """`base`, or else `base-2`, `base-3`...: the first name with no run folder and no video folder yet, so that runs
    started in the same second with the same env id, exp name and seed never share one."""
    name, number = base, 1
    while os.path.exists(f"runs/{name}") or os.path.exists(f"videos/{name}"):
        number += 1
        name = f"{base}-{number}"
    return name


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
        exp = cls(parse_args(Args), script_file)
        return exp.args, exp

    def __init__(self, args: Any, script_file: str) -> None:
        """Check the run flags and load a `--resume` checkpoint, whose arguments then replace `args`'s values in place."""
        self.args = args
        self.script_file = script_file
        self.script = os.path.basename(script_file)
        self.loaded_checkpoint: dict[str, Any] | None = None
        self.envs: Any = None
        self.writer: Any = None
        self.stop_signals: list[int] = []
        self.elapsed_before = 0.0  # seconds of training before a --resume
        self.start_time = time.time()  # the SPS clock; it restarts when training does (`with exp:`)
        if getattr(args, "resume", None):
            try:  # a resumed run goes on with the arguments it was started with
                self.loaded_checkpoint = ckpt.load(args.resume)
                ckpt.restored_args(args, self.loaded_checkpoint)
            except ckpt.CheckpointError as e:
                self.fail(str(e))
        # read after a resume: without the flag on its command line, a resumed run keeps checkpointing as it did
        self.checkpoint_frequency = getattr(args, "checkpoint_frequency", 0)
        if self.checkpoint_frequency < 0:
            self.fail(f"--checkpoint-frequency must be 0 (off) or positive, got {self.checkpoint_frequency}")
        if self.loaded_checkpoint:
            self.run_name = self.loaded_checkpoint["run_name"]
        else:
            self.run_name = free_run_name(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}")
        if getattr(args, "upload_model", False):
            from cleanrl_utils.huggingface import UploadError, require_token

            self.require(args.save_model, "--upload-model uploads the saved model: add --save-model")
            try:  # checked now, not after training
                require_token()
            except UploadError as e:
                self.fail(str(e))

    # bad input
    def fail(self, message: str) -> NoReturn:
        """Bad input: one line on stderr and exit code 2, no traceback."""
        print(f"{self.script}: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)

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
        a failure stays one line.
        """
        with warnings.catch_warnings(record=True) as held:
            try:
                self.envs = make()
            except gym.error.DependencyNotInstalled as e:
                reason = str(e).split(",")[0]  # Gymnasium's advice after the comma names its extras, not ours
                self.fail(f'{env_id}: {reason}; install it with pip install -e ".[{extra_for(env_id)}]"')
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

        if not log:
            return None
        args, checkpoint = self.args, self.loaded_checkpoint
        if not checkpoint:  # claimed before anything is logged: a run never writes into another run's folder
            try:
                os.makedirs(f"runs/{self.run_name}")
            except FileExistsError:
                self.fail(f"runs/{self.run_name} was made meanwhile by another run of the same name; start this one again")
        if os.environ.get(RUN_NAME_FILE):  # the benchmark runner learns which folder to --resume if this run stops
            from cleanrl_utils import atomic

            atomic.write_text(os.environ[RUN_NAME_FILE], self.run_name + "\n")
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
        self.writer = SummaryWriter(f"runs/{self.run_name}", purge_step=purge_step)
        table = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
        self.writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
        self.writer.add_text("tags", os.environ.get("WANDB_TAGS", ""))  # comma-separated
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

    def __enter__(self) -> Experiment:
        """Training starts: catch Ctrl-C and SIGTERM from now on, and start the SPS clock (setup is not training)."""
        self.start_time = time.time() - self.elapsed_before
        self._previous_handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> bool:
        """Close everything, on success, crash or interruption alike; an interruption exits with code 130."""
        stopped = kind is KeyboardInterrupt or (kind is None and bool(self.stop_signals))
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        if self.envs is not None:
            self.envs.close()
        if self.writer is not None:
            self.writer.close()
        if self.writer is not None and self.args.track:
            import wandb

            videos = f"videos/{self.run_name}"
            for video in sorted(os.listdir(videos)) if os.path.isdir(videos) else []:
                wandb.log({"videos": wandb.Video(f"{videos}/{video}", format="mp4")})
            wandb.finish()
            wandb.tensorboard.unpatch()  # a later run in this process (the tuner's, a test's) starts afresh
        if stopped:
            print(f"{self.script}: interrupted; what was logged is in runs/{self.run_name}", file=sys.stderr)
            raise SystemExit(130) from None
        return False

    # checkpoints
    def checkpoint_due(self, count: int, since: int | None = None) -> bool:
        """True when --checkpoint-frequency divides `count` (iterations or steps done), or, given `since` (the count
        before this iteration), when a multiple of it lies in (since, count]: steps taken `num_envs` at a time."""
        previous = count - 1 if since is None else since
        return bool(self.checkpoint_frequency) and count // self.checkpoint_frequency > previous // self.checkpoint_frequency

    def save_checkpoint(self, global_step: int, state: dict[str, Any], learners: dict[str, Any] | None = None) -> None:
        """Save the script's `state` with what the run itself needs to go on (arguments, envs, RNGs, clock).

        `learners` (name -> network or optimizer) are saved by their `state_dict()`; `restore_run_state(learners)`
        loads them back. The envs' snapshot includes each Atari emulator's state (`checkpoint.env_state`).
        """
        if self.writer is not None:
            self.writer.flush()  # the logs on disk reach the checkpoint, whatever happens next
        wandb_id = None
        if self.args.track:
            import wandb

            wandb_id = wandb.run.id
        run_state = {
            "args": vars(self.args),
            "run_name": self.run_name,
            "wandb_id": wandb_id,
            "global_step": global_step,
            "elapsed_time": time.time() - self.start_time,
            "rng": ckpt.rng_state(),
            "envs": ckpt.env_state(self.envs) if self.envs is not None else None,
        }
        learner_states = {name: learner.state_dict() for name, learner in (learners or {}).items()}
        try:
            ckpt.save(f"runs/{self.run_name}", global_step, {**run_state, **state, **learner_states})
        except ckpt.CheckpointError as e:  # e.g. a full disk: not bad input, so exit code 1; logs closed by __exit__
            print(f"{self.script}: error: {one_line(str(e))}", file=sys.stderr)
            raise SystemExit(1) from None

    def restore_run_state(self, learners: dict[str, Any] | None = None) -> dict[str, Any]:
        """Put the envs, global random generators and SPS clock back as the loaded checkpoint saved them, load each
        of `learners` (name -> network or optimizer) from it, and return it (for the script's own state).

        Call it after `make_envs`: it restores the envs that made. Called before, it fails with one line.
        """
        checkpoint = self.loaded_checkpoint
        if checkpoint is None:
            self.fail("restore_run_state() restores a --resume checkpoint, and none was given")
        if checkpoint.get("envs") is not None:
            if self.envs is None:
                self.fail("restore_run_state() restores the envs: call it after make_envs()")
            try:
                ckpt.restore_env(self.envs, checkpoint["envs"])
            except ckpt.CheckpointError as e:
                self.fail(str(e))
        ckpt.set_rng_state(checkpoint["rng"])
        for name, learner in (learners or {}).items():
            learner.load_state_dict(checkpoint[name])
        self.elapsed_before = checkpoint["elapsed_time"]
        self.start_time = time.time() - self.elapsed_before
        return checkpoint

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

    def log_evaluation_and_upload(self, episodic_returns: Sequence[float], hub_algorithm_name: str) -> None:
        """Log the saved model's evaluation returns as `eval/episodic_return`; with --upload-model, also push the
        model, logs, video and script to the Hugging Face Hub, `hub_algorithm_name` (e.g. "PPO") on its model card."""
        for idx, episodic_return in enumerate(episodic_returns):
            self.writer.add_scalar("eval/episodic_return", episodic_return, idx)
        if getattr(self.args, "upload_model", False):  # scripts without the flag only log
            from cleanrl_utils.huggingface import UploadError, push_to_hub

            self.writer.flush()  # the uploaded event file then holds the evaluation too
            try:
                run_dir, videos = f"runs/{self.run_name}", f"videos/{self.run_name}-eval"
                push_to_hub(self.args, list(episodic_returns), hub_algorithm_name, run_dir, videos, self.script_file)
            except UploadError as e:
                self.fail(str(e))


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


def extra_for(env_id: str) -> str:
    """The pyproject extra that installs what `env_id` needs ("all" when unknown).

    Known from the registered entry point, or else from the id's namespace (`dm_control/...`,
    `ALE/...`), which is all there is when the package that registers those ids is missing.
    """
    env_id = env_id.split(":")[-1]
    entry_point = str(getattr(gym.registry.get(env_id), "entry_point", ""))
    namespace = env_id.split("/")[0] if "/" in env_id else None
    return next((extra for family, extra in ENV_EXTRAS.items() if family in entry_point or family == namespace), "all")
