"""Steps per second of the flagship torch scripts against Stable-Baselines3 and against an earlier commit of themselves.

    git worktree add /tmp/base 3a3bf51
    python -m benchmark.compare.speed --base /tmp/base --rounds 3 [--only ppo dqn ...] [--out benchmark/results/speed]

Each case is one of our scripts with a short fixed budget, run three ways, one process at a time: our
file as it is in this tree ("ours"), the same file in the `--base` tree, a git worktree of the
commit to compare with ("base", with that tree's `cleanrl_utils`), and SB3 configured like it
(`benchmark/compare/sb3_baselines.py`). The three runs of a case follow each other, and the order of the
sides turns every round, so a machine whose load or speed drifts meets every side alike. Every
process gets the same environment: what the shell sets (`OMP_NUM_THREADS`...) applies to all three.

Per run it records the SPS (ours and base: the last `charts/SPS` the script logged, steps over the
training loop's time; SB3: steps over the time of `learn()`), the whole process's wall and CPU
seconds, and the 1-minute load average before it started. The report gives, per case, the median
SPS of each side and the median over rounds of the paired ratios ours/base and ours/SB3 (a ratio
of two runs made minutes apart), then checks the issue's bars. A run that fails stops the benchmark
with its output's tail; what was measured so far is written after every run (`<out>.json`, raw),
and `--resume` measures only what is missing from it. `<out>.md` is the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmark.harness import SB3_BASELINES, check_only, positive_int, tree_commit
from cleanrl_utils.runtime import atomic
from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[2]

SIDES = ("ours", "base", "sb3")
# OUT.md's title when --title names none (each record under benchmark/results/ has a title of its own)
DEFAULT_TITLE = "Speed of the flagship torch scripts: ours, an earlier commit (base) and Stable-Baselines3"
# a side's commit is marked -dirty when these have uncommitted edits (not the docs or the results)
MEASURED_CODE = ("cleanrl", "cleanrl_utils")


@dataclass(frozen=True)
class Case:
    name: str
    script: str  # our file in cleanrl/
    env_id: str
    steps: int
    args: tuple[str, ...] = ()  # besides the env, seed and budget; given to ours and base
    sb3_algo: str = ""  # the model of benchmark/compare/sb3_baselines.py
    sb3_args: tuple[str, ...] = ()
    base_bar: float | None = None  # ours/base must reach this (the bars)
    sb3_bar: float | None = None
    teacher: bool = False  # QDagger: both sides learn from one dqn_atari.py model file (Trees.teacher)


OFF_POLICY = ("--learning-starts", "1000")
ATARI_DQN = ("--learning-starts", "1000", "--buffer-size", "20000")
# QDagger's teacher phases cut short (one scoring game, 1,000 teacher steps, 100 offline updates), so that
# nearly all of the run is its online phase, whose steps the SPS counts
QDAGGER = (*ATARI_DQN, "--teacher-eval-episodes", "1", "--teacher-steps", "1000", "--offline-steps", "100")
# a dqn_atari.py run for the file only: no update, and random play in its 10 scoring games
TEACHER_RUN = ("--buffer-size", "1000", "--learning-starts", "100", "--total-timesteps", "101", "--start-e", "1")
TEACHER_RUN += ("--end-e", "1", "--save-model")
# Cheapest first. Budgets keep a round near 20 minutes on an idle 2-core machine; the off-policy cases
# learn from step 1000 on, so most of their steps are learning steps.
CASES = (
    Case("ppo", "ppo", "CartPole-v1", 100_000, sb3_algo="ppo"),
    Case("dqn", "dqn", "CartPole-v1", 100_000, sb3_algo="dqn", base_bar=1.3),
    Case(
        "ppo_continuous_action",
        "ppo_continuous_action",
        "Hopper-v4",
        16_384,
        sb3_algo="ppo_continuous",
        base_bar=1.15,
        sb3_bar=1.3,
    ),
    Case("ddpg", "ddpg_continuous_action", "Hopper-v4", 6_000, OFF_POLICY, "ddpg", OFF_POLICY, 1.15, 1.3),
    Case("td3", "td3_continuous_action", "Hopper-v4", 6_000, OFF_POLICY, "td3", OFF_POLICY, 1.15, 1.3),
    Case("sac", "sac_continuous_action", "Hopper-v4", 6_000, OFF_POLICY, "sac", OFF_POLICY, 1.15, 1.3),
    Case("dqn_atari", "dqn_atari", "BreakoutNoFrameskip-v4", 20_000, ATARI_DQN, "dqn_atari", ATARI_DQN),
    Case("ppo_atari", "ppo_atari", "BreakoutNoFrameskip-v4", 20_480, sb3_algo="ppo_atari", base_bar=1.25),
    # the other Atari torch files took the same frames: ours against base only (`--only` them)
    Case("c51_atari", "c51_atari", "BreakoutNoFrameskip-v4", 20_000, ATARI_DQN),
    Case("rainbow_atari", "rainbow_atari", "BreakoutNoFrameskip-v4", 20_000, ATARI_DQN),
    Case("sac_atari", "sac_atari", "BreakoutNoFrameskip-v4", 20_000, ATARI_DQN),
    Case("ppo_atari_lstm", "ppo_atari_lstm", "BreakoutNoFrameskip-v4", 20_480),
    # one process (no torchrun): the same 8 envs as ppo_atari, through the file's own loop
    Case("ppo_atari_multigpu", "ppo_atari_multigpu", "BreakoutNoFrameskip-v4", 20_480),
    Case("qdagger_dqn_atari", "qdagger_dqn_atari_impalacnn", "BreakoutNoFrameskip-v4", 20_000, QDAGGER, teacher=True),
)
DEFAULT_CASES = ("ppo", "dqn", "ppo_continuous_action", "ddpg", "td3", "sac", "dqn_atari", "ppo_atari")


class RunFailed(Exception):
    pass


@dataclass(frozen=True)
class Trees:
    ours: Path
    base: Path
    scale: float = 1.0  # of every case's budget
    teacher: Path | None = None  # the dqn_atari.py model file the QDagger case learns from (make_teacher)


def command(case: Case, side: str, trees: Trees, out_json: Path) -> tuple[list[str], dict[str, str]]:
    """The argv of one side's run of a case, and its environment."""
    steps = max(1, round(case.steps * trees.scale))
    budget = ["--env-id", case.env_id, "--seed", "1", "--total-timesteps", str(steps)]
    if side == "sb3":
        argv = [sys.executable, str(SB3_BASELINES), case.sb3_algo, *budget, *case.sb3_args]
        return [*argv, "--json", str(out_json)], os.environ | {"PYTHONPATH": str(REPO)}
    tree = trees.ours if side == "ours" else trees.base
    if case.teacher:
        if trees.teacher is None:
            raise ValueError(f"case {case.name} needs a teacher model file (Trees.teacher)")
        budget += ["--teacher-model-path", str(trees.teacher)]
    return [sys.executable, str(tree / "cleanrl" / f"{case.script}.py"), *budget, *case.args], os.environ | {
        "PYTHONPATH": str(tree)
    }


def make_teacher(ours: Path, folder: Path) -> Path:
    """A dqn_atari.py model file for the QDagger case, saved by `ours`' dqn_atari.py in `folder`."""
    argv = [sys.executable, str(ours / "cleanrl" / "dqn_atari.py"), "--env-id", "BreakoutNoFrameskip-v4", *TEACHER_RUN]
    proc = subprocess.run(argv, cwd=folder, env=os.environ | {"PYTHONPATH": str(ours)}, capture_output=True, text=True)
    models = sorted(folder.glob("runs/*/dqn_atari.cleanrl_model"))
    if proc.returncode != 0 or not models:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise RunFailed(f"{shlex.join(argv)} (the QDagger teacher) exited with code {proc.returncode}:\n{tail}")
    return models[0]


def measure(case: Case, side: str, trees: Trees) -> dict:
    """Run one side of a case in a fresh folder: its SPS, wall and CPU seconds, and the load before it."""
    with tempfile.TemporaryDirectory(prefix="speed-") as tmp:
        argv, env = command(case, side, trees, Path(tmp) / "sb3.json")
        load = os.getloadavg()[0]
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise RunFailed(f"{shlex.join(argv)} exited with code {proc.returncode}:\n{tail}")
        if side == "sb3":
            sps = json.loads((Path(tmp) / "sb3.json").read_text())["sps"]
        else:
            logged = [v for d in (Path(tmp) / "runs").iterdir() for _, v in read_scalars(d).get("charts/SPS", [])]
            if not logged:
                raise RunFailed(f"{shlex.join(argv)} logged no charts/SPS")
            sps = logged[-1]
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"sps": float(sps), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load": round(load, 2)}


def machine() -> dict:
    import torch

    return {
        "cpus": len(os.sched_getaffinity(0)),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads_default": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }


def paired_ratios(runs: list[dict], case: str, other: str, key: str = "sps") -> list[float]:
    """ours/other of `key` (SPS), or other/ours for `cpu_s` (how many times less CPU ours took): one per round
    in which both ran."""
    by_round: dict[int, dict[str, float]] = {}
    for run in runs:
        if run["case"] == case:
            by_round.setdefault(run["round"], {})[run["side"]] = run[key]
    pairs = [(sides["ours"], sides[other]) for sides in by_round.values() if "ours" in sides and other in sides]
    return [theirs / ours if key == "cpu_s" else ours / theirs for ours, theirs in pairs]


def cell(values: list[float], digits: int = 0) -> str:
    if not values:
        return "–"
    each = ", ".join(f"{v:.{digits}f}" for v in values)
    return f"{statistics.median(values):.{digits}f} ({each})"


def bar_verdict(ratios: list[float], bar: float | None) -> str:
    if bar is None or not ratios:
        return ""
    return f" {'≥' if statistics.median(ratios) >= bar else '<'} {bar:g}: {'met' if statistics.median(ratios) >= bar else 'MISSED'}"


def report(record: dict) -> str:
    """The Markdown table of a record."""
    runs = record["runs"]
    lines = [
        f"# {record.get('title', DEFAULT_TITLE)}",
        "",
        f"Measured at commit {record['ours_commit']} on {record['date']} with `{record['command']}`"
        + (f", {record['note']}" if record.get("note") else ""),
        "",
        f"ours: `{record['ours_commit']}`, base: `{record['base_commit']}`; {record['rounds']} rounds, the sides' order turning each round;",
        f"machine: {record['machine']['cpus']} CPUs ({record['machine']['processor']}), Python {record['machine']['python']}, "
        f"torch {record['machine']['torch']} ({record['machine']['torch_threads_default']} threads by default), "
        f"OMP_NUM_THREADS={record['machine']['OMP_NUM_THREADS'] or 'unset'}.",
        "Load: the 1-minute load average when each run started (an idle machine reads near 0). CPU: the whole",
        "process's CPU seconds, other ÷ ours (a run on one thread does the same work whatever the load; with",
        "more threads, spinning threads add to it).",
        "",
        "| case | env, steps | ours SPS, median (each round) | base SPS | SB3 SPS | ours/base, median of rounds "
        "| ours/SB3 | CPU base÷ours | CPU SB3÷ours | load (min–max) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in CASES:
        mine = [run for run in runs if run["case"] == case.name]
        if not mine:
            continue
        sps = {side: [run["sps"] for run in mine if run["side"] == side] for side in SIDES}
        to_base, to_sb3 = paired_ratios(runs, case.name, "base"), paired_ratios(runs, case.name, "sb3")
        cpu_base, cpu_sb3 = (paired_ratios(runs, case.name, other, "cpu_s") for other in ("base", "sb3"))
        loads = [run["load"] for run in mine]
        lines.append(
            f"| {case.name} | {case.env_id}, {max(1, round(case.steps * record['scale']))} | {cell(sps['ours'])} | {cell(sps['base'])} | {cell(sps['sb3'])} "
            f"| {cell(to_base, 2)}{bar_verdict(to_base, case.base_bar)} | {cell(to_sb3, 2)}{bar_verdict(to_sb3, case.sb3_bar)} "
            f"| {cell(cpu_base, 2)} | {cell(cpu_sb3, 2)} | {min(loads):.1f}–{max(loads):.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="a git worktree of the commit to compare with")
    parser.add_argument("--ours", type=Path, default=REPO, help="the tree whose files are ours (default: this one)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every budget by this (a quick look: 0.1)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="alternating rounds; medians are reported")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="these cases (default: the flagship ones)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="which sides to run")
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmark" / "results" / "speed", help="writes OUT.json and OUT.md"
    )
    parser.add_argument("--resume", action="store_true", help="keep OUT.json's runs and measure only the missing ones")
    parser.add_argument("--title", help=f"OUT.md's title, kept in OUT.json (default: OUT.json's, else {DEFAULT_TITLE!r})")
    parser.add_argument("--report", action="store_true", help="only write OUT.md again from OUT.json, running nothing")
    args = parser.parse_args(argv)
    out_json, out_md = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    earlier = json.loads(out_json.read_text()) if out_json.is_file() else {}
    # a record run again, resumed or reported keeps its title unless --title gives another
    title = args.title or earlier.get("title", DEFAULT_TITLE)
    if args.report:
        if not earlier:
            parser.error(f"--report: no {out_json} to report")
        if title != earlier.get("title"):  # into the raw record too, so that the next --report writes it again
            atomic.write_text(out_json, json.dumps(earlier | {"title": title}, indent=1))
        atomic.write_text(out_md, table := report(earlier | {"title": title}))
        print(table)
        return 0
    check_only(parser, args.only, (case.name for case in CASES))
    if "ours" not in args.sides:
        parser.error("--sides must include ours: every ratio is ours against another side")
    for flag, tree in (("--ours", args.ours), ("--base", args.base)):
        if not (tree / "cleanrl").is_dir():
            parser.error(f"{flag} {tree}: not a checkout of this project (no cleanrl/ folder in it)")
    if args.scale <= 0:
        parser.error(f"--scale must be positive, got {args.scale:g}")
    cases = [case for case in CASES if case.name in (args.only or DEFAULT_CASES)]
    teacher_folder = tempfile.TemporaryDirectory(prefix="speed-teacher-")  # removed when the benchmark ends
    try:
        teacher = make_teacher(args.ours.resolve(), Path(teacher_folder.name)) if any(c.teacher for c in cases) else None
    except RunFailed as error:
        print(f"speed: error: {error}", file=sys.stderr)
        return 1
    trees = Trees(args.ours.resolve(), args.base.resolve(), args.scale, teacher)
    record = {
        "command": "python -m benchmark.compare.speed " + shlex.join(sys.argv[1:] if argv is None else argv),
        "title": title,
        "ours_commit": tree_commit(args.ours, MEASURED_CODE),
        "base_commit": tree_commit(args.base, MEASURED_CODE),
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "rounds": args.rounds,
        "scale": args.scale,
        "machine": machine(),
        "runs": [],
    }
    if args.resume and earlier:
        record["runs"] = earlier["runs"]
    done = {(run["round"], run["case"], run["side"]) for run in record["runs"]}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    for round_index in range(1, args.rounds + 1):
        turn = (round_index - 1) % len(args.sides)
        order = args.sides[turn:] + args.sides[:turn]
        for case in cases:
            for side in order:
                if (round_index, case.name, side) in done or (side == "sb3" and not case.sb3_algo):
                    continue
                try:
                    result = measure(case, side, trees)
                except RunFailed as error:
                    print(f"speed: error: {error}", file=sys.stderr)
                    return 1
                record["runs"].append({"round": round_index, "case": case.name, "side": side, **result})
                print(f"round {round_index} {case.name} {side}: {result}", flush=True)
                atomic.write_text(out_json, json.dumps(record, indent=1))
    table = report(record)
    atomic.write_text(out_md, table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
