"""What the side-by-side benchmark scripts share: one-thread runs, the queue of learning runs, summaries.

A benchmark's learning runs go through the project's runner (`cleanrl_utils.benchmark.LocalRunner`, the
engine of `python -m cleanrl_utils.benchmark`), `--workers` at a time, each in a folder of its own with its
log under `<out>/logs/<summary name>.log`. A run is done once its summary file holds a whole JSON document: summaries
are written to a temporary file and renamed into place (`write_result`), so a benchmark killed mid-write leaves none. A
stopped benchmark started again runs what is not done: runs that write checkpoints go on from their newest one, the
others start over.
"""

import argparse
import datetime
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.benchmark import LocalRunner, RunSpec
from cleanrl_utils.report import last_mean
from cleanrl_utils.runtime import atomic
from cleanrl_utils.tensorboard_reader import read_scalars, read_wall_times

REPO = Path(__file__).resolve().parents[1]
# Stable-Baselines3 configured like our scripts: the other side of the head-to-head comparisons
SB3_BASELINES = REPO / "benchmark" / "compare" / "sb3_baselines.py"


ONE_XLA_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def one_thread_env() -> dict[str, str]:
    """One torch/BLAS/XLA thread per run: on a 2-core machine two queues then share it without oversubscribing."""
    return os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": ONE_XLA_THREAD, "MUJOCO_GL": "egl"}


def torch_threads_env(threads: int) -> dict[str, str]:
    """`one_thread_env` with `threads` torch/BLAS threads (2 for one run alone on a 2-core machine)."""
    return one_thread_env() | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def one_thread_sps(script: str, args: Sequence[str]) -> float:
    """The last `charts/SPS` of one run of `cleanrl/<script>.py ARGS` on one torch thread, in a folder of its own.

    A failed run ends the calling study with one line and the run's last stderr."""
    with tempfile.TemporaryDirectory(prefix=f"{script}-sps-") as tmp:
        argv = [sys.executable, str(REPO / "cleanrl" / f"{script}.py"), *args]
        env = torch_threads_env(1) | {"PYTHONPATH": str(REPO)}
        proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{Path(sys.argv[0]).stem}: error: {script}.py failed:\n{proc.stderr[-2000:]}")
        return next(read_scalars(d)["charts/SPS"][-1][1] for d in (Path(tmp) / "runs").iterdir())


# glibc hands every allocation above 32 MiB straight back to the kernel, so a CNN whose minibatch
# activations are hundreds of MiB (ppo_procgen: 2048 frames) page-faults them in again on each pass:
# on 2 cores half its update time was system time. Raising the thresholds keeps that memory in the
# heap; measured: the ppo_procgen update ran 2x faster, the same arithmetic.
KEEP_LARGE_ALLOCATIONS = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184"


def keep_large_allocations(env: dict[str, str]) -> dict[str, str]:
    """`env` with glibc told to reuse large freed blocks instead of returning them to the kernel."""
    tunables = ":".join(filter(None, [env.get("GLIBC_TUNABLES", ""), KEEP_LARGE_ALLOCATIONS]))
    return env | {"GLIBC_TUNABLES": tunables}


@dataclass(frozen=True)
class QueuedRun:
    """One learning run of a benchmark: `program` with `args`, then `--env-id` and `--seed` as the runner adds them."""

    result: Path  # its summary: the run is done once this file holds a whole JSON document
    program: tuple[str, ...]  # after `python`: a cleanrl/ script, another program (sb3_baselines.py), `-m torch...`
    args: tuple[str, ...]
    env_id: str
    seed: int
    checkpoint_every: int = 0  # with checkpoints (in the script's unit), a stopped run is resumed
    # writes `result` from the run's folder after a successful run (None: the program writes it itself)
    summarize: Callable[[Path], None] | None = None

    @property
    def workdir(self) -> Path:
        return self.result.with_suffix("")


def positive_int(text: str) -> int:
    """argparse's type for a count of at least 1 (workers, threads, rounds, games): 0 workers would wait forever."""
    value = int(text)  # not a number: argparse's own "invalid positive_int value" line
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def check_only(parser: argparse.ArgumentParser, only: list[str] | None, known: Iterable[str]) -> None:
    """Stop with argparse's one-line error (exit 2) when a name given to --only selects nothing: a typo would
    otherwise run nothing and succeed."""
    names = set(known)
    if unknown := [name for name in only or () if name not in names]:
        parser.error(f"--only {' '.join(unknown)}: not a name this benchmark knows; one of: {' '.join(sorted(names))}")


Command = Callable[[argparse.Namespace], int | None]  # a command's work: an exit code, or None to go on


class CommandLine:
    """A benchmark script's command line: `python -m benchmark.<kind>.<name> COMMAND [options]`, with `--out`, the
    folder of its runs and summaries (`benchmark_runs/<name>` by default), and `--only` where `only_help` says
    what it selects; each script adds its own options to `parser`."""

    def __init__(self, doc: str, name: str, commands: dict[str, Command], only_help: str | None = None) -> None:
        self.commands = commands
        self.parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
        self.parser.add_argument("command", choices=list(commands))
        self.parser.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / name)
        if only_help is not None:
            self.parser.add_argument("--only", nargs="+", help=only_help)

    def count(self, flag: str, default: int, help: str) -> None:
        """An option that takes a count of at least 1 (workers, rounds, threads, games, seeds)."""
        self.parser.add_argument(flag, type=positive_int, default=default, help=help)

    def parse(self, only: dict[str, Iterable[str]] | None = None) -> argparse.Namespace:
        """The arguments, refused with one line (exit 2) when `--only` names what the command does not know
        (`only`: the names each command's --only may select)."""
        args = self.parser.parse_args()
        if only and args.command in only:
            check_only(self.parser, args.only, only[args.command])
        return args

    def run(self, args: argparse.Namespace) -> None:
        """Do the command; exit with its code when it gives one (a queue of runs), return when it gives None."""
        if (code := self.commands[args.command](args)) is not None:
            sys.exit(code)


def queue_command(
    runs: Callable[[argparse.Namespace], list[QueuedRun]], env: Callable[[argparse.Namespace], dict[str, str]] | None = None
) -> Command:
    """The command that runs what `runs` selects and is not done yet, `--workers` at a time, in `env` (by default
    `one_thread_env`), its logs under `--out`/logs: the exit code is the queue's."""
    return lambda args: run_queue(runs(args), args.workers, env(args) if env else one_thread_env(), args.out / "logs")


def report_command(report: Callable[[Path], str]) -> Command:
    """The command that prints `report` of the runs under `--out`."""
    return lambda args: print(report(args.out))


def script(name: str) -> tuple[str, ...]:
    """The program of a run of `cleanrl/<name>.py`."""
    return (str(REPO / "cleanrl" / f"{name}.py"),)


def run_queue(runs: list[QueuedRun], workers: int, env: dict[str, str], log_dir: Path) -> int:
    """Every run not done yet, through the runner, `workers` at a time; each summarised as it ends. The exit code."""
    pending = [run for run in runs if not is_done(run.result)]
    specs = []
    for index, run in enumerate(pending):
        run.workdir.mkdir(parents=True, exist_ok=True)
        if not run.checkpoint_every:
            discard_stopped_attempt(run.workdir)
        args = resumable_args(run.workdir, list(run.args), run.checkpoint_every) if run.checkpoint_every else list(run.args)
        argv = [sys.executable, *run.program, *args, "--env-id", run.env_id, "--seed", str(run.seed)]
        specs.append(RunSpec(index, run.env_id, run.seed, argv, cwd=run.workdir, name=run.result.stem))
        print(f"queued: {shlex.join(argv[1:])}", flush=True)

    def summarize(spec: RunSpec) -> None:
        run = pending[spec.index]
        if run.summarize is not None:
            run.summarize(newest_run_dir(run.workdir))

    log_dir.mkdir(parents=True, exist_ok=True)
    env = env | {"PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]), "PYTHONUNBUFFERED": "1"}
    runner = LocalRunner(specs, workers, log_dir, env, on_success=summarize)
    runner.install_signal_handlers()
    return runner.run()


def discard_stopped_attempt(workdir: Path) -> None:
    """Remove what a stopped attempt of a run without checkpoints logged under `workdir/runs`: the run starts over,
    and its same seed logs those steps again, while a partial run left beside the new one would be read as one
    more seed by whatever reads the folder (rlops, reports)."""
    stopped = workdir / "runs"
    if stopped.is_dir() and any(stopped.iterdir()):
        shutil.rmtree(stopped)
        print(f"starting over (no checkpoints): removed the stopped attempt's logs in {stopped}", flush=True)


def tree_commit(tree: Path = REPO, paths: Sequence[str] = ()) -> str:
    """The commit of the checkout at `tree` (short hash), with `-dirty` when tracked files (only those under `paths`,
    when given) have uncommitted edits."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode:
        return "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", *paths).stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def this_command() -> str:
    """The command line of this process as run from the repository's root: `python -m benchmark.x.y ARGS` for a
    benchmark script (`python -m` gives its file's path as argv[0]), `python PATH ARGS` for any other program."""
    program = Path(sys.argv[0]).resolve()
    if program.is_relative_to(REPO / "benchmark") and program.suffix == ".py":
        module = ".".join(program.relative_to(REPO).with_suffix("").parts)
        return shlex.join(["python", "-m", module, *sys.argv[1:]])
    shown = program.relative_to(REPO).as_posix() if program.is_relative_to(REPO) else sys.argv[0]
    return shlex.join(["python", shown, *sys.argv[1:]])


def measured_at(command: str) -> str:
    """The line a file of benchmark/results/ opens with: which code made it, when (UTC) and with what command."""
    return f"Measured at commit {tree_commit()} on {datetime.datetime.now(datetime.UTC).date().isoformat()} with `{command}`"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table as the reports write them: `header`, its rule, then a line per row (cells as str() gives them)."""

    def line(cells: Sequence[object]) -> str:
        return f"| {' | '.join(map(str, cells))} |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def speed_cells(rates: list[float]) -> list[str]:
    """A speed table's cells for rounds of one run: their median, then each round's rate."""
    return [f"{statistics.median(rates):.0f}", ", ".join(f"{rate:.0f}" for rate in rates)]


def write_result(result: Path, summary: dict) -> None:
    """Write a summary as JSON, whole or not at all (temporary file, then rename): its existence means done."""
    atomic.write_text(result, json.dumps(summary))


def is_done(result: Path) -> bool:
    """Whether a run's summary is there and whole; a truncated one (from a writer that was not atomic) is redone."""
    if not result.exists():
        return False
    try:
        json.loads(result.read_text())
    except (ValueError, OSError):
        print(f"redoing {result.stem}: its summary {result} is not a whole JSON file", flush=True)
        return False
    return True


Scalars = dict[str, list[tuple[int, float]]]  # a run's logged values by tag, as read_scalars returns them


def summarize_run(
    run_dir: Path,
    result: Path,
    tag: str | None = "charts/episodic_return",
    extra: Callable[[Path, Scalars], dict] | None = None,
    **identity: object,
) -> dict:
    """Write `result` and return it: `identity`, the last logged SPS, every value of `tag` (as
    `episodic_returns`; None: no such list), then what `extra` reads from the run's folder and scalars (a
    check's own measures: evaluation scores, places visited, episode lengths).

    `tag` is each finished episode's return, or for the XLA files (`charts/avg_episodic_return`) the mean
    of every env's last finished game, logged once per iteration. A run that logged none of them (or no
    SPS) has nothing to compare: a ValueError, which the runner reports as that run's failure.
    """
    scalars = read_scalars(run_dir)
    for needed in (tag, "charts/SPS"):
        if needed is not None and not scalars.get(needed):
            raise ValueError(f"{run_dir} logged no {needed} (logged: {', '.join(sorted(scalars)) or 'nothing'})")
    summary = identity | {"sps": scalars["charts/SPS"][-1][1]}
    if tag is not None:
        summary["episodic_returns"] = [value for _, value in scalars[tag]]
    if extra is not None:
        summary |= extra(run_dir, scalars)
    write_result(result, summary)
    return summary


SpeedRun = Callable[[Path], tuple[QueuedRun, dict[str, str]]]  # result file -> (the run, its environment)


def speed_rounds(out: Path, rounds: int, runs: dict[str, SpeedRun], only: list[str] | None, program: str) -> None:
    """Each speed run `rounds` times, one at a time, interleaved so that a drift of the machine's speed hits all
    alike; a round with its `speed__<name>__<round>.json` is done. A failed run stops `program` with one line."""
    out.mkdir(parents=True, exist_ok=True)
    for round_ in range(1, rounds + 1):
        for name, make_run in runs.items():
            result = out / f"speed__{name}__{round_}.json"
            if (only and name not in only) or result.exists():
                continue
            print(f"speed: {name} round {round_}", flush=True)
            run, env = make_run(result)
            if run_queue([run], 1, env, out / "logs"):
                raise SystemExit(f"{program}: error: the speed run {name} failed (log under {out / 'logs'})")
            print(f"speed: {name} round {round_}: {json.loads(result.read_text())['sps']:.0f} steps/s", flush=True)


def record_random_policy(out: Path, env_ids: Iterable[str], games: int, play: Callable[[str, int], list]) -> None:
    """Each env's random-policy scores, played once (`play(env_id, games)` gives (score, ...) per game) and kept
    in `out/random__<env id>.json`: the floor a learning check is measured against."""
    out.mkdir(parents=True, exist_ok=True)
    for env_id in env_ids:
        result = out / f"random__{env_id}.json"
        if not result.exists():
            scores = [game[0] for game in play(env_id, games)]
            write_result(result, {"env_id": env_id, "episodic_returns": scores})
            print(f"random {env_id}: {statistics.fmean(scores):.2f} over {games} games")


def random_policy_means(out: Path) -> dict[str, float]:
    """The mean random-policy score of each env `record_random_policy` played into `out`."""
    return {
        p.name.removeprefix("random__").removesuffix(".json"): statistics.fmean(json.loads(p.read_text())["episodic_returns"])
        for p in out.glob("random__*.json")
    }


def recorded_speeds(out: Path, name: str, kind: str = "speed") -> list[float]:
    """The steps per second of every round of the speed run `name`, as `<kind>__<name>__<round>.json` holds them."""
    return [json.loads(p.read_text())["sps"] for p in sorted(out.glob(f"{kind}__{name}__*.json"))]


def summarize_speed(
    run_dir: Path, result: Path, first_update: int = 0, warm_up: float | None = None, **identity: object
) -> dict:
    """Write `result` and return it: `identity`, a speed run's steady steps per second after the interval that
    holds its first update (at step `first_update`) and that interval's extra seconds (`warm_up` when the run
    measured its own, e.g. a JAX file's compile time), from the wall times of its SPS logs."""
    rate, extra = steady_rate(read_wall_times(run_dir, "charts/SPS"), first_update)
    summary = identity | {"sps": rate, "first_update_extra_s": extra if warm_up is None else warm_up}
    write_result(result, summary)
    return summary


def newest_run_dir(workdir: Path) -> Path:
    """The run folder a script wrote last under `workdir/runs` (env ids with a namespace nest one level deeper)."""
    candidates = [p for p in (workdir / "runs").rglob("*") if p.is_dir() and any(p.glob("events.out.tfevents.*"))]
    return max(candidates, key=lambda p: p.stat().st_mtime_ns)


def resumable_args(workdir: Path, args: list[str], checkpoint_every: int) -> list[str]:
    """A check's arguments for a run that writes checkpoints, or `--resume` for one stopped under `workdir`.

    A resumed run takes its other arguments from its checkpoint.
    """
    from cleanrl_utils.runtime import checkpoint as ckpt

    stopped = [run for run in sorted((workdir / "runs").glob("*")) if ckpt.checkpoints(run / ckpt.CHECKPOINT_DIR)]
    if stopped:
        return ["--resume", str(stopped[-1].relative_to(workdir))]
    return [*args, "--checkpoint-frequency", str(checkpoint_every)]


def result_last_mean(result: Path, last: int) -> float:
    """The mean return of the last `last` episodes in a result file written by `summarize_run`."""
    returns = json.loads(result.read_text())["episodic_returns"]
    return last_mean(list(enumerate(returns)), last)  # summarize_run keeps the returns, not their steps


def steady_rate(log_times: list[tuple[int, float]], first_update: int) -> tuple[float, float]:
    """(steps per second after the interval holding the first update, that interval's extra seconds).

    `log_times` are (step, wall time) of the periodic SPS logs. The extra seconds are the interval's
    duration minus the median duration of the later intervals, scaled to its number of steps.
    """
    after = [i for i, (step, _) in enumerate(log_times) if step > first_update]
    if len(after) < 3:
        raise ValueError(f"too few logs after step {first_update} to measure a steady rate")
    start = after[0]  # the log that closes the interval in which the first update ran
    (step0, t0), (step1, t1) = log_times[start], log_times[-1]
    rate = (step1 - step0) / (t1 - t0)
    prev_step, prev_t = log_times[start - 1] if start > 0 else (0, t0)
    seconds_per_step = statistics.median(
        (b_t - a_t) / (b_s - a_s) for (a_s, a_t), (b_s, b_t) in zip(log_times[start:], log_times[start + 1 :])
    )
    extra = (t0 - prev_t) - (step0 - prev_step) * seconds_per_step
    return rate, max(extra, 0.0)
