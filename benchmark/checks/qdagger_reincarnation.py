"""QDagger's reincarnation on this machine: the PyTorch and JAX students of one local DQN teacher, at one budget and
six seeds each, against DQN from scratch and against each other.

    python -m benchmark.checks.qdagger_reincarnation run --workers 2   # the stages not done yet, in order
    python -m benchmark.checks.qdagger_reincarnation run --only qdagger_dqn_atari_impalacnn --seeds 1   # one student
    python -m benchmark.checks.qdagger_reincarnation report            # the Markdown rows for docs/rl-algorithms/qdagger.md

The claims checked: a student distilled from a trained `dqn_atari.py` teacher reaches, on a small budget of
its own, at least half the teacher's score, and more than `dqn_atari.py` trained from scratch for the same
online steps; and the JAX file's student does what its PyTorch twin's does. Breakout, like the reference.

**One teacher for both students.** `dqn_atari.py` trains the teacher (200k steps, the settings of
atari_vs_sb3.py's DQN check, seed 1, `--save-model`, a checkpoint every 25k steps). The PyTorch student reads
its model file; the JAX student reads the same network converted to `dqn_atari_jax.py`'s format
(`torch_teacher_as_flax`: the same Q-values to float32 rounding, tested). Both then fill the teacher's memory
from the same teacher's play, and are scored against the same teacher score: student / teacher compares the
two files, not two teachers (until 2026-12-05 the JAX student had a `dqn_atari_jax.py` teacher of its own).

**One budget for both** (`BUDGET`): the teacher plays 50k steps into the replay memory, 10k offline gradient
steps (scored every 2.5k, 10 games each), then 20k online steps (5k gradient steps), learning from 10% of them,
the student's epsilon from ~0.24 (it counts the offline steps first) to 0.01 after 3k online steps; a checkpoint
every 1,000 steps, so a stopped student goes on where it was. The scratch run: `dqn_atari.py`, the same 20k
online steps, epsilon from 1 to 0.01 over 6k. This is the budget at which the PyTorch student passed on seed 1
(0.69x, 2026-12-03); the JAX student had 14k online steps then (0.47x, seeds 1-2).

**Seeds 1-6** for the PyTorch student and its scratch runs, **101-106** for the JAX student and its own: the RLops
gate (`cleanrl_utils.rlstats.improvement_p_value`, two sided, on each seed's student / teacher) needs 6 independent
seeds a side to reach 0.05 at all (its smallest p: 2^-5). Twins on the same seed numbers would share their env
seeds, and the test counts such runs as pairs of seeds (issue 52): 6 shared seeds are 3 pairs (p >= 0.25).

**Verdicts**, fixed before the runs: a student passes when the mean over seeds of its last 20 training games
(online phase, whole games) is at least half the teacher's score (the mean of its saved model's 10 evaluation
games, epsilon 0.01), and more than the scratch runs' mean. The twins differ when the gate's p is at most 0.05.

Cost (one thread each, two runs side by side): a gradient step of the IMPALA-CNN student (batch 32) took 0.44 s
in PyTorch and 0.67 s in JAX (2026-12-02), so a PyTorch student ~2.1 h, a JAX student ~3.1 h, the teacher
~1.25 h, a scratch run ~10 min (12 of them): ~34 core-hours in all, ~17 h on two cores.

The runs go through the project's runner (benchmark/harness.py's queue, logs under `--out`/logs). The
summaries (`*.json` under `--out`) are committed under benchmark/results/qdagger_same_teacher/ (`report --out`
that folder); the teacher's model files stay in its run folder under `--out`, where the students read them.
The summaries of the earlier budgets (3k, 1.75k or 10k offline steps; the JAX file's own teacher) stay in
benchmark/results/qdagger_reincarnation/ and qdagger_reincarnation_long_budget/; the check as it was at commit
c105263 reads them.
"""

import json
import os
import statistics
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.compare.atari_vs_sb3 import BREAKOUT, EPSILON_SCHEDULE
from benchmark.harness import (
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
from cleanrl_utils.report import mean_std
from cleanrl_utils.runtime import atomic

REPO = Path(__file__).resolve().parents[2]

LAST_EPISODES = 20
OF_TEACHER = 0.5  # the student must reach this share of the teacher's score
SEEDS = (1, 2, 3, 4, 5, 6)  # of the PyTorch student and its scratch runs: the RLops gate needs 6 a side
JAX_SEEDS = (101, 102, 103, 104, 105, 106)  # the JAX twin's: other seeds, so that the twins share no luck
ALPHA = 0.05
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
    flax_teacher: bool = False  # the student reads the teacher converted to dqn_atari_jax.py's format
    seeds: tuple[int, ...] = SEEDS  # of the student and its scratch runs


# the budget at which the PyTorch student passed on seed 1 (2026-12-03): 10k offline steps scored every 2.5k,
# 20k online steps; the student's epsilon starts at ~0.24 and reaches 0.01 after 3k online steps
BUDGET = Budget(online=20_000, offline=10_000, explore=6_000, offline_evals=4, checkpoint_every=1_000)
PAIRS = (
    Pair("qdagger_dqn_atari_impalacnn", "dqn_atari", 25_000, BUDGET),
    Pair("qdagger_dqn_atari_jax_impalacnn", "dqn_atari", 25_000, BUDGET, flax_teacher=True, seeds=JAX_SEEDS),
)
TWINS = ("qdagger_dqn_atari_jax_impalacnn", "qdagger_dqn_atari_impalacnn")


def torch_teacher_as_flax(model: Path, out: Path) -> Path:
    """Write the Q-network of a `dqn_atari.py` model file as `dqn_atari_jax.py` saves its own (Flax's state dict of
    the same Nature CNN, msgpack), so that the JAX student learns from the very teacher the PyTorch student learns from.

    Convolution kernels go from (out, in, h, w) to (h, w, in, out), dense ones are transposed, and the first dense
    layer's inputs are reordered from PyTorch's flattened (channel, row, column) to Flax's (row, column, channel).
    """
    import flax

    from cleanrl_utils.runtime.model_files import read_torch

    weights = {name: tensor.numpy() for name, tensor in read_torch(model, "cpu").items()}
    layers = {f"Conv_{i}": f"network.{index}" for i, index in enumerate((0, 2, 4))}
    params = {name: {"kernel": weights[f"{key}.weight"].transpose(2, 3, 1, 0)} for name, key in layers.items()}
    hidden = weights["network.7.weight"]  # (512, 64 channels x 7 x 7)
    params["Dense_0"] = {"kernel": hidden.reshape(len(hidden), 64, 7, 7).transpose(2, 3, 1, 0).reshape(-1, len(hidden))}
    params["Dense_1"] = {"kernel": weights["network.9.weight"].T}
    for name, key in {**layers, "Dense_0": "network.7", "Dense_1": "network.9"}.items():
        params[name]["bias"] = weights[f"{key}.bias"]
    atomic.write_bytes(out, flax.serialization.msgpack_serialize({"params": params}))
    return out


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
    """The model file the teacher run saved (`{exp name}.cleanrl_model` in its run folder), converted to Flax's format
    for a JAX student (written next to it once, then kept); None before the teacher is done."""
    teacher = teacher_run(out, pair)
    if not teacher.result.exists():
        return None
    try:
        model = newest_run_dir(teacher.workdir) / f"{pair.teacher}.cleanrl_model"
    except ValueError:  # no run folder: a summary without its run (copied from another --out)
        return None
    if not model.is_file():
        return None
    if not pair.flax_teacher:
        return model
    converted = model.with_name(f"{pair.teacher}_as_flax.cleanrl_model")
    return converted if converted.is_file() else torch_teacher_as_flax(model, converted)


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


def selected(only: list[str] | None) -> list[Pair]:
    """The pairs named in `only` by their student's or teacher's file or their env id (all without `only`)."""
    return [pair for pair in PAIRS if not only or {pair.student, pair.teacher, pair.env_id} & set(only)]


def once(runs: list[QueuedRun]) -> list[QueuedRun]:
    """Each run once: the two students share their teacher and their scratch runs."""
    by_result: dict[Path, QueuedRun] = {}
    for run in runs:
        if by_result.setdefault(run.result, run).args != run.args:
            raise ValueError(f"two runs would write {run.result.name} with different flags")
    return list(by_result.values())


def run(out: Path, workers: int, only: list[str] | None, env: dict[str, str], seeds: tuple[int, ...] = ()) -> int:
    """The three stages in order, each through the runner; the exit code (that of a stop, at once). The students run
    seed by seed (the k-th seed of each), the two files side by side, so that a stopped queue has compared pairs.
    `seeds` replaces every pair's own seeds (a quick look at one seed)."""
    pairs, logs, codes = selected(only), out / "logs", []
    out.mkdir(parents=True, exist_ok=True)
    codes.append(run_queue(once([teacher_run(out, pair) for pair in pairs]), workers, env, logs))
    if codes[-1] > 1:  # stopped by a signal: the runner stopped its runs, so stop here too
        return codes[-1]
    taught = [pair for pair in pairs if teacher_model(out, pair) is not None]
    for student, teacher in dict.fromkeys((pair.student, pair.teacher) for pair in pairs if pair not in taught):
        print(f"qdagger_reincarnation: {student} waits for its teacher's model ({teacher})", flush=True)
    rounds = max((len(seeds or pair.seeds) for pair in taught), default=0)
    students = [
        student_run(out, pair, seed) for k in range(rounds) for pair in taught for seed in (seeds or pair.seeds)[k : k + 1]
    ]
    codes.append(run_queue(students, workers, env, logs))
    if codes[-1] > 1:
        return codes[-1]
    scratch = [scratch_run(out, pair, seed) for pair in pairs for seed in seeds or pair.seeds]
    codes.append(run_queue(once(scratch), workers, env, logs))
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
    students = {seed: student_result(out, pair, seed) for seed in pair.seeds}
    scratches = {seed: scratch_run(out, pair, seed).result for seed in pair.seeds}
    seeds = [seed for seed in pair.seeds if students[seed].exists() and scratches[seed].exists()]
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
    command = f"`python -m benchmark.checks.qdagger_reincarnation run --only {pair.student}`"
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
        "student after offline phase (on the way)",
        f"student: last {LAST_EPISODES} (eval)",
        f"scratch: last {LAST_EPISODES}",
        "student / teacher",
        f"≥ {OF_TEACHER:g} × teacher",
        "> scratch",
        "command",
    ]
    table = markdown_table(header, [report_row(pair, result) for pair in PAIRS if (result := outcome(out, pair)) is not None])
    return "\n".join([table, "", twins_line(out)])


def student_ratios(out: Path, pair: Pair) -> dict[int, float]:
    """Each finished seed's student score (its last games) over the teacher's evaluation score."""
    teacher = teacher_run(out, pair).result
    if not teacher.exists() or not logged(teacher, "eval_returns"):
        return {}
    score = statistics.fmean(logged(teacher, "eval_returns"))
    done = [seed for seed in pair.seeds if student_result(out, pair, seed).exists()]
    return {seed: result_last_mean(student_result(out, pair, seed), LAST_EPISODES) / score for seed in done if score > 0}


def twins_line(out: Path) -> str:
    """The JAX student against its PyTorch twin: student / teacher on the seeds both finished, the RLops gate's test."""
    import numpy as np

    from cleanrl_utils import rlstats

    jax_pair, torch_pair = (next(pair for pair in PAIRS if pair.student == name) for name in TWINS)
    jax_ratios, torch_ratios = student_ratios(out, jax_pair), student_ratios(out, torch_pair)
    if not jax_ratios or not torch_ratios:
        return "The twins: a student of each has not finished yet."
    x_seeds, y_seeds = sorted(jax_ratios), sorted(torch_ratios)
    x, y = np.array([jax_ratios[s] for s in x_seeds]), np.array([torch_ratios[s] for s in y_seeds])
    p = rlstats.improvement_p_value([x], [y], [x_seeds], [y_seeds])  # a seed number shared by both: maybe shared luck
    smallest = rlstats.smallest_p(len(x_seeds), len(y_seeds), len(set(x_seeds) & set(y_seeds)))
    better = float(rlstats.probability_of_improvement(x, y))
    if len(x_seeds) < len(jax_pair.seeds) or len(y_seeds) < len(torch_pair.seeds):
        verdict = f"not decided ({len(x_seeds)} of {len(jax_pair.seeds)} JAX and {len(y_seeds)} of {len(torch_pair.seeds)} PyTorch seeds)"
    elif smallest > ALPHA:
        verdict = f"not decidable (these seeds reach p = {smallest:.2g} at best)"
    else:
        verdict = "**they differ**" if p <= ALPHA else "no difference found"
    return (
        f"The twins, student / teacher: JAX {x.mean():.2f} on seeds {', '.join(map(str, x_seeds))} "
        f"({', '.join(f'{v:.2f}' for v in x)}), PyTorch {y.mean():.2f} on seeds {', '.join(map(str, y_seeds))} "
        f"({', '.join(f'{v:.2f}' for v in y)}); "
        f"P(JAX > PyTorch) = {better:.2f}, p = {p:.3g} (rlstats.improvement_p_value, two-sided): {verdict}."
    )


def main() -> None:
    cli = CommandLine(
        __doc__,
        "qdagger_reincarnation",
        {
            "run": lambda args: run(args.out, args.workers, args.only, one_thread_env(), tuple(args.seeds)),
            "report": report_command(report),
        },
        only_help="run: only the pairs of these scripts (student or teacher) or env ids",
    )
    cli.count("--workers", 2, "run: learning runs at a time (one torch/XLA thread each)")
    cli.parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[],
        help="run: these seeds for every student and scratch run "
        "(default: each pair's own, 1-6 for the PyTorch student, 101-106 for the JAX one)",
    )
    names = [name for pair in PAIRS for name in (pair.student, pair.teacher, pair.env_id)]
    cli.run(cli.parse(dict.fromkeys(cli.commands, names)))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
