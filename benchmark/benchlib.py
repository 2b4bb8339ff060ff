"""What the side-by-side benchmark scripts share: one-thread runs, work queues, summaries.

Several queues (one per core) can work through the same list of runs: each takes a run by
creating its `.running` file first, so no run is done twice, and a stopped benchmark continues
where it stopped (a queue killed mid-run leaves its `.running` file: delete it to redo that run).
"""

import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

from cleanrl_utils.summarize import last_mean
from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[1]


ONE_XLA_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def one_thread_env() -> dict[str, str]:
    """One torch/BLAS/XLA thread per run: on a 2-core machine two queues then share it without oversubscribing."""
    return os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": ONE_XLA_THREAD, "MUJOCO_GL": "egl"}


# glibc hands every allocation above 32 MiB straight back to the kernel, so a CNN whose minibatch
# activations are hundreds of MiB (ppo_procgen: 2048 frames) page-faults them in again on each pass:
# on 2 cores half its update time was system time. Raising the thresholds keeps that memory in the
# heap; measured: the ppo_procgen update ran 2x faster, the same arithmetic.
KEEP_LARGE_ALLOCATIONS = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184"


def keep_large_allocations(env: dict[str, str]) -> dict[str, str]:
    """`env` with glibc told to reuse large freed blocks instead of returning them to the kernel."""
    tunables = ":".join(filter(None, [env.get("GLIBC_TUNABLES", ""), KEEP_LARGE_ALLOCATIONS]))
    return env | {"GLIBC_TUNABLES": tunables}


def claim(result: Path) -> bool:
    """Take the run that writes `result` for this queue (False: it is done or another queue has it)."""
    if result.exists():
        return False
    try:
        os.close(os.open(result.with_suffix(".running"), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def summarize_run(run_dir: Path, result: Path, tag: str = "charts/episodic_return", **identity: object) -> None:
    """Write `result`: `identity`, the last logged SPS and every value of `tag`, from a run's events.

    `tag` is each finished episode's return, or for the XLA files (`charts/avg_episodic_return`) the mean
    of every env's last finished game, logged once per iteration.
    """
    scalars = read_scalars(run_dir)
    episodes = [value for _, value in scalars[tag]]
    result.write_text(json.dumps(identity | {"sps": scalars["charts/SPS"][-1][1], "episodic_returns": episodes}))


def newest_run_dir(workdir: Path) -> Path:
    """The run folder a script wrote last under `workdir/runs` (env ids with a namespace nest one level deeper)."""
    candidates = [p for p in (workdir / "runs").rglob("*") if p.is_dir() and any(p.glob("events.out.tfevents.*"))]
    return max(candidates, key=lambda p: p.stat().st_mtime_ns)


def resumable_args(workdir: Path, args: list[str], checkpoint_every: int) -> list[str]:
    """A check's arguments for a run that writes checkpoints, or `--resume` for one stopped under `workdir`.

    A resumed run takes its other arguments from its checkpoint.
    """
    from cleanrl_utils import checkpoint as ckpt

    stopped = [run for run in sorted((workdir / "runs").glob("*")) if ckpt.checkpoints(run / ckpt.CHECKPOINT_DIR)]
    if stopped:
        return ["--resume", str(stopped[-1].relative_to(workdir))]
    return [*args, "--checkpoint-frequency", str(checkpoint_every)]


def run_through_runner(script: str, args: list[str], env_id: str, seed: int, workdir: Path, env: dict[str, str]) -> None:
    """One training run of `cleanrl/<script>.py` as users launch them: `python -m cleanrl_utils.benchmark`, one seed.

    The runner adds `--env-id` and `--seed` to the command and keeps the run's log under `workdir/logs`.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    command = shlex.join([sys.executable, str(REPO / "cleanrl" / f"{script}.py"), *args])
    runner = [sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", env_id, "--command", command]
    runner += ["--num-seeds", "1", "--start-seed", str(seed), "--workers", "1", "--log-dir", "logs"]
    env = env | {"PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])}
    subprocess.run(runner, cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)


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
