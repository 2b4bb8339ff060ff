"""How long is each algorithm file, and how many comment lines has it, against the original CleanRL file?

    python -m benchmark.guards.script_lengths [--check]

Prints a Markdown table (lines, original's lines, ratio; comment lines, original's, ratio) sorted by
length ratio, and the medians. The contract's rules (docs/community/script-contract.md): median
length ratio at most 1.00, no file above 1.25, no `# fmt: skip` packing; comment lines at most 1.30
times the original's, median; and no comment in an algorithm file or `cleanrl_utils/runtime/experiment.py` holds
a measured figure, a machine, core or thread count, or another file as a comparison (those belong on the
script's docs page). `--check` exits 1 when a rule is broken.
"""

import argparse
import io
import re
import statistics
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ORIGINAL_LENGTHS = REPO / "benchmark" / "published" / "reference_script_lengths.tsv"
ORIGINAL_COMMENTS = REPO / "benchmark" / "published" / "reference_comment_lines.tsv"
MEDIAN_LIMIT, FILE_LIMIT = 1.00, 1.25
COMMENT_MEDIAN_LIMIT = 1.30
# a number with a unit of time, speed, memory or a ratio ("6.4k", "0.19 s", "7 GB", "1.2x"), "vs", a core or thread count
FIGURE = re.compile(
    r"\d[\d.,]*\s*(k\b|[x×](?!\s*\d)|%|s\b|ms\b|µs|us\b|GB|MB|SPS|steps/s|steps per second)"
    r"|\bvs\.?\s|\b\d+[- ]cores?\b|\b\d+\s+threads?\b|\bmachine\b|\bcores?\b",
    re.IGNORECASE,
)
COMPARED_FILE = re.compile(r"\b(unlike|as in|than|like|the same as)\b.*\b\w+\.py\b|\b\w+\.py\b.*\b(does|did)\b", re.IGNORECASE)


def original_lengths(path: Path = ORIGINAL_LENGTHS) -> dict[str, int]:
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {name: int(count) for name, count in rows}


def comment_lines(source: str) -> int:
    """Lines holding a `#` comment, alone or after code (docstrings and `#` inside strings are not comments)."""
    return len({line for line, _ in comments(source)})


def comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of each `#` comment in `source`."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def lab_notes(repo: Path = REPO) -> list[str]:
    """`file:line: comment` for each comment of an algorithm file or experiment.py with a figure, machine or file comparison."""
    files = sorted((repo / "cleanrl").rglob("*.py")) + [repo / "cleanrl_utils" / "runtime" / "experiment.py"]
    return [
        f"{path.relative_to(repo)}:{line}: {text}"
        for path in files
        for line, text in comments(path.read_text())
        if FIGURE.search(text) or COMPARED_FILE.search(text)
    ]


def comment_ratios(repo: Path = REPO, originals: Path = ORIGINAL_COMMENTS) -> dict[str, tuple[int, int, float]]:
    """file -> (our comment lines, the original's, ratio), for every file of ours the original also has."""
    found = {}
    for name, original in original_lengths(originals).items():
        path = repo / name
        if path.is_file():
            ours = comment_lines(path.read_text())
            found[name] = (ours, original, ours / original)
    return found


def comment_problems(found: dict[str, tuple[int, int, float]]) -> list[str]:
    """What breaks the comment rule: the median ratio of comment lines."""
    median = statistics.median(ratio for _, _, ratio in found.values())
    return [f"median comment-line ratio {median:.2f} > {COMMENT_MEDIAN_LIMIT:.2f}"] if median > COMMENT_MEDIAN_LIMIT else []


def ratios(repo: Path = REPO) -> dict[str, tuple[int, int, float]]:
    """file -> (our lines, the original's lines, ratio), for every file of ours the original also has."""
    found = {}
    for name, original in original_lengths().items():
        path = repo / name
        if path.is_file():
            lines = len(path.read_text().splitlines())
            found[name] = (lines, original, lines / original)
    return found


def problems(found: dict[str, tuple[int, int, float]], repo: Path = REPO) -> list[str]:
    """What breaks the length rule: the median, files above the limit, `# fmt: skip` packing."""
    out = []
    median = statistics.median(ratio for _, _, ratio in found.values())
    if median > MEDIAN_LIMIT:
        out.append(f"median ratio {median:.2f} > {MEDIAN_LIMIT:.2f}")
    out += [f"{name}: {ratio:.2f} > {FILE_LIMIT:.2f}" for name, (_, _, ratio) in found.items() if ratio > FILE_LIMIT]
    out += [f"{name}: uses # fmt: skip" for name in found if "# fmt: skip" in (repo / name).read_text()]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the length rule is broken")
    args = parser.parse_args(argv)
    found, comment_found = ratios(), comment_ratios()
    print("| file | lines | original | ratio | comment lines | original | ratio |\n|---|---|---|---|---|---|---|")
    for name, (lines, original, ratio) in sorted(found.items(), key=lambda item: -item[1][2]):
        ours, theirs, comment_ratio = comment_found[name]
        print(f"| {name} | {lines} | {original} | {ratio:.2f} | {ours} | {theirs} | {comment_ratio:.2f} |")
    print(f"\nmedian ratio {statistics.median(r for _, _, r in found.values()):.2f} over {len(found)} files")
    print(f"median comment-line ratio {statistics.median(r for _, _, r in comment_found.values()):.2f}")
    broken = problems(found) + comment_problems(comment_found) + [f"lab note in a comment: {note}" for note in lab_notes()]
    for problem in broken:
        print(f"script_lengths: {problem}", file=sys.stderr)
    return 1 if args.check and broken else 0


if __name__ == "__main__":
    sys.exit(main())
