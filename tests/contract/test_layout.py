"""The layout the contribution page draws: imports go one way, from the tools through the run-time modules to
nothing, and only the zoo's functions reach the algorithm files."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)

REPO = Path(__file__).resolve().parents[2]
UTILS = REPO / "cleanrl_utils"
RUNTIME = UTILS / "runtime"  # what an algorithm file may import from cleanrl_utils (docs/community/contribution.md)
# The run-time package's size budget: lines of its .py files as `wc -l` counts them (4,362 when it was set). A
# reader of an algorithm file should be able to hold what it imports; growing past this is a decision for the
# contribution page, not a side effect.
RUNTIME_LINE_BUDGET = 4_960


def imported_modules(source: str) -> set[str]:
    """Every module `source` imports, at its top or inside a function: `a.b` for `import a.b` and `from a.b import c`."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}  # `from cleanrl_utils import report`
    return modules


def tool_imports(source: str) -> list[str]:
    """The cleanrl_utils modules outside cleanrl_utils.runtime that `source` imports."""
    return sorted(
        m
        for m in imported_modules(source)
        if m.startswith("cleanrl_utils.") and m != "cleanrl_utils.runtime" and not m.startswith("cleanrl_utils.runtime.")
    )


def runtime_files() -> list[Path]:
    return sorted(RUNTIME.rglob("*.py"))


def test_tool_imports_tells_the_runtime_package_from_the_tools():
    source = (
        "import cleanrl_utils.runtime.experiment\nfrom cleanrl_utils.runtime import atomic\n"
        "from cleanrl_utils.runtime.evals.discrete import evaluate_dqn\nimport cleanrl_utils.runtime\n"
        "def f():\n    from cleanrl_utils import report\n    from cleanrl_utils.benchmark import ledger\n"
    )
    assert tool_imports(source) == ["cleanrl_utils.benchmark", "cleanrl_utils.benchmark.ledger", "cleanrl_utils.report"]


def test_algorithm_files_import_only_the_runtime_package():
    files = sorted((REPO / "cleanrl").rglob("*.py"))
    offenders = {p.relative_to(REPO).as_posix(): found for p in files if (found := tool_imports(p.read_text()))}
    assert not offenders, f"algorithm files import cleanrl_utils modules outside cleanrl_utils.runtime: {offenders}"
    users = [p for p in files if any(m.startswith("cleanrl_utils.runtime") for m in imported_modules(p.read_text()))]
    assert len(users) >= 36, len(users)  # the check above read the files that import it


def test_runtime_modules_import_no_tool_and_no_algorithm_file():
    offenders = {}
    for path in runtime_files():
        source = path.read_text()
        wrong = tool_imports(source) + sorted(
            m for m in imported_modules(source) if m == "cleanrl" or m.startswith("cleanrl.")
        )
        if wrong:
            offenders[path.relative_to(REPO).as_posix()] = wrong
    assert not offenders, f"run-time modules import offline tools or algorithm files: {offenders}"


def test_importing_the_runtime_package_imports_nothing_heavy():
    """`import cleanrl_utils.runtime` costs nothing: each script imports the modules it uses by name."""
    code = "import sys, cleanrl_utils.runtime; print(sorted(m for m in ('torch', 'jax', 'gymnasium', 'numpy') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded


def test_runtime_package_keeps_to_the_size_budget_of_its_docs():
    lines = sum(len(path.read_text().splitlines()) for path in runtime_files())
    assert lines <= RUNTIME_LINE_BUDGET, (
        f"cleanrl_utils/runtime/ has {lines:,} lines, over its budget of {RUNTIME_LINE_BUDGET:,}: move what a tool "
        "alone uses out of it, or raise the budget here and on docs/community/contribution.md with the reason"
    )
    page = (REPO / "docs" / "community" / "contribution.md").read_text()
    assert f"budget of {RUNTIME_LINE_BUDGET:,} lines" in page


def test_the_contribution_page_names_every_runtime_module():
    page = (REPO / "docs" / "community" / "contribution.md").read_text()
    tree = page.split("  runtime/", 1)[1].split("\n  benchmark/", 1)[0]
    modules = {p.name for p in RUNTIME.glob("*.py") if p.name != "__init__.py"} | {"evals/"}
    assert not {m for m in modules if m not in tree}, sorted(m for m in modules if m not in tree)


def algorithm_imports(tree: ast.AST) -> list[str]:
    """The algorithm modules (`cleanrl`, `cleanrl.*`) that the import statements under `tree` name."""
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named.append(node.module)
    return [m for m in named if m == "cleanrl" or m.startswith("cleanrl.")]


def test_only_the_zoo_imports_algorithm_files_and_only_when_called():
    """The zoo's functions import the file they play when called; nothing else in cleanrl_utils names one, and
    importing the zoo imports none."""
    importers = [
        path.relative_to(REPO).as_posix()
        for path in sorted(UTILS.rglob("*.py"))
        if path != UTILS / "zoo.py" and algorithm_imports(ast.parse(path.read_text()))
    ]
    assert importers == [], importers
    zoo = ast.parse((UTILS / "zoo.py").read_text())
    at_import_time = [node for node in zoo.body if not isinstance(node, ast.FunctionDef | ast.ClassDef)]
    assert not [m for node in at_import_time for m in algorithm_imports(node)]
    called = [f.name for f in zoo.body if isinstance(f, ast.FunctionDef) and algorithm_imports(f)]
    assert len(called) >= 20, called  # the check above looked where the imports are


TEST_GROUPS = ("contract", "algorithms", "runtime", "tools")  # tests/<group>/, the contribution page's table


def test_every_test_file_is_in_the_contribution_pages_table():
    page = (REPO / "docs" / "community" / "contribution.md").read_text()
    table = page.split("### Where a thing's tests are", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `tests/")]
    misplaced = [
        p.relative_to(REPO).as_posix()
        for p in sorted((REPO / "tests").rglob("test_*.py"))
        if not any(row.startswith(f"| `tests/{p.parent.name}/` |") and f"`{p.name}`" in row for row in rows)
    ]
    assert not misplaced, f"docs/community/contribution.md's test table lacks these files in their folder's row: {misplaced}"


def test_tests_are_grouped_and_fixture_modules_live_in_tests_fixtures():
    """tests/ holds the shared conftest/helpers and one folder per group of test files; what tests import or run
    lives in tests/fixtures/."""
    top = sorted(p.name for p in (REPO / "tests").iterdir() if not p.name.startswith((".", "__pycache__")))
    assert top == sorted(["__init__.py", "conftest.py", "helpers.py", "fixtures", *TEST_GROUPS]), top
    for group in TEST_GROUPS:
        others = [p.name for p in (REPO / "tests" / group).glob("*.py") if not p.name.startswith("test_")]
        assert others == ["__init__.py"], (group, others)


RESULTS = REPO / "benchmark" / "results"
# the line each results file opens with (benchmark.harness.measured_at writes it): commit, date and the command
MEASURED = re.compile(r"^Measured at commit [0-9a-f]{7,40}(-dirty)? on \d{4}-\d{2}-\d{2} with .*`[^`]+`")
DATE = re.compile(r"(?<!\d)20\d\d-?[01]\d-?[0-3]\d(?!\d)")
SESSION_WORDS = {"retrained", "fix", "fixed", "after", "before", "redesign", "old", "new", "rerun", "again", "latest", "final"}


def test_results_names_carry_no_date_or_session_word():
    """benchmark/results/ holds the current result of each check; git keeps the earlier ones."""
    named = [
        p.relative_to(RESULTS).as_posix()
        for p in RESULTS.rglob("*")
        if DATE.search(p.name) or SESSION_WORDS & set(re.split(r"[_\-.+]+", p.name.lower()))
    ]
    assert not named, f"names with a date or a session word in benchmark/results/: {named}"


def opening(md: Path) -> list[str]:
    """Where a results file says how it was made: its first lines; a folder's README.md lists its runs' groups."""
    lines = md.read_text().splitlines()
    return lines if md.name == "README.md" else lines[:4]


def test_every_result_names_the_commit_date_and_command_that_made_it():
    unsourced = [
        md.relative_to(RESULTS).as_posix()
        for md in sorted(RESULTS.rglob("*.md"))
        if md != RESULTS / "README.md"  # the index of the records (tests/tools/test_benchmark_package.py)
        and not any(MEASURED.match(line.removeprefix("- ")) for line in opening(md))
    ]
    assert not unsourced, f"results without a 'Measured at commit X on DATE with `command`' line at the top: {unsourced}"
    bare = [
        folder.relative_to(RESULTS).as_posix()
        for folder in sorted(p for p in RESULTS.rglob("*") if p.is_dir())
        if any(p.is_file() for p in folder.iterdir()) and not any(folder.glob("*.md"))
    ]
    assert not bare, f"results folders without a README.md saying how their files were made: {bare}"


def test_the_project_cites_only_its_own_files():
    """The briefing folder beside the checkout is not part of the product: no tracked file points into it."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    citing = [
        name
        for name in tracked
        if name.endswith((".py", ".md", ".sh", ".toml", ".yml", ".txt"))
        and name != "tests/contract/test_layout.py"  # this check names the folder
        and "shared/reference" in (REPO / name).read_text()
    ]
    assert not citing, f"these files cite the briefing folder (../shared/reference), not part of the project: {citing}"
