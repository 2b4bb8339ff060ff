"""The files a newcomer installs from: uv.lock agrees with pyproject.toml, and the declared license ships."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)

ROOT = Path(__file__).resolve().parents[2]


def test_uv_lock_matches_pyproject():
    """`uv sync`/`uv run` install what uv.lock pins; a requirement changed without `uv lock` fails here.

    --offline: the check reads the lock and pyproject.toml only, so it needs no index (a changed requirement
    then fails as unresolvable, which is the point).
    """
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, 'uv is missing: pip install -e ".[test]" brings it'
    check = subprocess.run([uv, "lock", "--check", "--offline"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, f"uv.lock is out of date with pyproject.toml; run `uv lock`:\n{check.stderr[-2000:]}"


def test_declared_license_file_is_the_mit_license():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    (license_file,) = project["license-files"]
    assert (ROOT / license_file).read_text().startswith("MIT License")
