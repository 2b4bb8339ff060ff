"""The command line every algorithm script and every tool shares: a dataclass of flags parsed with tyro, and
booleans written as flags (`--capture-video`, `--no-cuda`) or as words (`--capture-video True`), as the
published commands write them.

Bad input is one line on stderr, `<program>: error: ...`, and exit code 2, before any work: tyro's parse
errors are turned into one line, and `argument_problems` checks the parsed values (numbers finite and in
range, names usable as folder names). `argument_problems` also checks arguments read back from a checkpoint.
An algorithm file calls `check_command_line` right after its `Args`, so that all this comes before its imports
of torch, JAX or envpool; nothing here imports more than the standard library and tyro.
"""

import contextlib
import io
import math
import numbers
import os
import re
import sys
import time
import typing
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")
TRUE_WORDS, FALSE_WORDS = {"true", "1", "yes"}, {"false", "0", "no"}

# Seeds every random generator of the scripts accepts: NumPy's legacy seeding takes 0 to 2**32 - 1, envpool's
# (and Procgen's through it) a 32-bit signed int
SEED_MAX = 2**31 - 1
# The largest count NumPy and PyTorch hold in their 64-bit integers
INT_MAX = 2**63 - 1
# A file or folder name holds at most this many bytes (Linux, macOS, Windows)
NAME_MAX = 255
# What a run adds to its folder name after the time: free_run_name's `-N`, the evaluation videos' `-eval`
RUN_NAME_SUFFIX = "-999-eval"
LEARNING_RATES = ("learning_rate", "policy_lr", "q_lr", "init_lr")
# Known ranges by field name
UNIT_INTERVAL = ("gamma", "int_gamma", "gae_lambda", "q_lambda", "start_e", "end_e")
HALF_OPEN_UNIT_INTERVAL = ("tau", "exploration_fraction", "update_proportion")  # (0, 1]
POSITIVE = (*LEARNING_RATES, "clip_coef", "max_grad_norm", "target_kl")
# Counts that every script which has them needs to be 1 or more (others, such as `batch_size`, are set by some scripts
# from the rest, and stay with them)
POSITIVE_COUNTS = (
    "total_timesteps",
    "buffer_size",
    "num_steps",
    "num_minibatches",
    "update_epochs",
    "target_network_frequency",
    "train_frequency",
    "policy_frequency",
)
# W&B refuses these characters in a project name (and "/" in an entity)
WANDB_FORBIDDEN = set("/\\#?%:")


def boolean_fields(Args: type) -> set[str]:
    """The names of `Args`' boolean fields, as flags spell them (`capture-video`) and as fields do (`capture_video`)."""
    try:
        hints = typing.get_type_hints(Args)  # resolves string annotations and strips Annotated
    except Exception:  # a name the annotations use is not importable here: read them as written
        hints = {f.name: f.type for f in fields(Args)}
    names = {f.name for f in fields(Args) if hints.get(f.name) in (bool, "bool")}
    return names | {name.replace("_", "-") for name in names}


def bool_words_as_flags(Args: type, argv: Sequence[str]) -> list[str]:
    """`argv` with `--flag True`/`--flag=False` spelled as tyro's `--flag`/`--no-flag`.

    The published commands write booleans as words (`--autotune False`); tyro only knows the flags.
    """
    booleans = boolean_fields(Args)
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name, _, value = word[2:].partition("=")
        if word.startswith("--") and name in booleans:
            if not value and i + 1 < len(argv) and argv[i + 1].lower() in TRUE_WORDS | FALSE_WORDS:
                value, i = argv[i + 1], i + 1
            if value.lower() in FALSE_WORDS:
                word = "--no-" + name
            elif value.lower() in TRUE_WORDS:
                word = "--" + name
        out.append(word)
        i += 1
    return out


def named_fields(Args: type, argv: Sequence[str]) -> set[str]:
    """The field names of `Args` that `argv` gives a value, the default's too: `--seed 1`, `--seed=1`, `--no-track`,
    or a tyro alias of the field (`--teacher-policy-hf-repo`)."""
    spelled, booleans = {f.name: f.name for f in fields(Args)}, boolean_fields(Args)
    with contextlib.suppress(Exception):  # a name the annotations use is not importable here: no aliases then
        for field, hint in typing.get_type_hints(Args, include_extras=True).items():
            aliases = [a for meta in getattr(hint, "__metadata__", ()) for a in getattr(meta, "aliases", None) or ()]
            spelled |= {alias.lstrip("-").replace("-", "_"): field for alias in aliases}
    named = set()
    for word in argv:
        name = word[2:].partition("=")[0] if word.startswith("--") else ""
        if name not in booleans and name[:3] in ("no-", "no_") and name[3:] in booleans:
            name = name[3:]
        named.add(spelled.get(name.replace("-", "_")))
    return named - {None}


def parse_args(Args: type[T], argv: Sequence[str] | None = None, prog: str | None = None, warn: bool = True) -> T:
    """`Args` from the command line (tyro), booleans accepted as flags or as words.

    A parse error or a value `argument_problems` refuses ends the program with one line on stderr,
    `<program>: error: ...` (the program named by `prog`'s last word, else the script's file name), exit code 2.
    tyro's warnings, if any, go to stderr unless `warn` is False.
    """
    import tyro

    argv = bool_words_as_flags(Args, sys.argv[1:] if argv is None else argv)
    name = program_name(prog)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = tyro.cli(Args, args=argv, prog=prog)
    except SystemExit as stop:
        if stop.code in (0, None):  # --help
            raise
        fail(name, tyro_error(Args, argv, prog) or captured.getvalue())
    if warn:
        sys.stderr.write(captured.getvalue())
    problems = argument_problems(args)
    if problems:
        fail(name, "; ".join(problems))
    return args


def check_command_line(Args: type, module_name: str) -> None:
    """Refuse bad input on the command line at once, before an algorithm file imports torch, JAX or envpool
    (seconds): the file calls this right after its `Args`, with its `__name__`.

    Run as a script (`module_name` "__main__"), what `parse_args` refuses ends it with one line and exit code 2,
    as does a replay memory (`buffer_size`) that could not fit in this machine's memory even at 64 bytes a
    transition; `--help` prints the help and exits. Imported as a module (tests, the zoo), nothing is read.
    The run's own parse, `Experiment.from_command_line`, reads the command line again and checks the rest:
    a `--resume` checkpoint's arguments, the script's own rules, the env, the memory its observations take.
    """
    if module_name != "__main__":
        return
    args = parse_args(Args, warn=False)  # the run's own parse shows tyro's warnings, once
    if getattr(args, "resume", None):
        holder = resumed_folder_writer(args.resume)
        if holder is not None:
            fail(program_name(None), holder)
    if getattr(args, "buffer_size", None) is not None and not getattr(args, "resume", None):
        problem = replay_memory_problem(args, 0)  # its observations add to that: checked once the env is made
        if problem:
            fail(program_name(None), problem)


def resumed_folder_writer(resume: str) -> str | None:
    """Why `--resume resume` cannot write its run folder now (another run holds its lock), or None: told before the
    slow imports. The checkpoint's header alone is read (`checkpoint.peek_run_name`); the run takes the lock itself
    later (`Experiment`), which is what keeps a second writer out."""
    from cleanrl_utils.runtime import checkpoint, run_folder

    name = checkpoint.peek_run_name(resume)
    if name is None or path_component_problems("run_name", name):
        return None  # the run's own load says what the file is
    holder = run_folder.writer_of(f"{run_folder.ROOT}/{name}")
    return None if holder is None else run_folder.busy(f"{run_folder.ROOT}/{name}", holder)


def program_name(prog: str | None) -> str:
    """`submit_exp` for `python -m cleanrl_utils.submit_exp`, `ppo.py` for a script run as `python .../ppo.py`."""
    words = (prog or sys.argv[0]).split() or ["python"]
    last = words[-1]
    return os.path.basename(last) if last.endswith(".py") else last.rsplit(".", 1)[-1]


def fail(program: str, message: str) -> NoReturn:
    """Bad input: one line on stderr and exit code 2, no traceback."""
    print(f"{program}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def tyro_error(Args: type, argv: Sequence[str], prog: str | None) -> str:
    """Tyro's error box for `argv` as one line: its first paragraph, and the flag it suggests if any.

    The box is drawn again as wide as its text (COLUMNS), so that no line of it is wrapped.
    """
    import tyro

    captured, columns = io.StringIO(), os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100000"
    try:
        with contextlib.redirect_stderr(captured), contextlib.suppress(SystemExit):
            tyro.cli(Args, args=argv, prog=prog)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return box_text(captured.getvalue())


def box_text(text: str) -> str:
    """The first paragraph of an error box tyro drew (with or without box-drawing characters), on one line."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("╭")), 0)
    paragraphs: list[list[str]] = [[]]
    for line in lines[start + 1 :]:  # the first line is the box's title
        line = line.strip().strip("│╭╮╰╯").strip()
        if not line.strip("─-"):  # a rule between paragraphs
            paragraphs.append([])
        else:
            paragraphs[-1].append(" ".join(line.split()))
    paragraphs = [p for p in paragraphs if p]
    if not paragraphs:
        return ""
    message = " ".join(paragraphs[0])
    if paragraphs[0][0].startswith("Missing from"):  # the required flags, each with its help: name them only
        message = "missing " + ", ".join(line.split()[0] for line in paragraphs[0][1:] if line.startswith("-"))
    suggestions = next((p[1:] for p in paragraphs if p[0] == "Perhaps you meant:"), [])
    flags = [line.split()[0] for line in suggestions if line.startswith("-")]
    return message + (f" (perhaps you meant {' or '.join(flags)})" if flags else "")


# ---- the values --------------------------------------------------------------------------------------------------


def argument_problems(args: Any) -> list[str]:
    """What is wrong with the values of `args` (a dataclass of flags, or a mapping of them), one line each; empty
    when nothing is. Checked by field name and value, for every script and tool:

    - every float is finite (no nan or inf), every int is 0 or more and fits 64 bits; `seed` (and `start_seed`) lies
      in 0 to 2**31 - 1, what every random generator of the scripts accepts;
    - known ranges: learning rates, `clip_coef`, `max_grad_norm` and `target_kl` are positive, as are the counts
      of POSITIVE_COUNTS (`total_timesteps`, `buffer_size`, `num_steps`...); other `*_coef`, `*alpha` and `*noise*`
      are not negative; `gamma`, `gae_lambda`, `q_lambda`, `start_e`, `end_e` in [0, 1], `tau`,
      `exploration_fraction` and `update_proportion` in (0, 1];
    - strings are valid UTF-8 without NUL characters; `exp_name` and `env_id` make a run's folder name
      (`runs/{env_id}__{exp_name}__{seed}__{time}`): no empty part, `.` or `..`, no control characters, no `/`
      in `exp_name`, and the folder name fits in 255 bytes; `wandb_entity`, `hf_entity` and
      `teacher_model_exp_name` are one name each, `wandb_project_name` one W&B accepts;
    - a `batch_size` sampled from a replay memory of `buffer_size` is at most that.

    What depends on one script (sizes that must divide, a replay memory that must fit in memory) stays in it.
    Pass the dataclass where there is one: a mapping's values are checked by their own types, so an int given for a
    field declared a float (`v_min = -10`) is checked as an int.
    """
    values = dict(args) if isinstance(args, Mapping) else {f.name: getattr(args, f.name) for f in fields(args)}
    floats = set() if isinstance(args, Mapping) else float_fields(type(args))
    problems = [problem for name, value in values.items() for problem in value_problems(name, value, name in floats)]
    return problems or name_problems(values) + relation_problems(values)  # once each value is valid on its own


def float_fields(Args: type) -> set[str]:
    """The fields declared as floats (`float`, `float | None`...): their defaults may be written as ints (`v_min = -10`)."""
    try:
        hints = typing.get_type_hints(Args)
    except Exception:  # a name the annotations use is not importable here: read them as written
        hints = {f.name: f.type for f in fields(Args)}
    return {f.name for f in fields(Args) if "float" in str(hints.get(f.name))}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def shown(value: Any) -> str:
    """A value as a message shows it: long ones cut short."""
    if isinstance(value, numbers.Integral) and abs(value) > 10**18:
        return f"{'-' if value < 0 else ''}about 10**{int(math.log10(abs(value)))}"
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:30]!r}... ({len(value)} characters)"
    return repr(value) if isinstance(value, str) else str(value)


def value_problems(name: str, value: Any, is_float: bool = False) -> list[str]:
    """The problems of one field's value (each item of a list); `is_float`: the field is declared a float."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, list | tuple):
        return [problem for item in value for problem in value_problems(name, item, is_float)][:1]
    if isinstance(value, str | os.PathLike):
        return text_problems(name, os.fspath(value))
    if isinstance(value, numbers.Integral) and not is_float:  # NumPy's ints too (arguments read from a checkpoint)
        return int_problems(name, int(value))
    if isinstance(value, numbers.Real):
        return float_problems(name, value)
    return []


def text_problems(name: str, text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        return []
    if "\0" in text:
        return [f"{flag(name)} contains a NUL character"]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return [f"{flag(name)} is not valid UTF-8: {shown(text)}"]
    return []


def int_problems(name: str, value: int) -> list[str]:
    if name in ("seed", "start_seed"):  # the benchmark runner's first seed
        if not 0 <= value <= SEED_MAX:
            return [f"{flag(name)} must be between 0 and {SEED_MAX} (2**31 - 1), got {shown(value)}"]
        return []
    if name in POSITIVE_COUNTS and value <= 0:
        return [f"{flag(name)} must be positive, got {shown(value)}"]
    if value < 0:
        return [f"{flag(name)} must not be negative, got {shown(value)}"]
    if value > INT_MAX:
        return [f"{flag(name)} must be at most {INT_MAX} (2**63 - 1), got {shown(value)}"]
    return []


def float_problems(name: str, value: Any) -> list[str]:
    try:
        value = float(value)
    except OverflowError:  # an int too large for a float
        value = math.inf
    if not math.isfinite(value):
        return [f"{flag(name)} must be a finite number, got {value}"]
    if name in UNIT_INTERVAL and not 0 <= value <= 1:
        return [f"{flag(name)} must be in [0, 1], got {value}"]
    if name in HALF_OPEN_UNIT_INTERVAL and not 0 < value <= 1:
        return [f"{flag(name)} must be in (0, 1], got {value}"]
    if name in POSITIVE and not value > 0:
        return [f"{flag(name)} must be positive, got {value}"]
    if (name.endswith(("_coef", "alpha")) or "noise" in name or name == "final_lr") and value < 0:
        return [f"{flag(name)} must not be negative, got {value}"]
    return []


def relation_problems(values: Mapping[str, Any]) -> list[str]:
    """Values that do not go together, whatever the script."""
    batch, memory = values.get("batch_size"), values.get("buffer_size")
    if isinstance(batch, numbers.Integral) and isinstance(memory, numbers.Integral) and batch > memory > 0:
        return [f"--batch-size {batch} is more than the replay memory holds (--buffer-size {memory})"]
    return []


def name_problems(values: Mapping[str, Any]) -> list[str]:
    """The problems of the names that become folder names, W&B names or Hub names."""
    problems = []
    if isinstance(values.get("exp_name"), str):
        problems += path_component_problems("exp_name", values["exp_name"])
    if isinstance(values.get("env_id"), str):  # namespaced ids have folders: ALE/Breakout-v5, dm_control/...
        for part in values["env_id"].split("/"):
            problems += path_component_problems("env_id", part)
    if not problems and {"exp_name", "env_id", "seed"} <= set(values):
        problems += run_name_problems(values["env_id"], values["exp_name"], values["seed"])
    for name in ("hf_entity", "teacher_model_exp_name"):
        if values.get(name):
            problems += path_component_problems(name, values[name])
    project, entity = values.get("wandb_project_name"), values.get("wandb_entity")
    if isinstance(project, str) and (not project or len(project) > 128 or WANDB_FORBIDDEN & set(project)):
        problems.append(
            f"{flag('wandb_project_name')} must be 1 to 128 characters, none of {''.join(sorted(WANDB_FORBIDDEN))}, got {shown(project)}"
        )
    if isinstance(entity, str):
        problems += path_component_problems("wandb_entity", entity)
    return problems[:1]


def path_component_problems(name: str, text: str) -> list[str]:
    """Why `text` cannot be one file or folder name (a part of a path), if it cannot."""
    if not text:
        return [f"{flag(name)} is empty"]
    if text in (".", ".."):
        return [f"{flag(name)} cannot be {text!r}: it names a folder of its own"]
    if "/" in text or "\\" in text:
        return [f"{flag(name)} cannot contain / or \\ (it becomes a folder name), got {shown(text)}"]
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in text):
        return [f"{flag(name)} contains a control character: {shown(text)}"]
    if len(os.fsencode(text)) > NAME_MAX:
        return [f"{flag(name)} is longer than a file name may be ({NAME_MAX} bytes), got {shown(text)}"]
    return []


def run_name_problems(env_id: str, exp_name: str, seed: Any) -> list[str]:
    """The run's folder (and its videos' folder) `{env_id}__{exp_name}__{seed}__{time}` must fit in a file name."""
    folder = f"{env_id}__{exp_name}__{seed}__{int(time.time())}{RUN_NAME_SUFFIX}".rsplit("/", 1)[-1]
    size = len(os.fsencode(folder))
    if size <= NAME_MAX:
        return []
    room = len(os.fsencode(exp_name)) - (size - NAME_MAX)
    return [
        f"{flag('exp_name')} is too long for the run's folder name {{env_id}}__{{exp_name}}__{{seed}}__{{time}}: at most {max(room, 0)} bytes with this env id, got {len(os.fsencode(exp_name))}"
    ]


# ---- what one script allocates up front ---------------------------------------------------------------------------


def machine_memory() -> tuple[int, int]:
    """This machine's memory and swap, in bytes (swap 0 where /proc/meminfo does not say)."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    swap = 0
    with contextlib.suppress(OSError):
        with open("/proc/meminfo") as meminfo:
            swap = next((int(line.split()[1]) * 1024 for line in meminfo if line.startswith("SwapTotal:")), 0)
    return ram, swap


def replay_memory_problem(args: Any, observation_bytes: int, copies: int = 2) -> str:
    """Why a replay memory of `args.buffer_size` transitions cannot be used here; empty when it can.

    A transition keeps `copies` observations of `observation_bytes` each: 2, its observation and the next one;
    1 in a frame replay memory, which keeps each Atari frame once. The arrays are allocated whole when the run
    starts (more than memory and swap together cannot be) and filled with up to `args.total_timesteps`
    transitions (which must fit in memory).
    """
    ram, swap = machine_memory()
    size = copies * observation_bytes + 64  # and each transition's action, reward, flags (and priorities)
    per_transition = f"{size} bytes per transition" if observation_bytes else f"at least {size} bytes per transition"
    allocated, filled = args.buffer_size * size, min(args.buffer_size, args.total_timesteps) * size
    if allocated <= ram + swap and filled <= ram:
        return ""
    need = allocated if allocated > ram + swap else filled
    return (
        f"--buffer-size {args.buffer_size}: a replay memory of {gigabytes(need)} ({per_transition}),"
        f" more than this machine's {gigabytes(ram)} of memory" + (f" and {gigabytes(swap)} of swap" if swap else "")
    )


def gigabytes(size: int) -> str:
    return f"{size / 2**30:.3g} GiB" if size < 2**40 else f"{size / 2**40:,.0f} TiB"


def rollout_memory_problem(steps: int, observation_space: Any) -> str:
    """Why a rollout storage of `steps` observations of `observation_space` (--num-envs × --num-steps of them, and
    what a script keeps besides) cannot be held in this machine's memory, where it is allocated when the run starts;
    empty when it can."""
    import numpy as np

    size = (
        int(np.prod(observation_space.shape)) * np.dtype(observation_space.dtype).itemsize + 64
    )  # and its action, reward, value...
    ram, _ = machine_memory()
    if steps * size <= ram:
        return ""
    return (
        f"--num-envs × --num-steps: a rollout of {steps} steps needs {gigabytes(steps * size)} ({size} bytes per step),"
        f" more than this machine's {gigabytes(ram)} of memory"
    )
