"""benchmark/ is a package run with `python -m benchmark.<folder>.<name>`, and benchmark/results/README.md indexes the
record of each check, each record under a title of its own."""

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHMARK = REPO / "benchmark"
RESULTS = BENCHMARK / "results"
INDEX = RESULTS / "README.md"


def touches_sys_path(source: str) -> bool:
    """Whether the code reads or edits `sys.path` (`sys.path.insert`, `sys.path[:0] = ...`, `from sys import path`)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name):
            if node.value.id == "sys":
                return True
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            return True
    return False


def test_the_sys_path_check_sees_each_way_of_editing_it():
    assert touches_sys_path("import sys\nsys.path.insert(0, '.')")
    assert touches_sys_path("import sys\nsys.path[:0] = ['.']")
    assert touches_sys_path("from sys import path\npath.append('.')")
    assert not touches_sys_path("import os\nos.path.join('a', 'b')\nsys_path = 1")


def test_no_benchmark_file_touches_sys_path():
    """The scripts import `benchmark.*` as a package from the repository root instead of putting it on sys.path."""
    scripts = sorted(BENCHMARK.rglob("*.py"))
    assert len(scripts) > 20, "the benchmark scripts moved: this check looks at none of them"
    offenders = [p.relative_to(REPO).as_posix() for p in scripts if touches_sys_path(p.read_text())]
    assert not offenders, f"edit sys.path: {offenders}; run them with `python -m benchmark.<folder>.<name>`"
    late_imports = [p.relative_to(REPO).as_posix() for p in scripts if "noqa: E402" in p.read_text()]
    assert not late_imports, f"imports below code (E402): {late_imports}"


def test_a_benchmark_script_runs_as_a_module_from_the_repository_root():
    """What every page's command relies on: `python -m` from the root finds `benchmark` and `cleanrl_utils` there."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmark.compare.speed", "--help"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--base" in proc.stdout and "--title" in proc.stdout


def test_this_command_names_a_benchmark_script_by_its_module(monkeypatch):
    """The "Measured at" line of a record gives the command that runs it again from the repository's root."""
    from benchmark.harness import this_command

    monkeypatch.setattr(sys, "argv", [str(BENCHMARK / "studies" / "dqn_speed_ceiling.py"), "--steps", "5 0"])
    assert this_command() == "python -m benchmark.studies.dqn_speed_ceiling --steps '5 0'"
    monkeypatch.setattr(sys, "argv", [str(REPO / "cleanrl" / "dqn.py"), "--seed", "2"])
    assert this_command() == "python cleanrl/dqn.py --seed 2"


# --- benchmark/results/ --------------------------------------------------------------------------------------------


def records() -> list[str]:
    """What the index must name: each file at the top of benchmark/results/ (a record's .md and .json) and each folder."""
    return sorted(p.name for p in RESULTS.iterdir() if p != INDEX and not p.name.startswith("."))


def index_rows() -> list[list[str]]:
    """The cells of the index's table rows (record, what it shows, made by)."""
    rows = [line for line in INDEX.read_text().splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_index_names_every_record_and_only_records_that_exist():
    assert all(len(cells) == 3 for cells in index_rows())
    named = {name.rstrip("/") for cells in index_rows() for name in re.findall(r"`([^`]+)`", cells[0])}
    missing = [name for name in records() if name not in named]
    assert not missing, f"records that benchmark/results/README.md does not index: {missing}"
    absent = sorted(name for name in named if not (RESULTS / name).exists())
    assert not absent, f"the index names records that are not in benchmark/results/: {absent}"


def test_every_indexed_command_names_a_module_or_a_script_that_exists():
    commands = [command for cells in index_rows() for command in re.findall(r"`([^`]+)`", cells[2])]
    modules = {m for command in commands for m in re.findall(r"\bpython -m ([\w.]+)", command)}
    scripts = {s for command in commands for s in re.findall(r"\bbash (\S+\.sh)", command)}
    assert "benchmark.compare.speed" in modules and "benchmark/checks/classic_control.sh" in scripts
    assert not [m for m in modules if importlib.util.find_spec(m) is None]
    assert not [s for s in scripts if not (REPO / s).is_file()]
    assert not [c for c in commands if re.search(r"\bpython3? benchmark/", c)], "run benchmark scripts with -m"


def test_every_record_has_a_title_of_its_own():
    """Its first line, `# ...`; two records with one title (as five speed records once had) read as one."""
    pages = sorted(p for p in RESULTS.rglob("*.md") if p != INDEX)
    untitled = [p.relative_to(RESULTS).as_posix() for p in pages if not p.read_text().startswith("# ")]
    assert not untitled, f"records without a `# title` first line: {untitled}"
    titles: dict[str, list[str]] = {}
    for page in pages:
        titles.setdefault(page.read_text().split("\n", 1)[0], []).append(page.relative_to(RESULTS).as_posix())
    shared = {title: names for title, names in titles.items() if len(names) > 1}
    assert not shared, f"records sharing a title: {shared}"
