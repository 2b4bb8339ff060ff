"""Red-team checks of the MuJoCo 1M queue's second lane (benchmark/queues/mujoco_1m.sh, commit 3e9f953).

The claim: `mujoco_1m.sh backward` is a second lane beside `mujoco_1m.sh` (forward) that takes the same list of
unrecorded runs from its end; each run is taken under a flock of its own ($HOME/runs/mujoco_1m/logs/<algo>/<env>/<seed>.lock),
so a lane skips the run the other lane holds (one line says so), a run the other lane finished is skipped by its
benchmark's ledger, and a bad order word is one line, exit 2.

Each test is one attack, driven like tests/tools/test_queue_scripts.py: a stub `python` in a venv, a shared clone of
this repository, HOME under tmp_path. Some attacks also run the pinned commit's real `cleanrl_utils.benchmark` (the
stub hands `-m cleanrl_utils.benchmark` to this interpreter; PYTHONPATH is the pinned worktree), so its ledger and
log-folder lock take part as they do in the real queue; only the training command is a stub. An attack the script
withstands is a plain test; the six it broke were fixed, and their tests say what was found.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.tools.test_queue_scripts import (  # noqa: F401 (queue_env and stub_queues are fixtures)
    MUJOCO_PIN,
    QUEUES,
    STUB_PYTHON,
    alive,
    calls,
    queue_env,
    stub_queues,
    wait_for,
)

EVERY = [(a, e, s) for a in ("td3", "ddpg", "sac") for e in ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4") for s in "123"]
SCRIPT = str(QUEUES / "mujoco_1m.sh")
# A stub python that runs the pinned benchmark for real and stubs only the training command; the command waits while
# $STUB_GATE names a file that exists, so a test decides when a run ends.
BENCHMARK_STUB = """#!/usr/bin/env bash
case "$1 $2" in "-m cleanrl_utils.benchmark") exec "$REAL_PYTHON" "$@" ;; esac
echo "$PWD|${PYTHONPATH:-}|${WANDB_TAGS:-}|${OMP_NUM_THREADS:-}|$(nice)|$*" >> "$STUB_LOG"
echo $$ >> "$STUB_PIDS"
while [ -n "${STUB_GATE:-}" ] && [ -e "$STUB_GATE" ]; do sleep 0.1; done
exit "${STUB_EXIT:-0}"
"""


def run_of(args: str) -> tuple[str, str, str]:
    """(algo, env, seed) of a stub call: the benchmark's command line or the training command it started."""
    words = args.split()
    algo = next(w for w in words if "_continuous_action_jax" in w).split("cleanrl/")[1].split("_continuous")[0]
    env_id = words[words.index("--env-ids" if "--env-ids" in words else "--env-id") + 1]
    seed = words[words.index("--start-seed" if "--start-seed" in words else "--seed") + 1]
    return algo, env_id, seed


def runs_called(env: dict[str, str]) -> list[tuple[str, str, str]]:
    return [run_of(call[-1]) for call in calls(env)]


def lane(env: dict[str, str], *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", SCRIPT, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def finish(process: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def record(env: dict[str, str], runs) -> None:
    results = Path(env["MUJOCO_1M_REPO"]) / "benchmark" / "results" / "mujoco_1m"
    results.mkdir(parents=True, exist_ok=True)
    for algo, env_id, seed in runs:
        (results / f"{algo}_continuous_action_jax__{env_id}__{seed}.json").write_text("{}")


def lane_env(env: dict[str, str], tmp_path: Path, name: str, **extra: str) -> dict[str, str]:
    """A lane's own stub log (and pid file), so each lane's calls can be told apart."""
    return {**env, "STUB_LOG": str(tmp_path / f"{name}.log"), "STUB_PIDS": str(tmp_path / f"{name}.pids"), **extra}


@pytest.fixture
def bench_env(queue_env, tmp_path: Path) -> dict[str, str]:  # noqa: F811
    """queue_env with the pinned real benchmark runner and only sac Walker2d-v4 seeds 1-3 left to run."""
    (tmp_path / "venv" / "bin" / "python").write_text(BENCHMARK_STUB)
    record(queue_env, [run for run in EVERY if run[:2] != ("sac", "Walker2d-v4")])
    return {**queue_env, "REAL_PYTHON": sys.executable}


LEFT = [("sac", "Walker2d-v4", s) for s in "123"]


def kill_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def gated_first_lane(env: dict[str, str], tmp_path: Path) -> tuple[Path, dict[str, str], subprocess.Popen]:
    """A forward lane whose training runs wait while the returned gate file exists."""
    gate = tmp_path / "gate"
    gate.touch()
    first_env = lane_env(env, tmp_path, "first", STUB_GATE=str(gate))
    return gate, first_env, lane(first_env)


# --- starting both lanes at once -------------------------------------------------------------------------------


def start_together(env: dict[str, str], tmp_path: Path, trial: int) -> list[tuple[int, str, str, dict[str, str]]]:
    """Both lanes started at the same moment on a HOME with no worktree yet (the first start of two lanes)."""
    home = tmp_path / f"home{trial}"
    home.mkdir()
    envs = [lane_env({**env, "HOME": str(home)}, tmp_path, f"{order}{trial}", STUB_SLEEP="0.05") for order in ("fwd", "bwd")]
    lanes = [lane(envs[0]), lane(envs[1], "backward")]
    return [(*finish(process), e) for process, e in zip(lanes, envs)]


def test_lanes_started_together_a_lane_that_cannot_start_says_so_and_runs_nothing(queue_env, tmp_path):  # noqa: F811
    """Held: whatever the worktree race does, a lane that loses it exits 2 with a `mujoco_1m:` line and starts no run,
    and a winner, when there is one, runs the whole list alone (two lanes never share the list's runs here)."""
    for trial in range(3):
        outcomes = start_together(queue_env, tmp_path, trial)
        for rc, out, err, env in outcomes:
            if rc != 0:
                assert rc == 2 and "mujoco_1m: " in err and calls(env) == [], (rc, out, err)
        if sorted(rc for rc, *_ in outcomes) == [0, 2]:  # the usual outcome
            rc, out, err, env = next(outcome for outcome in outcomes if outcome[0] == 0)
            assert sorted(runs_called(env)) == sorted(EVERY) and "other lane" not in out


def test_lanes_started_together_both_run(queue_env, tmp_path):  # noqa: F811
    """Found by this red team: both lanes started at once raced to make the worktree (the loser exited 2, in about 1
    start in 10 both did). The worktree step is now under a lock of its own: the second lane waits for the first."""
    for trial in range(3):
        outcomes = start_together(queue_env, tmp_path, trial)
        assert [rc for rc, *_ in outcomes] == [0, 0], [err for _, _, err, _ in outcomes]


def test_a_half_made_tree_is_refused_in_one_line_that_says_what_to_do(queue_env, tmp_path):  # noqa: F811
    """Found by this red team: the race (or a `git worktree add` cut short) left the tree's files with no .git, and every
    later start failed with git's error and "is at  or has edits". The race is gone; such a tree is now named for what
    it is. It is not removed for the user: its runs/ may hold the checkpoints of runs in progress."""
    tree = Path(queue_env["HOME"]) / "runs" / "tree"
    subprocess.run(
        ["git", "-C", queue_env["MUJOCO_1M_REPO"], "worktree", "add", "-q", "--detach", str(tree), MUJOCO_PIN],
        check=True,
        capture_output=True,
    )
    (tree / ".git").unlink()  # what the race left: the files, no .git
    done = subprocess.run(["bash", SCRIPT, "backward"], env=queue_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and calls(queue_env) == []
    assert done.stderr == (
        f"mujoco_1m: {tree} is not a git worktree (a worktree add cut short?): move its runs/ aside, remove it, start again\n"
    )


# --- a lane stopped or killed -----------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_forward_lane_leaves_its_run_to_the_other_lane(queue_env, tmp_path, signum):  # noqa: F811
    """Held: the forward lane's group stopped (TERM, as chain.sh stops it) or killed (KILL) mid-run; its flock goes
    with it, so a backward lane started after runs all 27, that run included, and says nothing is held."""
    first_env = lane_env(queue_env, tmp_path, "first", STUB_SLEEP="60")
    first = lane(first_env)
    try:
        wait_for(lambda: len(calls(first_env)) == 1, seconds=30)
    finally:
        kill_group(first, signum)
        first.communicate(timeout=10)
    wait_for(lambda: alive(first_env) == [], seconds=10)
    second_env = lane_env(queue_env, tmp_path, "second")
    rc, out, err = finish(lane(second_env, "backward"))
    assert rc == 0, err
    assert "other lane" not in out
    assert runs_called(second_env) == EVERY[::-1]


def test_a_killed_lane_under_the_real_benchmark_leaves_no_run_behind_and_its_run_to_the_other_lane(bench_env, tmp_path):
    """Held, with the pinned runner: SIGKILL to the forward lane's group kills the runner, whose training run (in a
    session of its own, out of the group's reach) gets SIGTERM from PR_SET_PDEATHSIG; the run did not inherit the
    flock's descriptor, so nothing holds the lock, and the backward lane runs seed 1 again."""
    gate, first_env, first = gated_first_lane(bench_env, tmp_path)
    try:
        wait_for(lambda: len(calls(first_env)) == 1, seconds=30)
    finally:
        kill_group(first, signal.SIGKILL)
        first.communicate(timeout=10)
    wait_for(lambda: alive(first_env) == [], seconds=10)  # the orphaned training run is gone, though the gate is not
    second_env = lane_env(bench_env, tmp_path, "second")
    rc, out, err = finish(lane(second_env, "backward"))
    assert rc == 0, err
    assert "other lane" not in out and runs_called(second_env) == LEFT[::-1]


# --- the lanes meeting --------------------------------------------------------------------------------------------


def test_lanes_meeting_under_the_real_benchmark_run_each_run_once(bench_env, tmp_path):
    """Held: the forward lane holds seed 1; the backward lane runs 3 and 2 and skips 1 with the claimed line; when
    seed 1 ends, the forward lane reaches 2 and 3, which the pinned benchmark's ledger skips (finished earlier)."""
    gate, first_env, first = gated_first_lane(bench_env, tmp_path)
    try:
        wait_for(lambda: len(calls(first_env)) == 1, seconds=30)
        second_env = lane_env(bench_env, tmp_path, "second")
        rc, out, err = finish(lane(second_env, "backward"))
        assert rc == 0, err
        assert "mujoco_1m: sac Walker2d-v4 1 is running in the other lane; skipped" in out
        assert runs_called(second_env) == [("sac", "Walker2d-v4", "3"), ("sac", "Walker2d-v4", "2")]
        gate.unlink()
        first_rc, first_out, first_err = finish(first)
    finally:
        kill_group(first, signal.SIGKILL)
    assert first_rc == 0 and "other lane" not in first_out, first_err
    assert runs_called(first_env) == [("sac", "Walker2d-v4", "1")]  # 2 and 3 were not started again
    assert first_err.count("finished earlier, skipped") == 2


def test_a_second_forward_lane_leapfrogs_the_first(queue_env, tmp_path):  # noqa: F811
    """Held: two forward lanes (not the documented use) still never share a run: the second skips the first's run."""
    first_env = lane_env(queue_env, tmp_path, "first", STUB_SLEEP="60")
    first = lane(first_env)
    try:
        wait_for(lambda: len(calls(first_env)) == 1, seconds=30)
        second_env = lane_env(queue_env, tmp_path, "second")
        rc, out, err = finish(lane(second_env))
    finally:
        kill_group(first, signal.SIGTERM)
        first.communicate(timeout=10)
    assert rc == 0, err
    assert "mujoco_1m: td3 Hopper-v4 1 is running in the other lane; skipped" in out
    assert runs_called(second_env) == EVERY[1:]


def test_a_new_backward_lane_beside_a_forward_lane_of_the_old_script_runs_nothing_twice(bench_env, tmp_path):
    """The forward lanes running now are the script before 3e9f953 (the commit says the file was replaced, so they
    keep it), which takes no flock. Held: the new backward lane does not see the old lane's run as held (no
    'skipped' line), but the pinned benchmark's own log-folder lock refuses the second runner, so seed 1 runs once;
    and the old lane, reaching 2 and 3, is skipped by the ledger."""
    old = tmp_path / "old_mujoco_1m.sh"
    old.write_text(
        subprocess.run(
            ["git", "-C", str(REPO), "show", "3e9f953^:benchmark/queues/mujoco_1m.sh"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    gate = tmp_path / "gate"
    gate.touch()
    first_env = lane_env(bench_env, tmp_path, "first", STUB_GATE=str(gate))
    first = subprocess.Popen(
        ["bash", str(old)], env=first_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        wait_for(lambda: len(calls(first_env)) == 1, seconds=30)
        second_env = lane_env(bench_env, tmp_path, "second")
        rc, out, err = finish(lane(second_env, "backward"))
        assert rc == 0, err
        assert "other lane" not in out  # observed: the claimed line is missing beside an old lane
        assert "is in use by another benchmark" in err  # the runner's lock refused it instead
        assert runs_called(second_env) == [("sac", "Walker2d-v4", "3"), ("sac", "Walker2d-v4", "2")]
        gate.unlink()
        first_rc, _, first_err = finish(first)
    finally:
        kill_group(first, signal.SIGKILL)
    assert first_rc == 0, first_err
    assert runs_called(first_env) == [("sac", "Walker2d-v4", "1")]


# --- exit statuses and odd inputs -------------------------------------------------------------------------------


def test_a_run_exiting_75_by_itself_is_not_reported_as_held(queue_env, tmp_path):  # noqa: F811
    """Found by this red team: `flock -E 75` passed a run's own exit 75 through as "busy". The lane now takes the
    lock before the run (`flock -n` on a descriptor), so a run's exit status says nothing about the lock."""
    stub = STUB_PYTHON.replace('exec sleep "${STUB_SLEEP:-0}"', 'exit "${STUB_EXIT:-0}"')
    assert stub != STUB_PYTHON
    (tmp_path / "venv" / "bin" / "python").write_text(stub)  # the benchmark call itself exits $STUB_EXIT
    env = lane_env(queue_env, tmp_path, "only", STUB_EXIT="75")
    rc, out, err = finish(lane(env, "backward"))
    assert len(runs_called(env)) == 27  # every run did start
    assert "other lane" not in out, out


def test_flock_missing_is_refused_with_one_line(queue_env, tmp_path):  # noqa: F811
    """Found by this red team: without flock each run was a 'command not found' line and the queue exited 0."""
    bin_dir = tmp_path / "bin_without_flock"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if Path(folder).is_dir():
            for tool in Path(folder).iterdir():
                if tool.name != "flock" and not os.path.lexists(bin_dir / tool.name):
                    (bin_dir / tool.name).symlink_to(tool)
    env = {**queue_env, "PATH": str(bin_dir)}
    done = subprocess.run(["bash", SCRIPT, "backward"], env=env, capture_output=True, text=True, timeout=60)
    assert calls(env) == []
    assert (done.returncode, done.stderr) == (2, "mujoco_1m: needs flock (Debian package util-linux)\n")


@pytest.mark.parametrize("order", [[], ["backward"]])
def test_nothing_to_do_under_set_u(queue_env, order):  # noqa: F811
    """Held: all 27 recorded, either order (the backward copy of an empty array under `set -u`): 0 runs, exit 0."""
    record(queue_env, EVERY)
    done = subprocess.run(["bash", SCRIPT, *order], env=queue_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"mujoco_1m: 0 runs to go ({(order or ['forward'])[0]})" in done.stdout
    assert "unbound" not in done.stderr and calls(queue_env) == []


@pytest.mark.parametrize("word", ["forward", "sideways", "Backward", "--help", "backward "])
def test_a_bad_order_word_is_one_line_and_exit_2_before_anything(queue_env, word):  # noqa: F811
    """Held: refused before the worktree is made or anything runs. `forward` too: the first lane takes no word, so that
    chain.sh, which knows a running queue by its command line ending in `mujoco_1m.sh`, sees every first lane."""
    done = subprocess.run(["bash", SCRIPT, word], env=queue_env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"mujoco_1m: usage: mujoco_1m.sh [backward], not: {word}\n"
    assert list(Path(queue_env["HOME"]).iterdir()) == [] and calls(queue_env) == []


def test_extra_arguments_are_refused(queue_env):  # noqa: F811
    """Found by this red team: words after the first were ignored (`backward now` ran the backward lane)."""
    done = subprocess.run(["bash", SCRIPT, "backward", "now"], env=queue_env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, "mujoco_1m: usage: mujoco_1m.sh [backward], not: backward now\n")
    assert calls(queue_env) == []


# --- chain.sh beside the lanes ----------------------------------------------------------------------------------


def chain_env(tmp_path: Path) -> dict[str, str]:
    """chain.sh's environment, with a `ps` that lists nothing, so that its keep_queues_niced loop touches no process of
    this machine (it sets the autogroup of every nice-19 process it sees)."""
    bin_dir = tmp_path / "chain_bin"
    bin_dir.mkdir()
    (bin_dir / "ps").write_text("#!/bin/sh\n")
    (bin_dir / "ps").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CHAIN_POLL_S": "0.2"}


def by_hand_then_chain(stub_queues: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:  # noqa: F811
    env = chain_env(tmp_path)
    by_hand = subprocess.Popen(["bash", "benchmark/queues/mujoco_1m.sh", *args], cwd=tmp_path, env={**env, "MUJOCO_S": "3"})
    log = tmp_path / "order.log"
    wait_for(lambda: log.exists(), seconds=30)
    chain = subprocess.run(["bash", str(stub_queues / "chain.sh")], env=env, capture_output=True, text=True, timeout=60)
    by_hand.wait(timeout=30)
    assert chain.returncode == 0, chain.stderr
    return chain, [" ".join(line.split()[:2]) for line in log.read_text().splitlines()]


def test_chain_starts_its_forward_lane_beside_a_backward_lane(stub_queues, tmp_path):  # noqa: F811
    """Held (intended): `running()` matches `queues/mujoco_1m.sh$`, so a backward lane started by hand is not taken for
    the queue; the chain starts its forward lane at once, beside it."""
    chain, order = by_hand_then_chain(stub_queues, tmp_path, "backward")
    assert "already running" not in chain.stdout
    assert order[:3] == ["start mujoco_1m.sh", "start mujoco_1m.sh", "end mujoco_1m.sh"]
