"""Does a speed trick pay for itself? Each algorithm file against its textbook form, whole-run steps per second.

    python benchmark/textbook_forms.py list                 # the cases, and whether their text is still in the files
    python benchmark/textbook_forms.py run --rounds 3       # one process at a time, file and textbook form alternating
    python benchmark/textbook_forms.py report               # the table (keep the trick only at >= 1.10x)

Our rule (docs/community/script-contract.md): where a file writes something in a faster form than the
one readers know from the paper or from PyTorch's distributions (Gumbel-max sampling instead of
`Categorical(logits=...).sample()`, a Gaussian log-density written out instead of `Normal(...).log_prob`),
the faster form stays only if it gains at least 10% steps per second over a whole run, and its comment
carries the figure. Each case here names the file, the lines of the trick, and the textbook lines that
replace them; `run` writes the textbook copy of the file (same name, in a folder of its own under
--out), runs both with the same short budget, one torch thread, and records the SPS each run logged
last (global steps over wall time since the start). Rounds alternate so that a drift of the machine's
speed hits both alike; the report compares medians. Measure on an otherwise idle machine.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmark.benchlib import newest_run_dir, one_thread_env  # noqa: E402
from cleanrl_utils.tensorboard_reader import read_scalars  # noqa: E402

KEEP_AT = 1.10  # the trick's whole-run speed-up over the textbook form that keeps it

GUMBEL_MAX = "        action = (logp_all - torch.empty_like(logp_all).exponential_().log()).argmax(-1)\n"
CATEGORICAL = "        action = torch.distributions.Categorical(logits=logp_all).sample()\n"

GAUSSIAN_WRITTEN_OUT = (
    "        logprob = (-0.5 * ((action - mean) / logstd.exp()) ** 2 - logstd - 0.5 * math.log(2 * math.pi)).sum(-1)\n"
    "        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + logstd).sum(-1)\n"
)
GAUSSIAN_NORMAL = (
    "        normal = torch.distributions.Normal(mean, logstd.exp())\n"
    "        logprob, entropy = normal.log_prob(action).sum(-1), normal.entropy().sum(-1)\n"
)

TANH_GAUSSIAN_WRITTEN_OUT = (
    "        noise = torch.randn_like(mean)\n        u = mean + log_std.exp() * noise  # Gaussian sample before squashing\n"
)
TANH_GAUSSIAN_NORMAL = "        normal = torch.distributions.Normal(mean, log_std.exp())\n        u = normal.rsample()\n"
TANH_GAUSSIAN_LOG_PROB = (
    "        log_prob = -0.5 * noise.pow(2) - log_std - self.log_norm - 2 * (math.log(2) - u - F.softplus(-2 * u))\n"
)
TANH_GAUSSIAN_LOG_PROB_NORMAL = (
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

    def textbook_source(self) -> str:
        """The file with each trick's lines replaced by the textbook lines; an error if the file changed."""
        source = (REPO / "cleanrl" / self.script).read_text()
        for trick, textbook in self.replacements:
            if source.count(trick) != 1:
                raise SystemExit(f"textbook_forms.py: error: {self.script} no longer holds the lines of {self.name} once")
            source = source.replace(trick, textbook)
        return source


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
        ((GAUSSIAN_WRITTEN_OUT, GAUSSIAN_NORMAL),),
        HOPPER_PPO_SHORT,
    ),
    Case(
        "rpo_continuous_action.py",
        "Gaussian log-density written out (vs Normal)",
        ((GAUSSIAN_WRITTEN_OUT, GAUSSIAN_NORMAL),),
        HOPPER_PPO_SHORT,
    ),
    Case(
        "sac_continuous_action.py",
        "tanh-Gaussian log-density written out (vs Normal and log(scale (1 - tanh^2) + 1e-6))",
        ((TANH_GAUSSIAN_WRITTEN_OUT, TANH_GAUSSIAN_NORMAL), (TANH_GAUSSIAN_LOG_PROB, TANH_GAUSSIAN_LOG_PROB_NORMAL)),
        HOPPER_SAC_SHORT,
    ),
]


def result_path(out: Path, case: Case, form: str, round_: int) -> Path:
    return out / f"{case.name}__{form}__{round_}.json"


def run_one(case: Case, form: str, workdir: Path) -> float:
    """The last SPS logged by one run of the file ("trick") or of its textbook copy ("textbook")."""
    workdir.mkdir(parents=True, exist_ok=True)
    script = REPO / "cleanrl" / case.script
    if form == "textbook":
        script = workdir / Path(case.script).name  # the same file name: the run is named as the original's
        script.write_text(case.textbook_source())
    env = one_thread_env() | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(script), *case.args], cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL)
    return read_scalars(newest_run_dir(workdir))["charts/SPS"][-1][1]


def run(out: Path, rounds: int, only: list[str] | None) -> None:
    for round_ in range(1, rounds + 1):
        for case in CASES:
            if only and case.script.removesuffix(".py") not in only:
                continue
            for form in ("trick", "textbook") if round_ % 2 else ("textbook", "trick"):
                result = result_path(out, case, form, round_)
                if result.exists():
                    continue
                sps = run_one(case, form, result.with_suffix(""))
                result.write_text(json.dumps({"case": case.name, "form": form, "sps": sps}))
                print(f"{case.name} {form} round {round_}: {sps:.0f} steps/s", flush=True)


def report(out: Path) -> str:
    lines = [
        "| file | trick (vs textbook form) | SPS with the trick, median (rounds) | textbook form | speed-up | keep (≥ 1.10×) |",
        "|---|---|---|---|---|---|",
    ]
    for case in CASES:
        sps = {form: sorted(out.glob(f"{case.name}__{form}__*.json")) for form in ("trick", "textbook")}
        rates = {form: [json.loads(p.read_text())["sps"] for p in paths] for form, paths in sps.items()}
        if not rates["trick"] or not rates["textbook"]:
            continue  # not measured: no row rather than a made-up one
        trick, textbook = statistics.median(rates["trick"]), statistics.median(rates["textbook"])
        ratio = trick / textbook
        lines.append(
            f"| {case.script} | {case.trick} | {trick:.0f} ({', '.join(f'{r:.0f}' for r in rates['trick'])}) "
            f"| {textbook:.0f} ({', '.join(f'{r:.0f}' for r in rates['textbook'])}) | {ratio:.2f}× "
            f"| {'yes' if ratio >= KEEP_AT else '**no**: use the textbook form'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["list", "run", "report"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmark_runs" / "textbook_forms")
    parser.add_argument("--only", nargs="+", help="run: only these files (without .py)")
    args = parser.parse_args()
    if args.command == "list":
        for case in CASES:
            case.textbook_source()  # fails with one line if the file no longer holds the trick's lines
            print(f"{case.script}: {case.trick}")
    elif args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        run(args.out, args.rounds, args.only)
    else:
        print(report(args.out))


if __name__ == "__main__":
    main()
