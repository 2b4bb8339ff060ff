"""How long is each algorithm file against the original CleanRL file of the same variant?

    python benchmark/script_lengths.py [--check]

Prints a Markdown table (lines, original's lines, ratio) sorted by ratio, and the median. The
contract's length rule (docs/community/script-contract.md): median ratio at most 1.00, no file above
1.25, no `# fmt: skip` packing. `--check` exits 1 when the rule is broken.
"""

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORIGINAL_LENGTHS = REPO / "benchmark" / "published" / "reference_script_lengths.tsv"
MEDIAN_LIMIT, FILE_LIMIT = 1.00, 1.25


def original_lengths(path: Path = ORIGINAL_LENGTHS) -> dict[str, int]:
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {name: int(count) for name, count in rows}


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
    found = ratios()
    print("| file | lines | original | ratio |\n|---|---|---|---|")
    for name, (lines, original, ratio) in sorted(found.items(), key=lambda item: -item[1][2]):
        print(f"| {name} | {lines} | {original} | {ratio:.2f} |")
    print(f"\nmedian ratio {statistics.median(r for _, _, r in found.values()):.2f} over {len(found)} files")
    broken = problems(found)
    for problem in broken:
        print(f"script_lengths: {problem}", file=sys.stderr)
    return 1 if args.check and broken else 0


if __name__ == "__main__":
    sys.exit(main())
