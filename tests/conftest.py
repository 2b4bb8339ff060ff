import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import event_writer_threads, mujoco_gl

# Rendering and W&B must never need a display or the network during tests.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("MUJOCO_GL", mujoco_gl())  # "egl", or rendering off where EGL is missing (tests/helpers.py)
# The suite runs on three pytest workers on two cores (`-n 3`, the README's command), each starting scripts: one torch
# thread per process keeps the cores from being oversubscribed (torch's spinning threads slow to a crawl then).
# The scripts the tests start inherit this, so in-process and subprocess results use the same thread count.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# and one XLA CPU thread, set before JAX is first imported (at collection): in-process JAX runs then compute
# exactly what a script started by tests/helpers.script_env does
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The JAX scripts are run ~7 times each with the same shapes (smoke, determinism, --track, interrupts):
    a persistent compilation cache, fresh for every test session and shared by its workers, lets the later
    runs load what the first compiled (about half of a small run's CPU time on these machines), whichever
    worker compiled it. A size limit turns on JAX's file lock around cache reads and writes, which makes the
    shared folder safe: without it, a worker could read an entry another is still writing."""
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        session_temp = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's temp folder lies in the session's
            session_temp = session_temp.parent
        cache = session_temp / "jax-cache"
        cache.mkdir(exist_ok=True)
        settings = {
            "jax_compilation_cache_dir": str(cache),
            "jax_persistent_cache_min_compile_time_secs": 0,
            "jax_persistent_cache_min_entry_size_bytes": 0,
            "jax_compilation_cache_max_size": 8 << 30,
        }
        os.environ.update({name.upper(): str(value) for name, value in settings.items()})  # for the scripts started
        if "jax" in sys.modules:  # imported at collection, so it read its config before these variables existed
            import jax

            for name, value in settings.items():
                jax.config.update(name, value)


REPORTED_WRITERS: set[threading.Thread] = set()


def check_no_event_writer_left(before: set[threading.Thread], by: str) -> None:
    left = event_writer_threads() - before - REPORTED_WRITERS  # each leak fails once: where it was made
    REPORTED_WRITERS.update(left)
    assert not left, f"{len(left)} TensorBoard writer(s) left open by {by}"


@pytest.fixture(autouse=True)
def no_event_writer_left_open() -> Iterator[None]:
    """A run made in this process (runpy, an Experiment) must close its TensorBoard writer on every exit: one left
    open writes later, by a relative path, into whatever folder is current then."""
    before = event_writer_threads()
    yield
    check_no_event_writer_left(before, "this test")


@pytest.fixture(autouse=True, scope="module")
def no_event_writer_left_open_by_module_fixtures() -> Iterator[None]:
    """The same for the runs a module-scoped fixture makes (the smoke runs shared by a module's tests)."""
    before = event_writer_threads()
    yield
    check_no_event_writer_left(before, "this module's fixtures")


# module-scoped fixtures that are costly to build (a training run, a Slurm cluster): the tests sharing one stay together
SHARED_FIXTURES = ("smoke", "trained", "slurm", "runs_dir", "tagged_runs")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Keep the tests that share a costly module-scoped fixture on one worker (`--dist loadgroup`), so that it
    is built once, not once per worker. Marked as each test is collected: xdist reads the groups in its own
    `pytest_collection_modifyitems`, which may run before one of ours would."""
    # the fast tier (`pytest -m fast`, which replaces the default -m) must stay a subset of the quick run
    if item.get_closest_marker("fast") and (item.get_closest_marker("slow") or item.get_closest_marker("extended")):
        raise pytest.UsageError(f"{item.nodeid} is marked fast and slow or extended: the fast tier is part of the quick run")
    shared = [name for name in SHARED_FIXTURES if name in getattr(item, "fixturenames", ())]
    if shared:
        param = item.callspec.params.get(shared[0], "") if hasattr(item, "callspec") else ""
        item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}-{shared[0]}-{param}"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """In an xdist worker under `--dist loadgroup`, xdist appends `@group` to the id of each grouped test; if
    a pytest release breaks that, the groups would be split silently and every shared fixture built twice."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if ungrouped:
        raise pytest.UsageError(f"xdist did not group {ungrouped[0]}: this pytest/pytest-xdist pair cannot --dist loadgroup")


@pytest.fixture(scope="session")
def blocked_imports(tmp_path_factory) -> Path:
    """A folder that, first on the path, makes `import Box2D`, `mujoco`, `ale_py` and `envpool` fail as if not installed."""
    blocked = tmp_path_factory.mktemp("blocked")
    for package in ("Box2D", "mujoco", "ale_py", "envpool"):
        (blocked / package).mkdir()
        (blocked / package / "__init__.py").write_text(f"raise ImportError('{package} is blocked for this test')\n")
    return blocked
