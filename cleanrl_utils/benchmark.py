"""Run one training command for several environments and seeds, a few at a time.

    python -m cleanrl_utils.benchmark --env-ids CartPole-v1 Acrobot-v1 \\
        --command "python cleanrl/ppo.py --no-cuda" --num-seeds 3 --workers 2

builds `<command> --env-id E --seed S` for every seed (outer loop) and environment (inner
loop). With `--workers 0` it only prints these commands, one per line; otherwise it runs them
as local subprocesses, at most `--workers` at a time, each writing its output to its own log
file, and reports progress on stderr. The exit code is 0 when every run succeeded, 1 when
any failed, 2 on bad input, and 128 + the signal number when interrupted.

The command string is split with `shlex` (quotes work as in a shell) and run without a shell:
pipes, `&&` and `VAR=value` prefixes are not interpreted; set environment variables on the
benchmark command itself instead, the runs inherit them.

With `--slurm-template-path` the runs go to Slurm instead: the template is filled in to a job-array
script with one array task per (environment, seed), written to `slurm/<uuid>.slurm`, and submitted
with `sbatch` (at most `--workers` tasks at a time). With `--workers 0` the script is only written.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Annotated

import tyro

POLL_SECONDS = 0.1
PROGRESS_EVERY_SECONDS = 10.0
# How long stopped runs get to exit after SIGTERM before their process groups are killed.
STOP_GRACE_SECONDS = 5.0
FAILURE_TAIL_LINES = 20
DEFAULT_LOG_ROOT = "benchmark_logs"
SLURM_DIR = Path("slurm")
SLURM_LOG_DIR = SLURM_DIR / "logs"
SBATCH_TIMEOUT_SECONDS = 120


@dataclass
class Args:
    """Run `<command> --env-id E --seed S` for every environment and seed, locally and a few at a time."""

    env_ids: list[str]
    """environments to run (space-separated)"""
    command: str
    """training command, quoted, e.g. "python cleanrl/ppo.py --no-cuda" """
    num_seeds: int = 3
    """seeds per environment"""
    start_seed: int = 1
    """first seed; seeds are start-seed ... start-seed + num-seeds - 1"""
    workers: int = 0
    """runs at a time; 0 only prints the commands (with a Slurm template: array tasks at a time; 0 only writes the script)"""
    auto_tag: bool = True
    """append the git tag (or commit) of the current folder to the runs' WANDB_TAGS"""
    log_dir: Annotated[
        str | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="(default: a new benchmark_logs/<date>-<time>)")
    ] = None
    """folder for the runs' log files"""
    slurm_template_path: Annotated[str | None, tyro.conf.arg(metavar="PATH")] = None
    """Slurm job-array template (e.g. benchmark/cleanrl_cpu.slurm_template); submits the runs to Slurm instead of running them here"""
    slurm_gpus_per_task: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """GPUs per Slurm task (fills the template's gpus_per_task)"""
    slurm_total_cpus: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """CPUs of a job, spread over its GPUs (fills cpus_per_gpu with total-cpus / (gpus-per-task * ntasks), rounded up)"""
    slurm_ntasks: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """Slurm tasks per array task (fills ntasks; srun starts the command once per task)"""
    slurm_nodes: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """nodes per array task (fills nodes with an `#SBATCH --nodes` line; left empty when not given)"""


class BadInput(Exception):
    """A problem reported as one `benchmark: error:` line and exit code 2: bad input, or Slurm refusing the job."""


@dataclass(frozen=True)
class RunSpec:
    """One run of the benchmark: the training command for one environment and seed."""

    index: int
    env_id: str
    seed: int
    argv: list[str]

    @property
    def command(self) -> str:
        """The command as a line a shell would split back into `argv`."""
        return shlex.join(self.argv)

    @property
    def log_name(self) -> str:
        # Env ids may hold characters that do not belong in file names (e.g. "ALE/Pong-v5").
        safe_env_id = re.sub(r"[^A-Za-z0-9._-]", "_", self.env_id)
        return f"{self.index:03d}__{safe_env_id}__seed{self.seed}.log"


@dataclass
class Outcome:
    """What became of a run that was started: its exit code (None when stopped by the benchmark)."""

    spec: RunSpec
    log_path: Path
    returncode: int | None
    seconds: float


def parse_command(command: str, check_program: bool = True) -> list[str]:
    """Split the `--command` string as a shell would and (optionally) check that its program exists here."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise BadInput(f"cannot split --command {command!r}: {error}") from None
    if not argv:
        raise BadInput("--command is empty")
    if not check_program:
        return argv
    program = argv[0]
    if os.sep in program:
        found = Path(program).is_file() and os.access(program, os.X_OK)
    else:
        found = shutil.which(program) is not None
    if not found:
        raise BadInput(f"cannot find the program {program!r} of --command (not an executable file or not on PATH)")
    return argv


def validate(args: Args) -> list[str]:
    """Check the arguments; returns the command split into words."""
    if not args.env_ids:
        raise BadInput("--env-ids needs at least one environment id")
    if args.num_seeds <= 0:
        raise BadInput(f"--num-seeds must be positive, got {args.num_seeds}")
    if args.workers < 0:
        raise BadInput(f"--workers must be 0 (only print the commands) or more, got {args.workers}")
    if args.slurm_template_path is None:
        given = [flag for flag, value in slurm_flags(args).items() if value is not None]
        if given:
            raise BadInput(f"{given[0]} is a Slurm option: it needs --slurm-template-path")
        return parse_command(args.command)
    if args.log_dir is not None:
        raise BadInput("--log-dir is for local runs; Slurm writes the logs where the template's --output says")
    for flag, value in slurm_flags(args).items():
        if value is not None and value <= 0:
            raise BadInput(f"{flag} must be positive, got {value}")
    # The program only has to exist on the compute nodes, which may differ from this machine.
    return parse_command(args.command, check_program=False)


def slurm_flags(args: Args) -> dict[str, int | None]:
    """The numeric Slurm options by flag name, as given (None when not)."""
    return {
        "--slurm-gpus-per-task": args.slurm_gpus_per_task,
        "--slurm-total-cpus": args.slurm_total_cpus,
        "--slurm-ntasks": args.slurm_ntasks,
        "--slurm-nodes": args.slurm_nodes,
    }


def seeds(args: Args) -> list[int]:
    return list(range(args.start_seed, args.start_seed + args.num_seeds))


def build_runs(base_argv: list[str], env_ids: list[str], run_seeds: list[int]) -> list[RunSpec]:
    """One run per (seed, env id): seeds in the outer loop, environments in the inner one."""
    pairs = [(env_id, seed) for seed in run_seeds for env_id in env_ids]
    return [
        RunSpec(index, env_id, seed, [*base_argv, "--env-id", env_id, "--seed", str(seed)])
        for index, (env_id, seed) in enumerate(pairs)
    ]


def _git(*git_args: str) -> str | None:
    """Output of a git command in the current folder, or None when it fails (no git, no repo, no tag)."""
    try:
        proc = subprocess.run(["git", *git_args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_tag() -> str | None:
    """The nearest git tag of HEAD, or `no-tag-<commit count>-g<short hash>` when there is none.

    Unlike the reference project, the pull request number is not looked up: that needs GitHub's API.
    """
    described = _git("describe", "--tags")
    if described:
        return described
    count, short_hash = _git("rev-list", "--count", "HEAD"), _git("rev-parse", "--short", "HEAD")
    if count is None or short_hash is None:
        return None
    return f"no-tag-{count}-g{short_hash}"


def append_tag(existing: str | None, tag: str) -> str:
    """`WANDB_TAGS` is comma-separated; keep what the user set and add ours."""
    return f"{existing},{tag}" if existing else tag


def tagged_wandb_tags(existing: str | None) -> str | None:
    """`existing` WANDB_TAGS with the git tag appended; None (after a warning) when there is no tag."""
    tag = git_tag()
    if tag is None:
        print("benchmark: warning: the current folder is not a git repository with commits; runs get no tag", file=sys.stderr)
        return None
    tags = append_tag(existing, tag)
    print(f"benchmark: tagging runs with {tag} (WANDB_TAGS={tags})", file=sys.stderr)
    return tags


def run_environment(auto_tag: bool) -> dict[str, str]:
    """Environment for the runs: ours, plus the auto-tag, and unbuffered Python so logs can be followed live."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if auto_tag:
        tags = tagged_wandb_tags(env.get("WANDB_TAGS"))
        if tags is not None:
            env["WANDB_TAGS"] = tags
    return env


def new_log_dir(requested: str | None) -> Path:
    """The requested folder, or a fresh timestamped one under benchmark_logs/ that no earlier benchmark used."""
    if requested is not None:
        path = Path(requested)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise BadInput(f"cannot create --log-dir {requested!r}: {error}") from None
        return path
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        path = Path(DEFAULT_LOG_ROOT) / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise BadInput(f"cannot create a new log folder under {DEFAULT_LOG_ROOT}/")


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def estimate_time_left(finished_seconds: list[float], running_elapsed: list[float], queued: int, workers: int) -> float | None:
    """Rough time left: the mean duration of finished runs for each run still to do, shared among the workers.

    Runs already going are counted for what is left of a mean run. None until a run has finished.
    """
    if not finished_seconds:
        return None
    mean = sum(finished_seconds) / len(finished_seconds)
    remaining = len(running_elapsed) + queued
    if remaining == 0:
        return 0.0
    work_left = queued * mean + sum(max(mean - elapsed, 0.0) for elapsed in running_elapsed)
    return work_left / min(workers, remaining)


def log_tail(path: Path, lines: int = FAILURE_TAIL_LINES) -> list[str]:
    """The last lines of a log file, reading only its end (training logs can be long)."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(log.tell() - 64 * 1024, 0))
            text = log.read().decode(errors="replace")
    except OSError as error:
        return [f"(cannot read the log: {error})"]
    return text.splitlines()[-lines:]


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "stopped by the benchmark"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def process_group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class _Running:
    spec: RunSpec
    process: subprocess.Popen
    log_path: Path
    started: float


class LocalRunner:
    """Runs the commands as local subprocesses, at most `workers` at a time.

    Each run starts in its own session (so its own process group): a Ctrl-C at the terminal
    reaches only the runner, which then stops every run together with whatever it started.
    """

    def __init__(self, runs: list[RunSpec], workers: int, log_dir: Path, env: dict[str, str]):
        self.queue = deque(runs)
        self.total = len(runs)
        self.workers = workers
        self.log_dir = log_dir
        self.env = env
        self.running: dict[int, _Running] = {}
        self.outcomes: list[Outcome] = []
        self.signals: list[int] = []
        self.started = time.monotonic()
        self._last_progress: tuple[int, ...] | None = None
        self._last_progress_time = 0.0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only note it: the main loop stops the runs at a point where its bookkeeping is consistent.
        self.signals.append(signum)

    def install_signal_handlers(self) -> None:
        # Set explicitly: a runner started in the background by a script inherits SIGINT ignored.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)

    def run(self) -> int:
        """Run everything; returns the exit code for the benchmark."""
        print(
            f"benchmark: {self.total} runs, up to {self.workers} at a time, logs in {self.log_dir}/",
            file=sys.stderr,
        )
        try:
            while self.queue or self.running:
                if self.signals:
                    return self._stop(self.signals[0])
                self._collect_finished()
                while self.queue and len(self.running) < self.workers and not self.signals:
                    self._launch(self.queue.popleft())
                self._report_progress()
                time.sleep(POLL_SECONDS)
        finally:
            # Never leave runs behind, whatever made the loop end.
            for run in self.running.values():
                signal_group(run.process.pid, signal.SIGKILL)
                run.process.wait()
        return self._final_report()

    def _launch(self, spec: RunSpec) -> None:
        log_path = self.log_dir / spec.log_name
        try:
            log = log_path.open("w")
        except OSError as error:  # e.g. the log folder was removed mid-benchmark: this run fails, the rest go on
            print(f"benchmark: cannot write the log of {spec.command}: {error}", file=sys.stderr)
            self.outcomes.append(Outcome(spec, log_path, 127, 0.0))
            return
        with log:
            log.write(f"$ {spec.command}\n")
            log.flush()
            try:
                process = subprocess.Popen(
                    spec.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            except OSError as error:
                log.write(f"benchmark: could not start the command: {error}\n")
                self.outcomes.append(Outcome(spec, log_path, 127, 0.0))
                return
        self.running[process.pid] = _Running(spec, process, log_path, time.monotonic())

    def _collect_finished(self) -> None:
        for pid, run in list(self.running.items()):
            returncode = run.process.poll()
            if returncode is not None:
                del self.running[pid]
                self.outcomes.append(Outcome(run.spec, run.log_path, returncode, time.monotonic() - run.started))

    def _counts(self) -> tuple[int, int, int, int]:
        """Succeeded, failed, running and queued runs (runs stopped by the benchmark are in none of them)."""
        succeeded = sum(1 for outcome in self.outcomes if outcome.returncode == 0)
        failed = sum(1 for outcome in self.outcomes if outcome.returncode not in (0, None))
        return succeeded, failed, len(self.running), len(self.queue)

    def _report_progress(self) -> None:
        """A progress line when the counts change, and every few seconds while they do not."""
        counts = self._counts()
        now = time.monotonic()
        if counts == self._last_progress and now - self._last_progress_time < PROGRESS_EVERY_SECONDS:
            return
        self._last_progress, self._last_progress_time = counts, now
        succeeded, failed, running, queued = counts
        time_left = estimate_time_left(
            [outcome.seconds for outcome in self.outcomes],
            [now - run.started for run in self.running.values()],
            queued,
            self.workers,
        )
        left = "unknown" if time_left is None else f"~{format_duration(time_left)}"
        print(
            f"benchmark: {succeeded} done, {failed} failed, {running} running, {queued} queued"
            f" | elapsed {format_duration(now - self.started)}, time left {left}",
            file=sys.stderr,
            flush=True,
        )

    def _stop(self, signum: int) -> int:
        """Stop every run and its children: SIGTERM to each process group, SIGKILL to what is left after a grace period."""
        name = signal.Signals(signum).name
        stopping = list(self.running.values())
        print(f"benchmark: {name} received; stopping {len(stopping)} running runs", file=sys.stderr, flush=True)
        for run in stopping:
            signal_group(run.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        signals_seen = len(self.signals)
        # A second Ctrl-C means "now": skip the rest of the grace period.
        while time.monotonic() < deadline and len(self.signals) == signals_seen:
            for run in stopping:
                run.process.poll()
            if not any(process_group_exists(run.process.pid) for run in stopping):
                break
            time.sleep(POLL_SECONDS)
        for run in stopping:
            # Also reaches children still alive after their parent exited.
            signal_group(run.process.pid, signal.SIGKILL)
        for run in stopping:
            run.process.wait()
            self.outcomes.append(Outcome(run.spec, run.log_path, None, time.monotonic() - run.started))
        self.running.clear()

        for run in stopping:
            print(f"benchmark: stopped: {run.spec.command}  (log: {run.log_path})", file=sys.stderr)
        succeeded, failed, _, queued = self._counts()
        print(
            f"benchmark: interrupted after {format_duration(time.monotonic() - self.started)}: {succeeded} done,"
            f" {failed} failed, {len(stopping)} stopped, {queued} never started (of {self.total})",
            file=sys.stderr,
        )
        return 128 + signum

    def _final_report(self) -> int:
        failures = [outcome for outcome in self.outcomes if outcome.returncode not in (0, None)]
        for number, outcome in enumerate(failures, start=1):
            print(f"\nbenchmark: failed run {number}/{len(failures)}: {describe_exit(outcome.returncode)}", file=sys.stderr)
            print(f"  command: {outcome.spec.command}", file=sys.stderr)
            print(f"  log: {outcome.log_path}", file=sys.stderr)
            print("  last lines of the log:", file=sys.stderr)
            for line in log_tail(outcome.log_path):
                print(f"  | {line}", file=sys.stderr)
        succeeded = len(self.outcomes) - len(failures)
        print(
            f"benchmark: finished {self.total} runs in {format_duration(time.monotonic() - self.started)}:"
            f" {succeeded} succeeded, {len(failures)} failed; logs in {self.log_dir}/",
            file=sys.stderr,
        )
        return 1 if failures else 0


def print_commands(runs: list[RunSpec]) -> None:
    for run in runs:
        print(run.command)


# --- Slurm ---------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")
PLACEHOLDERS = ("array", "env_ids", "seeds", "len_seeds", "command", "gpus_per_task", "cpus_per_gpu", "ntasks", "nodes")
# The flags a placeholder cannot be filled without; placeholders not listed need none.
PLACEHOLDER_FLAGS = {
    "gpus_per_task": ("--slurm-gpus-per-task",),
    "cpus_per_gpu": ("--slurm-total-cpus", "--slurm-gpus-per-task", "--slurm-ntasks"),
    "ntasks": ("--slurm-ntasks",),
    "nodes": ("--slurm-nodes",),
}
# `nodes` may stay empty: the template then simply gets no `#SBATCH --nodes` line.
OPTIONAL_PLACEHOLDERS = {"nodes"}
# Without these the script would not be a job array that runs the command.
REQUIRED_PLACEHOLDERS = ("array", "command")


@dataclass(frozen=True)
class SlurmArray:
    """What the job array runs: `command --env-id E --seed S` for every environment E and seed S."""

    env_ids: list[str]
    seeds: list[int]
    base_argv: list[str]
    workers: int

    @property
    def size(self) -> int:
        return len(self.env_ids) * len(self.seeds)


def bash_array(words: list[str]) -> str:
    """A bash array literal whose elements come back exactly as given, whatever characters they hold."""
    return "(" + " ".join(shlex.quote(word) for word in words) + ")"


def cpus_per_gpu(total_cpus: int, gpus_per_task: int, ntasks: int) -> int:
    """The job's CPUs shared among all of its GPUs, rounded up so that no CPU is left out."""
    return -(-total_cpus // (gpus_per_task * ntasks))


def placeholder_values(array: SlurmArray, flags: dict[str, int | None]) -> dict[str, str | None]:
    """The text for each placeholder; None where a flag it needs was not given."""
    gpus, total, ntasks, nodes = (
        flags[flag] for flag in ("--slurm-gpus-per-task", "--slurm-total-cpus", "--slurm-ntasks", "--slurm-nodes")
    )
    # With no concurrency limit (a dry run) the array runs as many tasks at once as Slurm allows.
    limit = f"%{array.workers}" if array.workers > 0 else ""
    return {
        "array": f"0-{array.size - 1}{limit}",
        "env_ids": bash_array(array.env_ids),
        "seeds": bash_array([str(seed) for seed in array.seeds]),
        "len_seeds": str(len(array.seeds)),
        "command": shlex.join(array.base_argv),
        "gpus_per_task": None if gpus is None else str(gpus),
        "cpus_per_gpu": None if None in (total, gpus, ntasks) else str(cpus_per_gpu(total, gpus, ntasks)),
        "ntasks": None if ntasks is None else str(ntasks),
        "nodes": "" if nodes is None else f"#SBATCH --nodes={nodes}",
    }


def check_placeholders(template: str, template_name: str, flags: dict[str, int | None]) -> None:
    """Every placeholder in the template must be known and fillable from the flags given; warn about unused flags."""
    used = set(PLACEHOLDER.findall(template))
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        listed = ", ".join("{{" + name + "}}" for name in unknown)
        raise BadInput(f"{template_name} has unknown placeholders {listed} (known: {', '.join(PLACEHOLDERS)})")
    absent = [name for name in REQUIRED_PLACEHOLDERS if name not in used]
    if absent:
        listed = ", ".join("{{" + name + "}}" for name in absent)
        raise BadInput(f"{template_name} lacks {listed}: the job array could not run one task per environment and seed")
    lacking = {
        name: [flag for flag in PLACEHOLDER_FLAGS.get(name, ()) if flags[flag] is None]
        for name in sorted(used - OPTIONAL_PLACEHOLDERS)
    }
    lacking = {name: missing for name, missing in lacking.items() if missing}
    if lacking:
        names = ", ".join("{{" + name + "}}" for name in lacking)
        missing_flags = dict.fromkeys(flag for missing in lacking.values() for flag in missing)
        raise BadInput(f"{template_name} uses {names}: give {', '.join(missing_flags)}")
    useful = {flag for name in used for flag in PLACEHOLDER_FLAGS.get(name, ())}
    for flag, value in flags.items():
        if value is not None and flag not in useful:
            print(f"benchmark: warning: {template_name} does not use {flag}; ignoring it", file=sys.stderr)


def fill_placeholders(template: str, values: dict[str, str | None]) -> str:
    # One pass, so text put in (an env id or command holding braces) is never filled again.
    return PLACEHOLDER.sub(lambda match: values[match.group(1)] or "", template)


def add_exports(script: str, exports: dict[str, str]) -> str:
    """Export variables right after the script's leading comment block.

    sbatch reads `#SBATCH` lines only up to the first command, so the exports must not come earlier.
    """
    if not exports:
        return script
    lines = script.splitlines(keepends=True)
    header = 0
    while header < len(lines) and (not lines[header].strip() or lines[header].lstrip().startswith("#")):
        header += 1
    if header and not lines[header - 1].endswith("\n"):
        lines[header - 1] += "\n"
    block = [
        "# Set by cleanrl_utils.benchmark:\n",
        *(f"export {name}={shlex.quote(value)}\n" for name, value in exports.items()),
    ]
    return "".join([*lines[:header], *block, *lines[header:]])


def render_slurm_script(template: str, template_name: str, array: SlurmArray, flags: dict[str, int | None]) -> str:
    """The job-array script: the template with its placeholders filled (BadInput when it cannot be)."""
    check_placeholders(template, template_name, flags)
    return fill_placeholders(template, placeholder_values(array, flags))


def read_template(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise BadInput(f"cannot find the Slurm template {path!r}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"cannot read the Slurm template {path!r}: {error}") from None


def slurm_exports(auto_tag: bool) -> dict[str, str]:
    """Variables the script sets for its runs: the auto-tag, and unbuffered Python so the log files fill as runs go."""
    exports = {"PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}
    if auto_tag:
        tags = tagged_wandb_tags(os.environ.get("WANDB_TAGS"))
        if tags is not None:
            exports["WANDB_TAGS"] = tags
    return exports


def write_slurm_script(script: str) -> Path:
    """Save the script as slurm/<uuid4>.slurm, creating slurm/logs/ for the templates' log files on the way."""
    path = SLURM_DIR / f"{uuid.uuid4()}.slurm"
    try:
        SLURM_LOG_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
    except OSError as error:
        raise BadInput(f"cannot write the Slurm script {path}: {error}") from None
    return path


def find_sbatch() -> str:
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise BadInput(
            "cannot find sbatch on PATH (is Slurm installed here?); --workers 0 writes the script without submitting it"
        )
    return sbatch


def one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip()) or "(no output)"


def submit(sbatch: str, path: Path) -> str:
    """Submit the script; returns the job id."""
    try:
        proc = subprocess.run(
            [sbatch, "--parsable", str(path)], capture_output=True, text=True, timeout=SBATCH_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise BadInput(f"sbatch did not answer within {SBATCH_TIMEOUT_SECONDS} s; the script is {path}") from None
    except OSError as error:
        raise BadInput(f"cannot run sbatch: {error}") from None
    if proc.returncode != 0:
        raise BadInput(f"sbatch refused {path} (exit code {proc.returncode}): {one_line(proc.stderr)}")
    # --parsable prints "<job id>" or "<job id>;<cluster>".
    job_id = proc.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise BadInput(f"sbatch accepted {path} but printed no job id: {one_line(proc.stdout)}")
    return job_id


SBATCH_LOG_OPTION = re.compile(r"^#SBATCH\s+(?:--output|--error|-o|-e)(?:=|\s+)(\S+)", re.MULTILINE)


def log_paths(script: str, job_id: str) -> list[str]:
    """Where the array tasks' output goes, from the script's --output/--error lines (Slurm's default when none)."""
    patterns = SBATCH_LOG_OPTION.findall(script) or ["slurm-%A_%a.out"]
    return [pattern.replace("%A", job_id).replace("%a", "<task>") for pattern in patterns]


def describe_array(array: SlurmArray) -> str:
    return f"{array.size} array tasks ({len(array.env_ids)} environments x {len(array.seeds)} seeds)"


def run_slurm(args: Args, base_argv: list[str]) -> int:
    """Write the job-array script and, unless this is a dry run (--workers 0), submit it."""
    assert args.slurm_template_path is not None
    template = read_template(args.slurm_template_path)
    array = SlurmArray(list(args.env_ids), seeds(args), base_argv, args.workers)
    script = render_slurm_script(template, args.slurm_template_path, array, slurm_flags(args))
    # Before writing anything: a machine without Slurm gets no stray script.
    sbatch = find_sbatch() if args.workers > 0 else None
    script = add_exports(script, slurm_exports(args.auto_tag))
    path = write_slurm_script(script)
    if sbatch is None:
        print(path)
        print(
            f"benchmark: wrote {path}: {describe_array(array)}; not submitted (--workers 0)."
            f" Submit it with `sbatch {path}`, or rerun with --workers N to submit it with at most N tasks at a time",
            file=sys.stderr,
        )
        return 0
    job_id = submit(sbatch, path)
    print(job_id)
    print(
        f"benchmark: submitted {path} as job {job_id}: {describe_array(array)}, up to {args.workers} at a time\n"
        f"benchmark: follow it with `squeue -j {job_id}` or `scontrol show job {job_id}`"
        f" (`sacct -j {job_id}` once tasks finish, where accounting is on); cancel with `scancel {job_id}`\n"
        f"benchmark: logs: {', '.join(log_paths(script, job_id))} (<task> = array index 0-{array.size - 1})",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv)
    try:
        base_argv = validate(args)
        if args.slurm_template_path is not None:
            return run_slurm(args, base_argv)
        runs = build_runs(base_argv, args.env_ids, seeds(args))
        if args.workers == 0:
            print_commands(runs)
            return 0
        env = run_environment(args.auto_tag)
        log_dir = new_log_dir(args.log_dir)
    except BadInput as error:
        print(f"benchmark: error: {error}", file=sys.stderr)
        return 2
    runner = LocalRunner(runs, args.workers, log_dir, env)
    runner.install_signal_handlers()
    return runner.run()


if __name__ == "__main__":
    sys.exit(main())
