"""Slurm mode of the benchmark: a job-array script from a template, one task per (environment, seed), submitted with sbatch."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.benchmark.common import BadInput, git_tag, tagged_wandb_tags

SLURM_DIR = Path("slurm")
SLURM_LOG_DIR = SLURM_DIR / "logs"
SBATCH_TIMEOUT_SECONDS = 120

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")
PLACEHOLDERS = ("array", "env_ids", "seeds", "len_seeds", "command", "gpus_per_task", "cpus_per_gpu", "ntasks", "nodes")
# The flags a placeholder cannot be filled without; placeholders not listed need none.
PLACEHOLDER_FLAGS = {
    "gpus_per_task": ("--slurm-gpus-per-task",),
    "cpus_per_gpu": ("--slurm-total-cpus", "--slurm-gpus-per-task", "--slurm-ntasks"),
    "ntasks": ("--slurm-ntasks",),
    "nodes": ("--slurm-nodes",),
}
# `nodes` may stay empty: the template then simply gets no `#SBATCH --nodes` line.
OPTIONAL_PLACEHOLDERS = {"nodes"}
# Without these the script would not be a job array that runs the command.
REQUIRED_PLACEHOLDERS = ("array", "command")


@dataclass(frozen=True)
class SlurmArray:
    """What the job array runs: `command --env-id E --seed S` for every environment E and seed S."""

    env_ids: list[str]
    seeds: list[int]
    base_argv: list[str]
    workers: int

    @property
    def size(self) -> int:
        return len(self.env_ids) * len(self.seeds)


def bash_array(words: list[str]) -> str:
    """A bash array literal whose elements come back exactly as given, whatever characters they hold."""
    return "(" + " ".join(shlex.quote(word) for word in words) + ")"


def cpus_per_gpu(total_cpus: int, gpus_per_task: int, ntasks: int) -> int:
    """The job's CPUs shared among all of its GPUs, rounded up so that no CPU is left out."""
    return -(-total_cpus // (gpus_per_task * ntasks))


def placeholder_values(array: SlurmArray, flags: dict[str, int | None]) -> dict[str, str | None]:
    """The text for each placeholder; None where a flag it needs was not given."""
    gpus, total, ntasks, nodes = (
        flags[flag] for flag in ("--slurm-gpus-per-task", "--slurm-total-cpus", "--slurm-ntasks", "--slurm-nodes")
    )
    # With no concurrency limit (a dry run) the array runs as many tasks at once as Slurm allows.
    limit = f"%{array.workers}" if array.workers > 0 else ""
    return {
        "array": f"0-{array.size - 1}{limit}",
        "env_ids": bash_array(array.env_ids),
        "seeds": bash_array([str(seed) for seed in array.seeds]),
        "len_seeds": str(len(array.seeds)),
        "command": shlex.join(array.base_argv),
        "gpus_per_task": None if gpus is None else str(gpus),
        "cpus_per_gpu": None if None in (total, gpus, ntasks) else str(cpus_per_gpu(total, gpus, ntasks)),
        "ntasks": None if ntasks is None else str(ntasks),
        "nodes": "" if nodes is None else f"#SBATCH --nodes={nodes}",
    }


def check_placeholders(template: str, template_name: str, flags: dict[str, int | None]) -> None:
    """Every placeholder in the template must be known and fillable from the flags given; warn about unused flags."""
    used = set(PLACEHOLDER.findall(template))
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        listed = ", ".join("{{" + name + "}}" for name in unknown)
        raise BadInput(f"{template_name} has unknown placeholders {listed} (known: {', '.join(PLACEHOLDERS)})")
    absent = [name for name in REQUIRED_PLACEHOLDERS if name not in used]
    if absent:
        listed = ", ".join("{{" + name + "}}" for name in absent)
        raise BadInput(f"{template_name} lacks {listed}: the job array could not run one task per environment and seed")
    lacking = {
        name: [flag for flag in PLACEHOLDER_FLAGS.get(name, ()) if flags[flag] is None]
        for name in sorted(used - OPTIONAL_PLACEHOLDERS)
    }
    lacking = {name: missing for name, missing in lacking.items() if missing}
    if lacking:
        names = ", ".join("{{" + name + "}}" for name in lacking)
        missing_flags = dict.fromkeys(flag for missing in lacking.values() for flag in missing)
        raise BadInput(f"{template_name} uses {names}: give {', '.join(missing_flags)}")
    useful = {flag for name in used for flag in PLACEHOLDER_FLAGS.get(name, ())}
    for flag, value in flags.items():
        if value is not None and flag not in useful:
            print(f"benchmark: warning: {template_name} does not use {flag}; ignoring it", file=sys.stderr)


def fill_placeholders(template: str, values: dict[str, str | None]) -> str:
    # One pass, so text put in (an env id or command holding braces) is never filled again.
    return PLACEHOLDER.sub(lambda match: values[match.group(1)] or "", template)


def add_exports(script: str, exports: dict[str, str]) -> str:
    """Export variables right after the script's leading comment block.

    sbatch reads `#SBATCH` lines only up to the first command, so the exports must not come earlier.
    """
    if not exports:
        return script
    lines = script.splitlines(keepends=True)
    header = 0
    while header < len(lines) and (not lines[header].strip() or lines[header].lstrip().startswith("#")):
        header += 1
    if header and not lines[header - 1].endswith("\n"):
        lines[header - 1] += "\n"
    block = [
        "# Set by cleanrl_utils.benchmark:\n",
        *(f"export {name}={shlex.quote(value)}\n" for name, value in exports.items()),
    ]
    return "".join([*lines[:header], *block, *lines[header:]])


def render_slurm_script(template: str, template_name: str, array: SlurmArray, flags: dict[str, int | None]) -> str:
    """The job-array script: the template with its placeholders filled (BadInput when it cannot be)."""
    check_placeholders(template, template_name, flags)
    return fill_placeholders(template, placeholder_values(array, flags))


def read_template(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise BadInput(f"cannot find the Slurm template {path!r}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"cannot read the Slurm template {path!r}: {error}") from None


def slurm_exports(auto_tag: bool) -> dict[str, str]:
    """Variables the script sets for its runs: the auto-tag, and unbuffered Python so the log files fill as runs go."""
    exports = {"PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}
    if auto_tag:
        tags = tagged_wandb_tags(os.environ.get("WANDB_TAGS"), git_tag())
        if tags is not None:
            exports["WANDB_TAGS"] = tags
    return exports


def write_slurm_script(script: str) -> Path:
    """Save the script as slurm/<uuid4>.slurm, creating slurm/logs/ for the templates' log files on the way."""
    path = SLURM_DIR / f"{uuid.uuid4()}.slurm"
    try:
        SLURM_LOG_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
    except OSError as error:
        raise BadInput(f"cannot write the Slurm script {path}: {error}") from None
    return path


def find_sbatch() -> str:
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise BadInput(
            "cannot find sbatch on PATH (is Slurm installed here?); --workers 0 writes the script without submitting it"
        )
    return sbatch


def one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip()) or "(no output)"


def submit(sbatch: str, path: Path) -> str:
    """Submit the script; returns the job id."""
    try:
        proc = subprocess.run(
            [sbatch, "--parsable", str(path)], capture_output=True, text=True, timeout=SBATCH_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise BadInput(f"sbatch did not answer within {SBATCH_TIMEOUT_SECONDS} s; the script is {path}") from None
    except OSError as error:
        raise BadInput(f"cannot run sbatch: {error}") from None
    if proc.returncode != 0:
        raise BadInput(f"sbatch refused {path} (exit code {proc.returncode}): {one_line(proc.stderr)}")
    # --parsable prints "<job id>" or "<job id>;<cluster>".
    job_id = proc.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise BadInput(f"sbatch accepted {path} but printed no job id: {one_line(proc.stdout)}")
    return job_id


SBATCH_LOG_OPTION = re.compile(r"^#SBATCH\s+(?:--output|--error|-o|-e)(?:=|\s+)(\S+)", re.MULTILINE)


def log_paths(script: str, job_id: str) -> list[str]:
    """Where the array tasks' output goes, from the script's --output/--error lines (Slurm's default when none)."""
    patterns = SBATCH_LOG_OPTION.findall(script) or ["slurm-%A_%a.out"]
    return [pattern.replace("%A", job_id).replace("%a", "<task>") for pattern in patterns]


def describe_array(array: SlurmArray) -> str:
    return f"{array.size} array tasks ({len(array.env_ids)} environments x {len(array.seeds)} seeds)"


def run_slurm(template_path: str, array: SlurmArray, flags: dict[str, int | None], auto_tag: bool) -> int:
    """Write the job-array script and, unless this is a dry run (no workers), submit it."""
    template = read_template(template_path)
    script = render_slurm_script(template, template_path, array, flags)
    # Before writing anything: a machine without Slurm gets no stray script.
    sbatch = find_sbatch() if array.workers > 0 else None
    script = add_exports(script, slurm_exports(auto_tag))
    path = write_slurm_script(script)
    if sbatch is None:
        print(path)
        print(
            f"benchmark: wrote {path}: {describe_array(array)}; not submitted (--workers 0)."
            f" Submit it with `sbatch {path}`, or rerun with --workers N to submit it with at most N tasks at a time",
            file=sys.stderr,
        )
        return 0
    job_id = submit(sbatch, path)
    print(job_id)
    print(
        f"benchmark: submitted {path} as job {job_id}: {describe_array(array)}, up to {array.workers} at a time\n"
        f"benchmark: follow it with `squeue -j {job_id}` or `scontrol show job {job_id}`"
        f" (`sacct -j {job_id}` once tasks finish, where accounting is on); cancel with `scancel {job_id}`\n"
        f"benchmark: logs: {', '.join(log_paths(script, job_id))} (<task> = array index 0-{array.size - 1})",
        file=sys.stderr,
    )
    return 0
