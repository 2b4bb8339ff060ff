"""Do two runs log the same scalars, step for step? (Refactors that must not change what a script computes.)

    python -m benchmark.guards.same_scalars runs/A runs/B [--ignore charts/SPS]

Exit 0 when every tag has the same (step, value) list in both runs, 1 otherwise (the differing tags
are printed with their first values). Wall-clock tags such as `charts/SPS` are ignored by default.
"""

import argparse
import sys

from cleanrl_utils.tensorboard_reader import read_scalars


def differing_tags(a: dict, b: dict, ignore: set[str]) -> list[str]:
    return [tag for tag in sorted(set(a) | set(b)) if tag not in ignore and a.get(tag) != b.get(tag)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("--ignore", nargs="*", default=["charts/SPS"], help="tags left out (default: charts/SPS)")
    args = parser.parse_args(argv)
    try:
        a, b = read_scalars(args.run_a), read_scalars(args.run_b)
    except FileNotFoundError as e:
        print(f"same_scalars: error: {e}", file=sys.stderr)
        return 2
    diff = differing_tags(a, b, set(args.ignore))
    for tag in diff:
        print(f"{tag}: {a.get(tag, [])[:3]} ... vs {b.get(tag, [])[:3]} ...")
    compared = len(set(a) | set(b)) - len(set(args.ignore) & (set(a) | set(b)))
    print(f"{compared - len(diff)} of {compared} tags identical" + ("" if diff else ": same scalars step for step"))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
