"""Run one training command for several environments and seeds, a few at a time.

    python -m cleanrl_utils.benchmark --env-ids CartPole-v1 Acrobot-v1 \\
        --command "python cleanrl/ppo.py --no-cuda" --num-seeds 3 --workers 2

builds `<command> --env-id E --seed S` for every seed (outer loop) and environment (inner
loop). With `--workers 0` it only prints these commands, one per line; otherwise it runs them
as local subprocesses, at most `--workers` at a time, each writing its output to its own log
file, and reports progress on stderr. The exit code is 0 when every run succeeded, 1 when
any failed, 2 on bad input, and 128 + the signal number when interrupted. Each run goes through a
supervisor (`supervise.py`) that notes its exit status and stops its whole process group when the
runner stops or dies; started again with the same `--log-dir`, the benchmark continues (`ledger.py`).

The command string is split with `shlex` (quotes work as in a shell) and run without a shell:
pipes, `&&` and `VAR=value` prefixes are not interpreted; set environment variables on the
benchmark command itself instead, the runs inherit them.

With `--slurm-template-path` the runs go to Slurm instead: the template is filled in to a job-array
script with one array task per (environment, seed), written to `slurm/<uuid>.slurm`, and submitted
with `sbatch` (at most `--workers` tasks at a time). With `--workers 0` the script is only written.
"""

from cleanrl_utils.benchmark.cli import Args, build_runs, main
from cleanrl_utils.benchmark.common import BadInput, RunSpec, git_tag
from cleanrl_utils.benchmark.local import LocalRunner, estimate_time_left
from cleanrl_utils.benchmark.slurm import SlurmArray, add_exports, cpus_per_gpu, render_slurm_script

__all__ = [
    "Args", "BadInput", "LocalRunner", "RunSpec", "SlurmArray", "add_exports", "build_runs", "cpus_per_gpu",
    "estimate_time_left", "git_tag", "main", "render_slurm_script",
]  # fmt: skip
