"""How long each algorithm file takes to refuse a bad command line, from the start of its process.

    python -m benchmark.studies.bad_input_latency [--rounds 3] [--base DIR] [--out benchmark/results/bad_input_latency.md]

For every file of cleanrl/ with an `Args`, each case starts a new `python cleanrl/<file> ARGS` in a scratch folder and
times it from before the start to its exit (wall clock): a bad value (`--seed -1`), a parse error (`--seed` without
its value) and, in a file with a replay memory, one no machine holds (`--buffer-size 10**12`). Each run must end with
exit code 2 and one line on stderr, or the study stops. The table gives each case's median over `--rounds`, the
slowest run of the file, and the CPU time (user + system) of the bad value: on a busy machine the wall time is mostly
waiting for a core, the CPU time what the refusal costs. With `--base DIR`, a checkout of an earlier commit
(`git worktree add /tmp/base COMMIT`), the bad value is also timed there, once per file, in the same conditions.

This is a measurement, not a test: on a machine shared with other work the times are upper bounds. The record states
the load averages and the CPU share that processes at nice 19 (background runs) took while it ran.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark.harness import REPO, markdown_table, measured_at, positive_int, this_command, tree_commit
from cleanrl_utils.runtime import atomic

CASES = {
    "--seed -1": ("--seed", "-1"),
    "--seed (no value)": ("--seed",),
    "--buffer-size 10**12": ("--buffer-size", str(10**12)),
}


def files_with_args(repo: Path) -> list[str]:
    return sorted(
        str(path.relative_to(repo / "cleanrl"))
        for path in (repo / "cleanrl").rglob("*.py")
        if "class Args" in path.read_text()
    )


def refusal_time(repo: Path, name: str, args: tuple[str, ...], cwd: Path) -> tuple[float, float]:
    """Seconds from before the start of `python cleanrl/<name> args` to its exit, and the CPU seconds it used (user and
    system: what it costs, whatever else the machine runs); it must refuse in one line, with exit code 2."""
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS="1")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(repo / "cleanrl" / name), *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - start
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = done.stderr.strip().splitlines()
    if done.returncode != 2 or len(lines) != 1:
        raise SystemExit(f"{name} {' '.join(args)} (in {repo}): exit code {done.returncode}, stderr:\n{done.stderr[-2000:]}")
    return took, now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime


def nice_19_cpu_share() -> float:
    """The CPU share (percent of one core, summed) that processes running at nice 19 take now, as `ps` reports it."""
    listing = subprocess.run(["ps", "-eo", "ni=,pcpu="], capture_output=True, text=True, check=True).stdout
    return sum(float(cpu) for ni, cpu in (line.split() for line in listing.splitlines()) if ni == "19")


def conditions() -> str:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"load averages (1, 5, 15 min) {load}; processes at nice 19 using {nice_19_cpu_share():.0f}% of a core"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--base", type=Path, help="a checkout of an earlier commit: its files are timed on --seed -1 too")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark" / "results" / "bad_input_latency.md")
    options = parser.parse_args()
    names = files_with_args(REPO)
    before = conditions()
    rows, slowest = [], 0.0
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            source = (REPO / "cleanrl" / name).read_text()
            cases = {
                case: args for case, args in CASES.items() if not case.startswith("--buffer-size") or "buffer_size:" in source
            }
            runs = {
                case: [refusal_time(REPO, name, args, Path(scratch)) for _ in range(options.rounds)]
                for case, args in cases.items()
            }
            most = max(took for timed in runs.values() for took, _ in timed)
            slowest = max(slowest, most)
            cells = [f"{statistics.median(took for took, _ in runs[case]):.2f}" if case in runs else "" for case in CASES]
            cpu = statistics.median(used for _, used in runs["--seed -1"])
            base = []
            if options.base is not None:
                at_base = options.base / "cleanrl" / name
                timed = refusal_time(options.base, name, CASES["--seed -1"], Path(scratch)) if at_base.is_file() else None
                base = [f"{timed[0]:.2f}", f"{timed[1]:.2f}"] if timed else ["", ""]
            rows.append([f"`{name}`", *cells, f"{most:.2f}", f"{cpu:.2f}", *base])
            print(name, cells, f"slowest {most:.2f}", f"cpu {cpu:.2f}", base, flush=True)
    after = conditions()
    header = ["file", *(f"`{case}` (s)" for case in CASES), "slowest run (s)", "`--seed -1` CPU (s)"]
    if options.base is not None:
        header += ["`--seed -1` at the base (s)", "at the base, CPU (s)"]
    text = "\n\n".join(
        [
            "# Bad input: seconds from process start to the one-line refusal",
            measured_at(this_command()),
            f"{len(names)} files, {options.rounds} rounds per case, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs."
            f" Before: {before}. After: {after}. Other work shared the machine (background runs at nice 19):"
            " the wall times are upper bounds; the CPU times are what the work costs.",
            f"Slowest run of all: {slowest:.2f} s."
            + (f" The base: {options.base}, at commit {tree_commit(options.base)}." if options.base is not None else ""),
            markdown_table(header, rows),
        ]
    )
    atomic.write_text(options.out, text + "\n")
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
