"""Does a speed trick pay for itself? Each algorithm file against its textbook form, whole-run steps per second.

    python -m benchmark.guards.textbook_forms list                 # the cases, and whether their text is still in the files
    python -m benchmark.guards.textbook_forms run --rounds 3       # one process at a time, file and textbook form alternating
    python -m benchmark.guards.textbook_forms report               # the table (keep the trick only at >= 1.10x)
    python -m benchmark.guards.textbook_forms learn --seeds 6      # both forms learn alike? (cleanrl_utils.rlops per file)

Our rule (docs/community/script-contract.md): where a file writes something in a faster form than the
one readers know from the paper or from PyTorch's distributions (Gumbel-max sampling instead of
`Categorical(logits=...).sample()`, a Gaussian log-density written out instead of `Normal(...).log_prob`),
the faster form stays only if it gains at least 10% steps per second over a whole run, and its comment
carries the figure. Each case here names the file, the lines of the trick, and the textbook lines that
replace them; the file holds one form, and `run` writes a copy in the other (same name, in a folder of
its own under --out; the files measured here now hold the textbook form, so the copy brings the trick
back), runs both with the same short budget, one torch thread, and records the SPS each run logged
last (global steps over wall time since the start). Rounds alternate so that a drift of the machine's
speed hits both alike; the report compares medians. Measure on an otherwise idle machine.

A switch changes the random draws (or the rounding) a run sees, so `learn` checks that the two forms
learn alike: both forms, seed after seed, tagged `trick` and `textbook` (WANDB_TAGS) through the
project's runner, then `cleanrl_utils.rlops` with the trick as baseline (`<out>/learn/<case>/compare.md`;
exit 1 on a regression). The checks (LEARNING_CHECKS) are sized for a 2-core machine.
"""

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmark.harness import (
    CommandLine,
    QueuedRun,
    markdown_table,
    newest_run_dir,
    one_thread_env,
    report_command,
    run_queue,
    speed_cells,
    summarize_run,
    write_result,
)
from cleanrl_utils import rlops
from cleanrl_utils.tensorboard_reader import read_scalars

REPO = Path(__file__).resolve().parents[2]

KEEP_AT = 1.10  # the trick's whole-run speed-up over the textbook form that keeps it

GUMBEL_MAX = (
    "        # Gumbel-max trick: argmax(logits - log E) with E ~ Exp(1) is a sample from softmax(logits).\n"
    "        action = (logp_all - torch.empty_like(logp_all).exponential_().log()).argmax(-1)\n"
)
CATEGORICAL = "        action = torch.distributions.Categorical(logits=logp_all).sample()\n"

# the written-out forms need `math`; the textbook forms do not
MATH_IMPORT, NO_MATH_IMPORT = "import math\nimport os\n", "import os\n"
GAUSSIAN_COMMENT = "    # The diagonal Gaussian is written out: torch.distributions.Normal costs more than these few ops.\n"
GAUSSIAN_WRITTEN_OUT = (
    "        logprob = (-0.5 * ((action - mean) / logstd.exp()) ** 2 - logstd - 0.5 * math.log(2 * math.pi)).sum(-1)\n"
    "        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + logstd).sum(-1)\n"
)
GAUSSIAN_NORMAL = (
    "        normal = torch.distributions.Normal(mean, logstd.exp())\n"
    "        logprob, entropy = normal.log_prob(action).sum(-1), normal.entropy().sum(-1)\n"
)

LOG_NORM = (
    "        # constant part of the log-density, per action: log sqrt(2 pi) + log scale (not saved: derived)\n"
    '        self.register_buffer("log_norm", 0.5 * math.log(2 * math.pi) + self.action_scale.log(), persistent=False)\n'
)
ACTION_BIAS = '        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0, dtype=torch.float32))\n'
TANH_GAUSSIAN_WRITTEN_OUT = (
    "        noise = torch.randn_like(mean)\n        u = mean + log_std.exp() * noise  # Gaussian sample before squashing\n"
)
TANH_GAUSSIAN_NORMAL = "        normal = torch.distributions.Normal(mean, log_std.exp())\n        u = normal.rsample()  # mean + std * noise: gradients reach mean and std\n"
TANH_GAUSSIAN_LOG_PROB = (
    "        # Change of variables: log pi(action) = log N(u; mean, std) - log |d action / d u|, per dimension, where\n"
    "        # d action / d u = scale * (1 - tanh(u)^2) and log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)),\n"
    "        # a form that stays exact when tanh(u) rounds to +-1.\n"
    "        log_prob = -0.5 * noise.pow(2) - log_std - self.log_norm - 2 * (math.log(2) - u - F.softplus(-2 * u))\n"
)
TANH_GAUSSIAN_LOG_PROB_NORMAL = (
    "        # Change of variables: log pi(action) = log N(u; mean, std) - log |d action / d u|, per dimension, where\n"
    "        # d action / d u = scale * (1 - tanh(u)^2); the 1e-6 keeps the log finite where tanh(u) rounds to +-1.\n"
    "        log_prob = normal.log_prob(u) - torch.log(self.action_scale * (1 - torch.tanh(u).pow(2)) + 1e-6)\n"
)

ATARI_SHORT = ("--env-id", "BreakoutNoFrameskip-v4", "--num-envs", "8", "--num-steps", "128", "--total-timesteps", "8192")
ENVPOOL_SHORT = ("--env-id", "Breakout-v5", "--num-envs", "8", "--num-steps", "128", "--total-timesteps", "8192")
PROCGEN_SHORT = ("--env-id", "starpilot", "--num-envs", "16", "--num-steps", "256", "--total-timesteps", "20480")
# PPG: two phases of 2 policy iterations, each phase ending with its auxiliary epochs (the default phase is 32)
PPG_SHORT = (
    "--env-id",
    "starpilot",
    "--num-envs",
    "16",
    "--num-steps",
    "256",
    "--n-iteration",
    "2",
    "--total-timesteps",
    "16384",
)
HOPPER_PPO_SHORT = ("--env-id", "Hopper-v4", "--total-timesteps", str(8 * 2048))
HOPPER_SAC_SHORT = ("--env-id", "Hopper-v4", "--total-timesteps", "4000", "--learning-starts", "1000")


@dataclass(frozen=True)
class Case:
    script: str  # path under cleanrl/
    trick: str  # what the file does instead of the textbook form
    replacements: tuple[tuple[str, str], ...]  # (the file's lines, the textbook lines)
    args: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{Path(self.script).stem}__{self.trick.split()[0].lower()}"

    def held_form(self) -> str:
        """The form the file holds now: "trick" or "textbook"; an error if it holds neither's lines once each."""
        source = (REPO / "cleanrl" / self.script).read_text()
        for form, side in (("trick", 0), ("textbook", 1)):
            if all(source.count(pair[side]) == 1 for pair in self.replacements):
                return form
        raise SystemExit(f"textbook_forms.py: error: {self.script} holds neither form of {self.name}: update its case")

    def source(self, form: str) -> str:
        """The file's text in `form` ("trick" or "textbook"): the file itself, or the file with the other form's lines swapped."""
        source, held = (REPO / "cleanrl" / self.script).read_text(), self.held_form()
        for trick, textbook in self.replacements if form != held else ():
            source = source.replace(trick, textbook) if form == "textbook" else source.replace(textbook, trick)
        return source


def gaussian_replacements(evaluate: str) -> tuple[tuple[str, str], ...]:
    """The written-out Gaussian's lines and their textbook form, for a file whose evaluation method starts with `evaluate`."""
    return ((MATH_IMPORT, NO_MATH_IMPORT), (GAUSSIAN_COMMENT + evaluate, evaluate), (GAUSSIAN_WRITTEN_OUT, GAUSSIAN_NORMAL))


def gumbel(script: str, args: tuple[str, ...]) -> Case:
    return Case(script, "Gumbel-max sampling (vs Categorical.sample)", ((GUMBEL_MAX, CATEGORICAL),), args)


CASES = [
    gumbel("ppo_atari.py", ATARI_SHORT),
    gumbel("ppo_atari_lstm.py", ATARI_SHORT),
    # one process (no torchrun): the same 8 envs
    gumbel(
        "ppo_atari_multigpu.py", ("--env-id", "BreakoutNoFrameskip-v4", "--local-num-envs", "8", "--total-timesteps", "8192")
    ),
    gumbel("ppo_atari_envpool.py", ENVPOOL_SHORT),
    gumbel("ppo_rnd_envpool.py", ("--env-id", "MontezumaRevenge-v5", "--num-envs", "8", "--total-timesteps", "8192")),
    gumbel("ppo_pettingzoo_ma_atari.py", ("--total-timesteps", "8192")),
    gumbel("ppo_procgen.py", PROCGEN_SHORT),
    gumbel("ppg_procgen.py", PPG_SHORT),
    Case(
        "ppo_continuous_action.py",
        "Gaussian log-density written out (vs Normal)",
        gaussian_replacements("    def evaluate_actions(self, x, action):\n"),
        HOPPER_PPO_SHORT,
    ),
    Case(
        "rpo_continuous_action.py",
        "Gaussian log-density written out (vs Normal)",
        gaussian_replacements("    def evaluate_actions(self, x, action, perturb=True):\n"),
        HOPPER_PPO_SHORT,
    ),
    Case(
        "sac_continuous_action.py",
        "tanh-Gaussian log-density written out (vs Normal and log(scale (1 - tanh^2) + 1e-6))",
        (
            (MATH_IMPORT, NO_MATH_IMPORT),
            (ACTION_BIAS + LOG_NORM, ACTION_BIAS),
            (TANH_GAUSSIAN_WRITTEN_OUT, TANH_GAUSSIAN_NORMAL),
            (TANH_GAUSSIAN_LOG_PROB, TANH_GAUSSIAN_LOG_PROB_NORMAL),
        ),
        HOPPER_SAC_SHORT,
    ),
]


# `learn`: the learning check of a switch, per file (env id, arguments). The Gumbel-max files all sample the
# same softmax policy either way, so ppo_atari.py stands for the seven of them.
LEARNING_CHECKS = {
    "ppo_atari.py": ("BreakoutNoFrameskip-v4", ("--total-timesteps", "100000")),
    "ppo_continuous_action.py": ("Hopper-v4", ("--total-timesteps", "200000")),
    "rpo_continuous_action.py": ("Hopper-v4", ("--total-timesteps", "200000")),
    "sac_continuous_action.py": ("Pendulum-v1", ("--total-timesteps", "20000")),
}
FORMS = ("trick", "textbook")


TEXTBOOK_SEED_OFFSET = 100  # the textbook form's seeds: 101, 102, ... beside the trick's 1, 2, ...


def learning_runs(case: Case, out: Path, seed: int, args: tuple[str, ...], env_id: str) -> list[tuple[str, QueuedRun]]:
    """Both forms' k-th runs (form, run): the trick on seed k, the textbook form on seed 100 + k, so that the forms
    share no seed's luck (rlops counts runs of one seed number under both tags as pairs of seeds, issue 52); the form
    the file does not hold runs from a copy under `out`."""
    runs = []
    for form in FORMS:
        seed_of_form = seed + TEXTBOOK_SEED_OFFSET if form == "textbook" else seed
        program = REPO / "cleanrl" / case.script
        if form != case.held_form():
            program = out / form / case.script  # the same file name: its runs carry the original's exp_name
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text(case.source(form))
        result = out / f"{form}__{seed_of_form}.json"
        summarize = partial(summarize_run, result=result)
        runs.append((form, QueuedRun(result, (str(program),), args, env_id, seed_of_form, summarize=summarize)))
    return runs


def learn(out: Path, seeds: int, only: list[str] | None, checks: dict[str, tuple[str, tuple[str, ...]]]) -> int:
    """Each form of each checked file, `seeds` seeds, tagged by form; then rlops compares textbook with trick per file.

    The exit code is rlops's worst over the files: bad input, then a regression, then an inconclusive comparison.
    """
    code, verdicts = 0, []
    for case in CASES:
        if case.script not in checks or (only and case.script.removesuffix(".py") not in only):
            continue
        env_id, args = checks[case.script]
        case_out = out / case.name
        for seed in range(1, seeds + 1):  # seed after seed, both forms in turn: a drift of the machine hits both
            for form, queued in learning_runs(case, case_out, seed, args, env_id):
                if not queued.result.exists():  # done runs are skipped
                    code = code or run_queue([queued], 1, one_thread_env() | {"WANDB_TAGS": form}, case_out / "logs")
        if code:
            return code
        argv = ["--runs-dir", str(case_out), "--exp-name", Path(case.script).stem, "--tags", *FORMS, "--baseline", "trick"]
        argv += ["--env-ids", env_id, "--output-filename", str(case_out / "compare"), "--fail-on-regression"]
        print(f"{case.script}: python -m cleanrl_utils.rlops {' '.join(argv)}", flush=True)
        verdicts.append(rlops.main(argv))
    worst = (rlops.EXIT_BAD_INPUT, rlops.EXIT_REGRESSION, rlops.EXIT_INCONCLUSIVE)
    return next((c for c in worst if c in verdicts), 0)


def result_path(out: Path, case: Case, form: str, round_: int) -> Path:
    return out / f"{case.name}__{form}__{round_}.json"


def run_one(case: Case, form: str, workdir: Path) -> float:
    """The last SPS logged by one run of the file ("trick") or of its textbook copy ("textbook")."""
    workdir.mkdir(parents=True, exist_ok=True)
    script = REPO / "cleanrl" / case.script
    if form != case.held_form():
        script = workdir / Path(case.script).name  # the same file name: the run is named as the original's
        script.write_text(case.source(form))
    env = one_thread_env() | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(script), *case.args], cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)
    return read_scalars(newest_run_dir(workdir))["charts/SPS"][-1][1]


def run(out: Path, rounds: int, only: list[str] | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for round_ in range(1, rounds + 1):
        for case in CASES:
            if only and case.script.removesuffix(".py") not in only:
                continue
            for form in ("trick", "textbook") if round_ % 2 else ("textbook", "trick"):
                result = result_path(out, case, form, round_)
                if result.exists():
                    continue
                sps = run_one(case, form, result.with_suffix(""))
                write_result(result, {"case": case.name, "form": form, "sps": sps})
                print(f"{case.name} {form} round {round_}: {sps:.0f} steps/s", flush=True)


def report(out: Path) -> str:
    rows = []
    for case in CASES:
        sps = {form: sorted(out.glob(f"{case.name}__{form}__*.json")) for form in ("trick", "textbook")}
        rates = {form: [json.loads(p.read_text())["sps"] for p in paths] for form, paths in sps.items()}
        if not rates["trick"] or not rates["textbook"]:
            continue  # not measured: no row rather than a made-up one
        trick, textbook = (f"{median} ({rounds})" for median, rounds in (speed_cells(rates[form]) for form in sps))
        ratio = statistics.median(rates["trick"]) / statistics.median(rates["textbook"])
        keep = "yes" if ratio >= KEEP_AT else "**no**: use the textbook form"
        rows.append([case.script, case.trick, trick, textbook, f"{ratio:.2f}×", keep])
    header = ["file", "trick (vs textbook form)", "SPS with the trick, median (rounds)", "textbook form", "speed-up"]
    return markdown_table([*header, "keep (≥ 1.10×)"], rows)


def list_cases() -> None:
    for case in CASES:
        print(f"{case.script}: {case.trick}; the file holds the {case.held_form()} form")


def main() -> None:
    cli = CommandLine(
        __doc__,
        "textbook_forms",
        {
            "list": lambda args: list_cases(),
            "run": lambda args: run(args.out, args.rounds, args.only),
            "report": report_command(report),
            "learn": lambda args: learn(args.out / "learn", args.seeds, args.only, LEARNING_CHECKS),
        },
        only_help="run/learn: only these files (without .py)",
    )
    cli.count("--rounds", 3, "run: rounds of both forms")
    # one env per file: rlops needs 6 independent seeds a side before a comparison can be decided (the forms run
    # seed numbers of their own, see `learning_runs`)
    cli.count("--seeds", 6, "learn: seeds per form")
    cases = [case.script.removesuffix(".py") for case in CASES]
    cli.run(cli.parse({"run": cases, "learn": [script.removesuffix(".py") for script in LEARNING_CHECKS]}))


if __name__ == "__main__":
    main()
