"""The documentation builds, every algorithm file is documented and listed, and every tool command it shows runs."""

import contextlib
import importlib.util
import io
import os
import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# every training script, those in a folder of their own too (cleanrl/ppo_trxl/ppo_trxl.py, not its enjoy.py)
ALGORITHM_FILES = sorted(
    p.relative_to(REPO / "cleanrl").as_posix()
    for p in (REPO / "cleanrl").rglob("*.py")
    if p.name not in ("__init__.py", "enjoy.py")
)


def docs_page(name: str) -> Path | None:
    """The docs page with a section for the script (headed by its file name)."""
    heading = f"## `{Path(name).name}`"
    return next((p for p in (REPO / "docs" / "rl-algorithms").glob("*.md") if heading in p.read_text()), None)


def test_mkdocs_builds_strict(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "rl-algorithms" / "ppo" / "index.html").is_file()


@pytest.mark.parametrize("name", ALGORITHM_FILES)
def test_algorithm_is_listed_and_documented(name):
    assert f"cleanrl/{name}" in (REPO / "README.md").read_text(), f"README's table lacks {name}"
    assert f"`{Path(name).name}`" in (REPO / "docs" / "rl-algorithms" / "overview.md").read_text()
    path = docs_page(name)
    assert path, f"no docs page has a section for {name}"
    page = path.read_text()
    assert "PLACEHOLDER" not in page, f"{path.name} has no measured results yet"
    for heading in ("### Usage", "### Logged metrics", "### Implementation details", "### Results"):
        assert heading in page, f"{path.name} lacks {heading!r}"


@pytest.mark.parametrize("name", ALGORITHM_FILES)
def test_every_logged_tag_is_documented(name):
    """Each tag the script writes with add_scalar appears in its docs page's metrics table."""
    import re

    source = (REPO / "cleanrl" / name).read_text()
    tags = set(re.findall(r'add_scalar\(\s*"([^"]+)"', source))
    assert tags, f"{name} logs no scalars?"
    page = docs_page(name).read_text()
    undocumented = {t for t in tags if f"`{t}`" not in page}
    assert not undocumented, f"{name} logs {sorted(undocumented)} without documenting them"


def resumes(name: str) -> bool:
    """Whether the script has `--resume` (an `Args` field), read from its source."""
    return re.search(r"^    resume: str \| None = None$", (REPO / "cleanrl" / name).read_text(), re.MULTILINE) is not None


@pytest.mark.parametrize("name", ALGORITHM_FILES)
def test_each_file_section_says_whether_the_file_resumes(name):
    page = docs_page(name).read_text()
    section = page.split(f"## `{Path(name).name}`", 1)[1].split("\n## ", 1)[0]
    said = re.search(r"^\*\*Resumes:\*\* (yes|no)\b", section, re.MULTILINE)
    assert said, f"{docs_page(name).name}'s section for {name} lacks its '**Resumes:** yes/no' line"
    assert (said.group(1) == "yes") == resumes(name), f"the docs say {name} resumes: {said.group(1)}; its Args disagree"


def test_the_resume_page_lists_exactly_the_files_that_resume():
    intro = (REPO / "docs" / "advanced" / "resume-training.md").read_text().split("## ", 1)[0]
    listed = {Path(n).name for n in re.findall(r"`([\w/]+\.py)`", intro)}
    assert listed == {Path(n).name for n in ALGORITHM_FILES if resumes(n)}


@pytest.mark.parametrize("name", ALGORITHM_FILES)
def test_script_section_states_its_differences_from_the_original(name):
    """The script's own section of its page (from its heading to the next script's) lists how it departs from the
    original CleanRL script."""
    page = docs_page(name).read_text()
    section = page.split(f"## `{Path(name).name}`", 1)[1].split("\n## ", 1)[0]
    assert "### Differences from the original CleanRL" in section, f"{name}'s section lacks its differences"


STATUS_WORDS = ("matches published", "learns", "fails its check", "runs")


def readme_rows() -> dict[str, list[str]]:
    """The README algorithm table: algorithm file (under cleanrl/) -> its cells."""
    import re

    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        link = re.match(r"\| \[`[^`]+`\]\(cleanrl/([^)]+)\) \|", line)
        if link:
            rows[link.group(1)] = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return rows


def test_readme_is_short_and_its_table_uses_the_legend():
    """A newcomer's page: at most 1,000 words; one row per algorithm file, each with one status word of the legend
    written under the table, no cell over 25 words, and a link to the file's docs page."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.split()) <= 1000
    rows = readme_rows()
    assert sorted(rows) == ALGORITHM_FILES
    for name, cells in rows.items():
        file, algorithm, spaces, status, result = cells
        assert status in STATUS_WORDS, f"{name}: status {status!r} is not a legend word"
        assert all(len(cell.split()) <= 25 for cell in cells), name
        assert f"(docs/rl-algorithms/{docs_page(name).name})" in result, f"{name}: no link to its docs page"
    legend = readme.split("| status |", 1)[1]
    assert all(f"**{word}**" in legend for word in STATUS_WORDS)


def test_the_algorithms_overview_gives_each_file_the_readme_status():
    """docs/rl-algorithms/overview.md repeats the README's status word per file: the two tables say the same."""
    import re

    overview = {}
    for line in (REPO / "docs" / "rl-algorithms" / "overview.md").read_text().splitlines():
        link = re.match(r"\| [^|]+ \| \[`([^`]+)`\]", line)
        if link:
            overview[link.group(1)] = line.strip().strip("|").split("|")[-1].strip()
    readme = {Path(name).name: cells[3] for name, cells in readme_rows().items()}
    assert {name: overview.get(name) for name in readme} == readme


def test_no_page_says_a_script_needs_nothing_outside_its_file():
    """The scripts import cleanrl_utils for their plumbing: no page may say they are self-contained."""
    import re

    claims = re.compile(r"nothing (it needs |is hidden)|nothing else is needed|no shared helpers?|needs nothing outside")
    pages = [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    assert not [str(p.relative_to(REPO)) for p in pages if claims.search(p.read_text())]


DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# `python -m cleanrl_utils.x` and `python -m benchmark.x.y` as the pages write them (with `bash` for the shell recipes)
TOOL_COMMAND = re.compile(
    r"\bpython3? (?:-m ((?:cleanrl_utils|benchmark)(?:\.\w+)*)|(benchmark/[\w./-]+\.py))|\bbash (benchmark/[\w./-]+\.sh)"
)


def documented_tools() -> dict[str, list[str]]:
    """Each tool a page runs (`-m module` or a file path), with the pages that run it."""
    tools: dict[str, list[str]] = {}
    for page in DOC_PAGES:
        for module, script, shell in TOOL_COMMAND.findall(page.read_text()):
            tool = f"-m {module}" if module else script or shell
            tools.setdefault(tool, []).append(page.relative_to(REPO).as_posix())
    return tools


def help_in_process(tool: str) -> tuple[int, str]:
    """`python <tool> --help` run in this process (the worker has imported what the tools import): exit code, output."""
    out, saved_argv = io.StringIO(), sys.argv
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: a module already imported is run again
            if tool.startswith("-m "):
                sys.argv = [tool[3:], "--help"]
                runpy.run_module(tool[3:], run_name="__main__", alter_sys=True)
            else:
                sys.argv = [str(REPO / tool), "--help"]
                runpy.run_path(str(REPO / tool), run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        sys.argv = saved_argv
    return code, out.getvalue()


def test_the_pages_run_tools_at_all():
    tools = documented_tools()
    assert "-m cleanrl_utils.report" in tools and "-m cleanrl_utils.benchmark" in tools
    assert any(tool.startswith("-m benchmark.") for tool in tools)


def test_the_pages_run_benchmark_scripts_as_modules():
    """benchmark/ is a package whose scripts import each other: run by file path they would need sys.path edits."""
    by_path = {tool: pages for tool, pages in documented_tools().items() if tool.endswith(".py")}
    assert not by_path, f"run these as `python -m benchmark.<folder>.<name>`: {by_path}"


@pytest.mark.parametrize("tool", sorted(documented_tools()))
def test_every_documented_tool_command_exists_and_answers_help(tool):
    pages = ", ".join(sorted(set(documented_tools()[tool])))
    if tool.startswith("-m "):
        assert importlib.util.find_spec(tool[3:]) is not None, f"{pages}: no module {tool[3:]}"
    else:
        assert (REPO / tool).is_file(), f"{pages}: no file {tool}"
    if tool.endswith(".sh"):  # a shell recipe: its knobs are in its opening comment, not behind --help
        return
    code, out = help_in_process(tool)
    assert code == 0, f"{pages}: python {tool} --help exited with {code}:\n{out[-2000:]}"
    assert "usage" in out.lower() or "Usage" in out or len(out.splitlines()) > 3, out[-500:]


def test_quick_run_command_is_the_same_everywhere():
    """The README, the installation page and the contribution guide show the test command .ci/run runs. pyproject.toml
    names no worker count (a single test runs in one process), so the quick run's `-n 3` lives in this command."""
    ci = re.search(r'pip install -q -e "\.\[test\]" && (pytest.*)$', (REPO / ".ci" / "run").read_text(), re.M)
    readme = re.search(r'pip install -e "\.\[test\]" && (pytest.*)$', (REPO / "README.md").read_text(), re.M)
    installation = re.search(
        r'pip install -e "\.\[test\]" && (pytest.*)$', (REPO / "docs/get-started/installation.md").read_text(), re.M
    )
    contribution = re.search(r"^pre-commit install\n(pytest.*)$", (REPO / "docs/community/contribution.md").read_text(), re.M)
    commands = {m.group(1) if m else None for m in (ci, readme, installation, contribution)}
    assert len(commands) == 1 and None not in commands, commands
    assert re.search(r"(^| )-n \d", commands.pop()), "the quick run names its workers (pyproject.toml names none)"
