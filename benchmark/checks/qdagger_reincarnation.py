"""QDagger's reincarnation on this machine: a student taught by a local DQN teacher against DQN from scratch.

    python benchmark/checks/qdagger_reincarnation.py run --workers 2    # the stages not done yet, in order
    python benchmark/checks/qdagger_reincarnation.py run --only qdagger_dqn_atari_impalacnn --seeds 1   # one pair, one seed
    python benchmark/checks/qdagger_reincarnation.py run --only qdagger_dqn_atari_jax_impalacnn --offline-steps 10000 --seeds 2
                                                                 # its long budget only (seed 2)
    python benchmark/checks/qdagger_reincarnation.py report             # the Markdown rows for docs/rl-algorithms/qdagger.md

The claim checked: a student distilled from a trained `dqn_atari.py` teacher reaches, on a small budget
of its own, at least half the teacher's score, and more than `dqn_atari.py` trained from scratch for
the same number of environment steps. Likewise the JAX pair: `qdagger_dqn_atari_jax_impalacnn.py`
taught by `dqn_atari_jax.py`, against `dqn_atari_jax.py` from scratch. Breakout, like the reference.

The stages, in this order; each run is skipped once its summary exists, so `run` started again after a
stop goes on where it was:

1. Teachers: `dqn_atari.py` and `dqn_atari_jax.py`, 200k steps with the settings of atari_vs_sb3.py's
   DQN check (learning from step 20k, epsilon annealed over the first 100k), seed 1, `--save-model`.
   `dqn_atari.py` writes a checkpoint every 25k steps (~10 min) and a stopped run goes on from it;
   `dqn_atari_jax.py` has no checkpoints, so a stopped JAX teacher starts over (~60 min: it ran at
   ~58 steps/s beside another run in atari_vs_sb3.py).
2. Students, of each teacher that has saved its model: the QDagger file with `--teacher-model-path`
   that model file (in the teacher's run folder under `--out`).
3. Scratch: the teacher's file from scratch with the student's online steps and the flags they share.

Cost, measured on 2026-12-02 with one thread, nothing else running (a few dozen steps each, after
warm-up): one gradient step of the IMPALA-CNN student (batch 32: target and teacher forward passes,
student forward and backward, Adam) takes 0.44 s in PyTorch (0.46 s beside another one-thread run)
and 0.67 s in JAX (XLA's convolution gradient: 0.49 s of it; the forward pass alone 0.09 s); a
student's action 7.5 ms (PyTorch) and 3.6 ms (JAX), the teacher's 1.2 ms, an env step 2.3 ms. The
gradient steps are what a budget can afford. The first two budgets date from before the QDagger files
had checkpoints, when a student run had to end within ~90 minutes; the third, a longer offline phase,
writes checkpoints and is resumed by `run` after a stop, across sessions.

Budgets (`PAIRS`). PyTorch: the teacher plays 50k steps into the replay memory (a quarter of its
training), 3k offline gradient steps (96k distilled samples, about two passes over that memory),
then 20k online steps, a tenth of the teacher's training: 5k gradient steps (~38 min), 3k offline
(~23 min), playing and 30 scored games (~11 min): ~72 min. JAX: 50k, 1.75k offline (~20 min), 14k
online (3.5k gradient steps, ~41 min), playing, scoring and compiling (~10 min): ~71 min. With 1,000
steps between target-network copies (the default, in gradient steps offline), the offline phase
refreshes its target 3 times (PyTorch) or twice (JAX). The long budgets: 10k offline steps (~75 min in
PyTorch, ~2 h in JAX), scored every 2.5k of them (10 games each), then the same online steps as the short
budget of the file, against the same scratch run; a checkpoint every 1,000 steps (offline, then online).
Both files read the same online flags: learning from 10% of the online steps, epsilon annealed over
twice the offline steps (`Budget.shared_args`; a long budget keeps the short one's scratch schedule,
and its student reaches 0.01 after as many online steps as the short student). A QDagger
file counts its online steps on from its offline ones, so the student starts halfway down that schedule (epsilon ~0.5, as with the published
defaults: 500k offline steps, epsilon over 1M) and learns from its first step, while the scratch run
explores from epsilon 1: that is the reincarnation being measured, not a difference of settings.

"The same number of steps" counts online steps. The offline phase plays no game; the teacher's 50k
steps of play stand in for the replay memory that the paper takes from the teacher's own training (a
`dqn_atari.py` model file comes without it), so they are the teacher's cost, like its 200k training
steps, and not the student's. The report shows them beside the student's budget.

Scores: the teacher's is the mean of its saved model's 10 evaluation games (`eval/episodic_return`,
epsilon 0.01), the model the student learns from, rather than the moving network of its training
games (their last 20 are shown beside). The student's and the scratch run's are the means of their
last 20 training games (whole games, all lives), in the student's online phase; the student's own 10
evaluation games and its score after the offline phase are shown beside. Seeds 1 and 2 for students
and scratch runs (one teacher, seed 1): on 2 cores the whole benchmark takes ~4 h (teachers ~75 min,
four students ~2.5 h, scratch runs ~15 min), ~1.3 h less with `--seeds 1`. A row's means are over the
seeds whose student and scratch summaries both exist.

The runs go through the project's runner (benchmark/harness.py's queue, logs under `--out`/logs),
each with one torch/XLA thread. The summaries (`*.json` under `--out`) are committed under
benchmark/results/qdagger_reincarnation/ (`report --out` that folder); the teachers' model files stay
in their run folders under `--out`, where the students read them.
"""

import json
import os
import statistics
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmark.compare.atari_vs_sb3 import BREAKOUT, EPSILON_SCHEDULE  # noqa: E402
from benchmark.harness import (  # noqa: E402
    CommandLine,
    QueuedRun,
    Scalars,
    markdown_table,
    newest_run_dir,
    one_thread_env,
    report_command,
    result_last_mean,
    run_queue,
    script,
    summarize_run,
)
from cleanrl_utils.report import mean_std  # noqa: E402

LAST_EPISODES = 20
OF_TEACHER = 0.5  # the student must reach this share of the teacher's score
SEEDS = (1, 2)  # of the students and the scratch runs
TEACHER_SEED = 1
TEACHER_STEPS = 200_000
TEACHER_ARGS = ("--total-timesteps", str(TEACHER_STEPS), *EPSILON_SCHEDULE, "--save-model")

# beyond the training games: {key in the summary: tag}
EXTRA_TAGS = {"eval_returns": "eval/episodic_return", "offline_returns": "charts/offline/avg_episodic_return"}


@dataclass(frozen=True)
class Budget:
    """A student's steps; its scratch run gets the online steps and the exploration schedule they share."""

    online: int  # --total-timesteps: the student's online env steps, and all the scratch run's steps
    offline: int  # --offline-steps: gradient steps on the teacher's memory
    teacher_play: int = 50_000  # --teacher-steps: env steps the teacher plays to fill that memory
    # online steps over which the scratch run's epsilon falls to 0.01; the student's falls over the second half
    # of them (None: twice the offline steps, so the student starts at epsilon ~0.5, see `shared_args`)
    explore: int | None = None
    offline_evals: int = 1  # the student's scores during the offline phase, evenly spaced, the last at its end
    checkpoint_every: int = 0  # the student's checkpoints, in offline then online steps (0: none)

    @property
    def exploration_steps(self) -> int:
        return 2 * self.offline if self.explore is None else self.explore

    @property
    def shared_args(self) -> tuple[str, ...]:
        """The scratch run's flags, which the student shares: learning from 10% of the steps; epsilon annealed over
        `exploration_steps`.

        By default that is twice the offline steps: the QDagger files count the online steps on from the offline
        ones, so the student starts halfway down the schedule (epsilon ~0.5), as with the published defaults (500k
        offline steps, epsilon over 1M), and reaches 0.01 after `offline` online steps; the scratch run, from 1.
        """
        fraction = f"{self.exploration_steps / self.online:g}"
        buffer = max(self.online, self.teacher_play)  # no memory wraps, as with the default 1M (7 GB of address space)
        learning = ("--learning-starts", str(self.online // 10), "--exploration-fraction", fraction)
        return ("--total-timesteps", str(self.online), *learning, "--buffer-size", str(buffer))

    @property
    def student_args(self) -> tuple[str, ...]:
        """The shared flags, except that the student's epsilon reaches 0.01 after half the scratch run's exploration
        steps (its schedule counts the offline steps first: the default gives the shared fraction)."""
        fraction = f"{(self.offline + self.exploration_steps // 2) / self.online:g}"
        shared = list(self.shared_args)
        shared[shared.index("--exploration-fraction") + 1] = fraction
        teacher = ("--teacher-steps", str(self.teacher_play), "--offline-steps", str(self.offline))
        scored = ("--offline-eval-frequency", str(self.offline // self.offline_evals), "--save-model")
        return (*shared, *teacher, *scored)


@dataclass(frozen=True)
class Pair:
    student: str  # the QDagger file in cleanrl/
    teacher: str  # the DQN file that trains its teacher, and runs from scratch as the baseline
    teacher_checkpoint_every: int  # steps; 0 for a file without checkpoints (a stopped run starts over)
    budget: Budget
    env_id: str = BREAKOUT


PAIRS = (
    Pair("qdagger_dqn_atari_impalacnn", "dqn_atari", 25_000, Budget(online=20_000, offline=3_000)),
    # the same online budget after a longer offline phase (~75 min on one thread), scored every 2.5k offline steps
    # on the way; the scratch run's schedule is the one above (the same run), the student's epsilon starts at ~0.24
    Pair(
        "qdagger_dqn_atari_impalacnn",
        "dqn_atari",
        25_000,
        Budget(online=20_000, offline=10_000, explore=6_000, offline_evals=4, checkpoint_every=1_000),
    ),
    # a JAX gradient step costs ~1.5x PyTorch's here (XLA's one-thread convolution gradient): a smaller budget
    Pair("qdagger_dqn_atari_jax_impalacnn", "dqn_atari_jax", 0, Budget(online=14_000, offline=1_750)),
    # the same online budget after a longer offline phase (~2 h on one thread), scored every 2.5k offline steps on
    # the way; the scratch run's schedule is the one above (the same run), the student's epsilon starts at ~0.16
    Pair(
        "qdagger_dqn_atari_jax_impalacnn",
        "dqn_atari_jax",
        0,
        Budget(online=14_000, offline=10_000, explore=3_500, offline_evals=4, checkpoint_every=1_000),
    ),
)


def result_path(out: Path, role: str, name: str, env_id: str, steps: int, seed: int) -> Path:
    return out / f"{role}__{name}__{env_id}__{steps}__{seed}.json"


def logged_scores(run_dir: Path, scalars: Scalars) -> dict:
    """The evaluation and offline scores, [] for those the run did not log."""
    return {key: [value for _, value in scalars.get(tag, [])] for key, tag in EXTRA_TAGS.items()}


# a run's summary: its training games (summarize_run), with the scores above
summarize = partial(summarize_run, extra=logged_scores)


def queued(role: str, name: str, args: tuple[str, ...], pair: Pair, result: Path, seed: int, **kwargs) -> QueuedRun:
    identity = {"role": role, "algo": name, "env_id": pair.env_id, "seed": seed, "args": list(args)}
    return QueuedRun(
        result, script(name), args, pair.env_id, seed, summarize=partial(summarize, result=result, **identity), **kwargs
    )


def teacher_run(out: Path, pair: Pair) -> QueuedRun:
    result = result_path(out, "teacher", pair.teacher, pair.env_id, TEACHER_STEPS, TEACHER_SEED)
    return queued(
        "teacher", pair.teacher, TEACHER_ARGS, pair, result, TEACHER_SEED, checkpoint_every=pair.teacher_checkpoint_every
    )


def teacher_model(out: Path, pair: Pair) -> Path | None:
    """The model file the teacher run saved (`{exp name}.cleanrl_model` in its run folder); None before it is done."""
    teacher = teacher_run(out, pair)
    if not teacher.result.exists():
        return None
    try:
        model = newest_run_dir(teacher.workdir) / f"{pair.teacher}.cleanrl_model"
    except ValueError:  # no run folder: a summary without its run (copied from another --out)
        return None
    return model if model.is_file() else None


def student_result(out: Path, pair: Pair, seed: int) -> Path:
    """The summary of `pair`'s student (known before its teacher's model exists); its steps: offline+online."""
    return out / f"student__{pair.student}__{pair.env_id}__{pair.budget.offline}+{pair.budget.online}__{seed}.json"


def student_run(out: Path, pair: Pair, seed: int) -> QueuedRun:
    """The student of `pair`, taught by the teacher's saved model (which must exist)."""
    model = teacher_model(out, pair)
    if model is None:
        raise ValueError(f"the teacher of {pair.student} ({pair.teacher}) has not saved its model under {out}")
    args = (*pair.budget.student_args, "--teacher-model-path", str(model.resolve()))
    result, every = student_result(out, pair, seed), pair.budget.checkpoint_every
    return queued("student", pair.student, args, pair, result, seed, checkpoint_every=every)


def scratch_run(out: Path, pair: Pair, seed: int) -> QueuedRun:
    result = result_path(out, "scratch", pair.teacher, pair.env_id, pair.budget.online, seed)
    return queued("scratch", pair.teacher, pair.budget.shared_args, pair, result, seed)


def selected(only: list[str] | None, offline: list[int] | None = None) -> list[Pair]:
    """The pairs named in `only` by their student's or teacher's file or their env id (all without `only`), and of
    the budgets with `offline` offline steps (all without it)."""
    named = [pair for pair in PAIRS if not only or {pair.student, pair.teacher, pair.env_id} & set(only)]
    return [pair for pair in named if not offline or pair.budget.offline in offline]


def once(runs: list[QueuedRun]) -> list[QueuedRun]:
    """Each run once: pairs of two budgets share their teacher and, with the same online schedule, their scratch run."""
    by_result: dict[Path, QueuedRun] = {}
    for run in runs:
        if by_result.setdefault(run.result, run).args != run.args:
            raise ValueError(f"two runs would write {run.result.name} with different flags")
    return list(by_result.values())


def run(
    out: Path,
    workers: int,
    only: list[str] | None,
    env: dict[str, str],
    seeds: tuple[int, ...] = SEEDS,
    offline: list[int] | None = None,
) -> int:
    """The three stages in order, each through the runner; the exit code (that of a stop, at once)."""
    pairs, logs, codes = selected(only, offline), out / "logs", []
    out.mkdir(parents=True, exist_ok=True)
    codes.append(run_queue(once([teacher_run(out, pair) for pair in pairs]), workers, env, logs))
    if codes[-1] > 1:  # stopped by a signal: the runner stopped its runs, so stop here too
        return codes[-1]
    taught = [pair for pair in pairs if teacher_model(out, pair) is not None]
    for student, teacher in dict.fromkeys((pair.student, pair.teacher) for pair in pairs if pair not in taught):
        print(f"qdagger_reincarnation: {student} waits for its teacher's model ({teacher})", flush=True)
    codes.append(run_queue([student_run(out, pair, seed) for pair in taught for seed in seeds], workers, env, logs))
    if codes[-1] > 1:
        return codes[-1]
    codes.append(run_queue(once([scratch_run(out, pair, seed) for pair in pairs for seed in seeds]), workers, env, logs))
    return max(codes)


@dataclass(frozen=True)
class Outcome:
    """One pair's scores, the seeds' means, and the two bars."""

    teacher: float  # mean of the teacher's evaluation games
    teacher_training: float  # mean of its last training games (shown, not judged)
    student: list[float]  # per seed: its last training games of the online phase
    student_eval: list[float]  # per seed: mean of its evaluation games
    student_offline: list[float]  # per seed: its score after the offline phase
    offline_curve: list[list[float]]  # per seed: its scores during the offline phase, the last at its end
    scratch: list[float]  # per seed: its last training games
    seeds: list[int]

    @property
    def ratio(self) -> float | None:
        return statistics.fmean(self.student) / self.teacher if self.teacher > 0 else None

    @property
    def reaches_teacher(self) -> bool:
        return statistics.fmean(self.student) >= OF_TEACHER * self.teacher

    @property
    def beats_scratch(self) -> bool:
        return statistics.fmean(self.student) > statistics.fmean(self.scratch)


def logged(result: Path, key: str) -> list[float]:
    """The values of `key` in a summary written by `summarize` ([] when the run logged none)."""
    return json.loads(result.read_text()).get(key, [])


def outcome(out: Path, pair: Pair) -> Outcome | None:
    """The pair's outcome; None until its teacher (with its evaluation) and one seed of student and scratch are done."""
    teacher = teacher_run(out, pair).result
    students = {seed: student_result(out, pair, seed) for seed in SEEDS}
    scratches = {seed: scratch_run(out, pair, seed).result for seed in SEEDS}
    seeds = [seed for seed in SEEDS if students[seed].exists() and scratches[seed].exists()]
    if not teacher.exists() or not logged(teacher, "eval_returns") or not seeds:
        return None
    return Outcome(
        teacher=statistics.fmean(logged(teacher, "eval_returns")),
        teacher_training=result_last_mean(teacher, LAST_EPISODES),
        student=[result_last_mean(students[seed], LAST_EPISODES) for seed in seeds],
        student_eval=[statistics.fmean(games) for seed in seeds if (games := logged(students[seed], "eval_returns"))],
        student_offline=[scores[-1] for seed in seeds if (scores := logged(students[seed], "offline_returns"))],
        offline_curve=[scores for seed in seeds if (scores := logged(students[seed], "offline_returns"))],
        scratch=[result_last_mean(scratches[seed], LAST_EPISODES) for seed in seeds],
        seeds=seeds,
    )


def yes_no(passes: bool) -> str:
    return "yes" if passes else "**no**"


def cell(values: list[float]) -> str:
    return mean_std(values, 1) if values else "—"


def steps(count: int) -> str:
    return f"{count / 1000:g}k"


def offline_cell(budget: Budget, result: Outcome) -> str:
    """The student's score after the offline phase; with several scores on the way, each (mean over seeds)."""
    curve = [scores for scores in result.offline_curve if len(scores) == budget.offline_evals]
    if budget.offline_evals == 1 or not curve:
        return cell(result.student_offline)
    every = budget.offline // budget.offline_evals
    means = [statistics.fmean(point) for point in zip(*curve)]
    return " → ".join(f"{steps(every * (i + 1))}: {mean:.1f}" for i, mean in enumerate(means))


def report_row(pair: Pair, result: Outcome) -> list[str]:
    budget = pair.budget
    ratio = "—" if result.ratio is None else f"{result.ratio:.2f}×"  # a teacher that never scored
    # the row's own budget: the student's file runs with more than one
    command = f"`python benchmark/checks/qdagger_reincarnation.py run --only {pair.student} --offline-steps {budget.offline}`"
    return [
        f"{pair.student} ← {pair.teacher}",
        pair.env_id,
        f"{TEACHER_STEPS // 1000}k",
        f"{steps(budget.teacher_play)} + {steps(budget.offline)} + {steps(budget.online)}",
        ", ".join(map(str, result.seeds)),
        f"{result.teacher:.1f} ({result.teacher_training:.1f})",
        offline_cell(budget, result),
        f"{cell(result.student)} ({cell(result.student_eval)})",
        cell(result.scratch),
        ratio,
        yes_no(result.reaches_teacher),
        yes_no(result.beats_scratch),
        command,
    ]


def report(out: Path) -> str:
    header = [
        "student ← teacher",
        "game",
        "teacher steps",
        "student steps: teacher play + offline + online",
        "seeds",
        f"teacher: eval (last {LAST_EPISODES} training games)",
        "student after offline phase (long: on the way)",
        f"student: last {LAST_EPISODES} (eval)",
        f"scratch: last {LAST_EPISODES}",
        "student / teacher",
        f"≥ {OF_TEACHER:g} × teacher",
        "> scratch",
        "command",
    ]
    return markdown_table(header, [report_row(pair, result) for pair in PAIRS if (result := outcome(out, pair)) is not None])


def main() -> None:
    cli = CommandLine(
        __doc__,
        "qdagger_reincarnation",
        {
            "run": lambda args: run(
                args.out, args.workers, args.only, one_thread_env(), tuple(args.seeds), args.offline_steps
            ),
            "report": report_command(report),
        },
        only_help="run: only the pairs of these scripts (student or teacher) or env ids",
    )
    cli.count("--workers", 2, "run: learning runs at a time (one torch/XLA thread each)")
    cli.parser.add_argument(
        "--seeds", type=int, nargs="+", default=list(SEEDS), help="run: seeds of students and scratch runs"
    )
    cli.parser.add_argument(
        "--offline-steps", type=int, nargs="+", help="run: only the budgets with these offline steps (10000: the long ones)"
    )
    names = [name for pair in PAIRS for name in (pair.student, pair.teacher, pair.env_id)]
    args = cli.parse(dict.fromkeys(cli.commands, names))
    budgets = sorted({pair.budget.offline for pair in selected(args.only)})  # a count they lack would run nothing
    if missing := [count for count in args.offline_steps or [] if count not in budgets]:
        cli.parser.error(f"--offline-steps: no budget of these pairs has {missing} offline steps (they have {budgets})")
    cli.run(args)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
