"""The command line every algorithm script and every tool shares: a dataclass of flags parsed with tyro, and
booleans written as flags (`--capture-video`, `--no-cuda`) or as words (`--capture-video True`), as the
published commands write them."""

import sys
import typing
from collections.abc import Sequence
from dataclasses import fields
from typing import TypeVar

T = TypeVar("T")
TRUE_WORDS, FALSE_WORDS = {"true", "1", "yes"}, {"false", "0", "no"}


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


def parse_args(Args: type[T], argv: Sequence[str] | None = None, prog: str | None = None) -> T:
    """`Args` from the command line (tyro), booleans accepted as flags or as words."""
    import tyro

    return tyro.cli(Args, args=bool_words_as_flags(Args, sys.argv[1:] if argv is None else argv), prog=prog)
