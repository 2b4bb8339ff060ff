"""The command line of `python -m cleanrl_utils.benchmark`: flags, checks, the list of runs, and the mode."""

import itertools
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from cleanrl_utils.benchmark.common import BadInput, RunSpec, git_tag, share_cores
from cleanrl_utils.benchmark.ledger import DirectoryLock, Ledger
from cleanrl_utils.benchmark.local import LocalRunner, new_log_dir, print_commands, run_environment
from cleanrl_utils.benchmark.slurm import SlurmArray, run_slurm
from cleanrl_utils.runtime.command_line import SEED_MAX, name_problems, parse_args


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
    """first seed; seeds are start-seed, start-seed + seed-stride, ... (num-seeds of them)"""
    seed_stride: int = 1
    """gap between seeds; give the scripts' --num-envs so that no two runs share a sub-env's seed (a vector env seeds sub-env i with seed + i)"""
    workers: int = 0
    """runs at a time; 0 only prints the commands (with a Slurm template: array tasks at a time; 0 only writes the script)"""
    auto_tag: bool = True
    """append the git tag (or commit) of the current folder to the runs' WANDB_TAGS"""
    log_dir: Annotated[
        str | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="(default: a new benchmark_logs/<date>-<time>)")
    ] = None
    """folder for the runs' log files; starting the benchmark again with the same folder continues it (skips the runs that finished, resumes the others)"""
    slurm_template_path: Annotated[str | None, tyro.conf.arg(metavar="PATH")] = None
    """Slurm job-array template (e.g. benchmark/slurm/cleanrl_cpu.slurm_template); submits the runs to Slurm instead of running them here"""
    slurm_gpus_per_task: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """GPUs per Slurm task (fills the template's gpus_per_task)"""
    slurm_total_cpus: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """CPUs of a job, spread over its GPUs (fills cpus_per_gpu with total-cpus / (gpus-per-task * ntasks), rounded up)"""
    slurm_ntasks: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """Slurm tasks per array task (fills ntasks; srun starts the command once per task)"""
    slurm_nodes: Annotated[int | None, tyro.conf.arg(metavar="N")] = None
    """nodes per array task (fills nodes with an `#SBATCH --nodes` line; left empty when not given)"""


def parse_command(command: str, check_program: bool = True) -> list[str]:
    """Split the `--command` string as a shell would and (optionally) check that its program exists here."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise BadInput(f"cannot split --command {command!r}: {error}") from None
    if not argv:
        raise BadInput("--command is empty")
    if any(word == "--resume" or word.startswith("--resume=") for word in argv):
        # every run would resume the one folder; the runner adds --resume itself where a run is continued
        raise BadInput("--command must not hold --resume: to continue a benchmark, start it again with the same --log-dir")
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
    if repeated := sorted({env_id for env_id in args.env_ids if args.env_ids.count(env_id) > 1}):
        # runs of one env and seed would share a name: their logs mixed, one's model over the other's
        raise BadInput(f"--env-ids names {', '.join(repeated)} more than once")
    for env_id in args.env_ids:  # each becomes a run's --env-id: refused here rather than by every run
        if problems := name_problems({"env_id": env_id}):
            raise BadInput(problems[0].replace("--env-id", "--env-ids"))
    if args.num_seeds <= 0:
        raise BadInput(f"--num-seeds must be positive, got {args.num_seeds}")
    if args.seed_stride <= 0:
        raise BadInput(f"--seed-stride must be positive, got {args.seed_stride}")
    if args.start_seed + (args.num_seeds - 1) * args.seed_stride > SEED_MAX:
        raise BadInput(f"the last seed, --start-seed + (--num-seeds - 1) * --seed-stride, must be at most {SEED_MAX}")
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
    return list(range(args.start_seed, args.start_seed + args.num_seeds * args.seed_stride, args.seed_stride))


def build_runs(base_argv: list[str], env_ids: list[str], run_seeds: list[int]) -> list[RunSpec]:
    """One run per (env id, seed), in the order the local runner starts them.

    Run `i` is what Slurm's array task `i` runs (`slurm.py`): environment `i // len(seeds)` with seed
    `i % len(seeds)`, so a run's number and log name mean the same in both modes. Locally the runs
    start seed by seed (every environment's first seed, then the second...), so a benchmark stopped
    early still covers every environment.
    """
    runs = [
        RunSpec(index, env_id, seed, [*base_argv, "--env-id", env_id, "--seed", str(seed)])
        for index, (env_id, seed) in enumerate(itertools.product(env_ids, run_seeds))
    ]
    return sorted(runs, key=lambda run: (run.index % len(run_seeds), run.index))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(Args, argv, prog="python -m cleanrl_utils.benchmark")
    try:
        base_argv = validate(args)
        if args.slurm_template_path is not None:
            array = SlurmArray(list(args.env_ids), seeds(args), base_argv, args.workers)
            return run_slurm(args.slurm_template_path, array, slurm_flags(args), args.auto_tag)
        runs = build_runs(base_argv, args.env_ids, seeds(args))
        if args.workers == 0:
            print_commands(runs)
            return 0
        log_dir = new_log_dir(args.log_dir)
        lock = DirectoryLock(log_dir)  # held until this process and its runs' supervisors exit
        ledger = Ledger(log_dir)
        tag = git_tag(outside=log_dir)  # recorded and checked even when the runs are not tagged with it
        ledger.require_cwd(Path.cwd())
        notes = ledger.require_code(tag)
        env = run_environment(tag, args.auto_tag)
        plan = ledger.plan(runs, share_cores(env, args.workers))
        ledger.save()  # the folder is this benchmark's from now on, even before a run starts
    except BadInput as error:
        print(f"benchmark: error: {error}", file=sys.stderr)
        return 2
    for line in notes + plan.found:
        print(f"benchmark: {line}", file=sys.stderr)
    if args.log_dir is None:
        print(
            f"benchmark: to continue this benchmark should it stop, start it again with --log-dir {log_dir}", file=sys.stderr
        )
    runner = LocalRunner(plan.runs, args.workers, log_dir, env, ledger=ledger, keep_fds=(lock.fd,))
    runner.install_signal_handlers()
    try:
        return runner.run()
    finally:
        lock.release()
