"""benchmark/queues/frames_rlops.sh, issue54.sh, mujoco_1m.sh and chain.sh, driven with a stub `python` (a venv whose python records its call
and sleeps), a shared clone of this repository and a HOME under tmp_path: the pins, the order, the exit statuses, and
that a stop leaves no run behind. The real runs take hours; these take seconds."""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import REPO

QUEUES = REPO / "benchmark" / "queues"
BEFORE, AFTER = "0ae9cd3", "66d80a2"  # frames_rlops.sh's pins: 66d80a2^ and the frame change
ISSUE54_PIN = re.search(r"^PIN=(\w+)", (QUEUES / "issue54.sh").read_text(), re.M).group(1)
MUJOCO_PIN = re.search(r"^PIN=(\w+)", (QUEUES / "mujoco_1m.sh").read_text(), re.M).group(1)
STUB_PYTHON = """#!/usr/bin/env bash
echo "$PWD|${PYTHONPATH:-}|${WANDB_TAGS:-}|${OMP_NUM_THREADS:-}|$(nice)|$*" >> "$STUB_LOG"
echo $$ >> "$STUB_PIDS"
case "$*" in *cleanrl_utils.rlops*) exit "${STUB_GATE_EXIT:-0}" ;; esac
exec sleep "${STUB_SLEEP:-0}"
"""


def stub_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'export PATH="{venv / "bin"}:$PATH"\n')
    (venv / "bin" / "python").write_text(STUB_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    return venv


@pytest.fixture
def queue_env(tmp_path: Path) -> dict[str, str]:
    """The queues' environment: stub venv, a clone of this repository holding their pins, HOME in tmp_path."""
    clone = tmp_path / "repo"
    made = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(REPO), str(clone)], capture_output=True)
    has_pins = made.returncode == 0 and all(
        subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{pin}^{{commit}}"], capture_output=True).returncode == 0
        for pin in (BEFORE, AFTER, ISSUE54_PIN, MUJOCO_PIN)
    )
    if not has_pins:
        pytest.skip(f"this checkout lacks the pinned commits {BEFORE}, {AFTER}, {ISSUE54_PIN}, {MUJOCO_PIN} (a shallow clone)")
    (tmp_path / "home").mkdir()
    venv = str(stub_venv(tmp_path))
    return {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "FRAMES_RLOPS_VENV": venv,
        "FRAMES_RLOPS_REPO": str(clone),
        "ISSUE54_VENV": venv,
        "ISSUE54_REPO": str(clone),
        "MUJOCO_1M_VENV": venv,
        "MUJOCO_1M_REPO": str(clone),
        "STUB_LOG": str(tmp_path / "calls.log"),
        "STUB_PIDS": str(tmp_path / "pids"),
    }


def calls(env: dict[str, str]) -> list[list[str]]:
    log = Path(env["STUB_LOG"])
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def alive(env: dict[str, str]) -> list[int]:
    pids = Path(env["STUB_PIDS"])
    return [int(pid) for pid in pids.read_text().split() if Path(f"/proc/{pid}").exists()] if pids.exists() else []


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_frames_rlops_runs_each_side_from_its_pin_and_exits_as_gate(queue_env):
    home = Path(queue_env["HOME"])
    done = subprocess.run(
        ["bash", str(QUEUES / "frames_rlops.sh")], env={**queue_env, "STUB_GATE_EXIT": "3"}, capture_output=True, text=True
    )
    assert done.returncode == 3, done.stderr  # inconclusive passes through, so a chain or a person sees it
    trees = {side: home / "runs" / f"tree_frames_{side}" for side in ("gray_max", "rgb_max")}
    for side, pin in (("gray_max", BEFORE), ("rgb_max", AFTER)):
        head = subprocess.run(
            ["git", "-C", str(trees[side]), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True
        )
        assert head.stdout.strip() == pin
    *sides, gate = calls(queue_env)
    assert sorted(call[2] for call in sides) == ["frames-gray-max", "frames-rgb-max"]
    for cwd, pythonpath, tags, threads, niceness, args in sides:
        side = tags.removeprefix("frames-").replace("-", "_")
        assert cwd == pythonpath == str(trees[side]) and threads == "1" and niceness == "19"
        start = {"gray_max": 1, "rgb_max": 101}[side]  # seeds of its own per side, so the gate can decide at 6 a side
        assert (
            f"-m cleanrl_utils.benchmark --env-ids MsPacmanNoFrameskip-v4 --num-seeds 6 --start-seed {start} --workers 1"
            in args
        )
        assert (
            "--total-timesteps 300000 --checkpoint-frequency 25" in args
            and f"--log-dir {home}/runs/frames_rlops/logs/" in args
        )
    assert gate[0] == queue_env["FRAMES_RLOPS_REPO"] and "--fail-on-regression" in gate[5]
    assert f"--runs-dir {trees['rgb_max']}/runs {trees['gray_max']}/runs" in gate[5]
    assert "--tags frames-rgb-max frames-gray-max --baseline frames-gray-max" in gate[5]


def test_frames_rlops_refuses_a_tree_with_edits_before_running_anything(queue_env):
    subprocess.run(["bash", str(QUEUES / "frames_rlops.sh")], env=queue_env, capture_output=True, check=True)
    Path(queue_env["STUB_LOG"]).unlink()
    readme = Path(queue_env["HOME"]) / "runs" / "tree_frames_rgb_max" / "README.md"
    readme.write_text(readme.read_text() + "an edit\n")
    done = subprocess.run(["bash", str(QUEUES / "frames_rlops.sh")], env=queue_env, capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "has edits" in done.stderr
    assert calls(queue_env) == []


def test_frames_rlops_dry_run_makes_no_worktree_and_runs_nothing(queue_env):
    done = subprocess.run(
        ["bash", str(QUEUES / "frames_rlops.sh")],
        env={**queue_env, "FRAMES_RLOPS_DRY_RUN": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "cleanrl_utils.rlops" in done.stdout and done.stdout.count("cleanrl_utils.benchmark") == 2
    assert list(Path(queue_env["HOME"]).iterdir()) == [] and calls(queue_env) == []


def test_frames_rlops_stopped_ends_both_sides_runs(queue_env):
    queue = subprocess.Popen(["bash", str(QUEUES / "frames_rlops.sh")], env={**queue_env, "STUB_SLEEP": "120"})
    wait_for(lambda: len(alive(queue_env)) == 2)
    queue.send_signal(signal.SIGTERM)
    assert queue.wait(timeout=60) == 130
    wait_for(lambda: alive(queue_env) == [], seconds=10)
    assert len(calls(queue_env)) == 2  # no gate after a stop


def test_issue54_runs_its_two_lanes_from_its_pin_then_the_reports(queue_env):
    out = Path(queue_env["HOME"]) / "runs" / "issue54"
    done = subprocess.run(["bash", str(QUEUES / "issue54.sh")], env=queue_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tree = Path(queue_env["HOME"]) / "runs" / "tree54"
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    assert head.stdout.strip() == ISSUE54_PIN[:7]
    checks = [call[5] for call in calls(queue_env)]
    assert all(call[0] == call[1] == str(tree) and call[3] == "1" for call in calls(queue_env))
    assert sum(" run " in check for check in checks) == 5 and sum(" report " in check for check in checks) == 4
    assert checks[-4:] == [c for c in checks if " report " in c]  # the reports once both lanes have ended
    assert len((out / "lane_a.log").read_text().splitlines()) == 8  # 4 checks, a start and an exit line each


def test_issue54_dry_run_runs_nothing_and_leaves_the_lane_logs_alone(queue_env):
    done = subprocess.run(
        ["bash", str(QUEUES / "issue54.sh")], env={**queue_env, "ISSUE54_DRY_RUN": "1"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(" start: ") == 6 and calls(queue_env) == []
    assert sorted(p.name for p in (Path(queue_env["HOME"]) / "runs" / "issue54").iterdir()) == []


def test_mujoco_1m_runs_only_the_runs_without_a_committed_summary_in_order(queue_env):
    results = Path(queue_env["MUJOCO_1M_REPO"]) / "benchmark" / "results" / "mujoco_1m"
    results.mkdir(parents=True)
    recorded = [("td3", "Hopper-v4", "1"), ("td3", "Hopper-v4", "2"), ("sac", "Walker2d-v4", "3")]
    for algo, env_id, seed in recorded:
        (results / f"{algo}_continuous_action_jax__{env_id}__{seed}.json").write_text("{}")
    done = subprocess.run(["bash", str(QUEUES / "mujoco_1m.sh")], env=queue_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "24 runs to go" in done.stdout
    home = Path(queue_env["HOME"])
    runs = []
    for cwd, pythonpath, _, threads, niceness, args in calls(queue_env):
        assert (cwd, pythonpath, threads, niceness) == (f"{home}/runs/tree", f"{home}/runs/tree", "1", "19")
        env_id, seed = re.search(r"--env-ids (\S+) --start-seed (\d+) --num-seeds 1 --workers 1 ", args).groups()
        algo = re.search(r"cleanrl/(\w+)_continuous_action_jax\.py --checkpoint-frequency 25000", args).group(1)
        assert args.endswith(f"--log-dir {home}/runs/mujoco_1m/logs/{algo}/{env_id}/{seed}")
        runs.append((algo, env_id, seed))
    every = [(a, e, s) for a in ("td3", "ddpg", "sac") for e in ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4") for s in "123"]
    assert runs == [run for run in every if run not in recorded]  # one at a time, TD3's runs first
    tree_head = subprocess.run(["git", "-C", str(home / "runs" / "tree"), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert tree_head.stdout.startswith(MUJOCO_PIN)


def test_mujoco_1m_second_lane_walks_the_list_backward_and_skips_the_first_lanes_run(queue_env, tmp_path):
    """Two lanes: the second takes the runs from the list's end and skips the one the first lane holds (its flock)."""
    first = subprocess.Popen(
        ["bash", str(QUEUES / "mujoco_1m.sh")], env={**queue_env, "STUB_SLEEP": "60"}, start_new_session=True
    )
    try:
        wait_for(lambda: len(calls(queue_env)) == 1)  # the first lane is on td3 Hopper-v4 seed 1
        second_env = {**queue_env, "STUB_LOG": str(tmp_path / "second.log")}
        second = subprocess.run(
            ["bash", str(QUEUES / "mujoco_1m.sh"), "backward"], env=second_env, capture_output=True, text=True, timeout=60
        )
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        first.wait(timeout=10)
    assert second.returncode == 0, second.stderr
    assert "27 runs to go (backward)" in second.stdout
    assert "mujoco_1m: td3 Hopper-v4 1 is running in the other lane; skipped" in second.stdout
    runs = []
    for *_, args in calls(second_env):
        env_id, seed = re.search(r"--env-ids (\S+) --start-seed (\d+) ", args).groups()
        runs.append((re.search(r"cleanrl/(\w+)_continuous_action_jax", args).group(1), env_id, seed))
    every = [(a, e, s) for a in ("td3", "ddpg", "sac") for e in ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4") for s in "123"]
    assert runs == every[::-1][:-1]  # all but the first lane's, from the end
    bad = subprocess.run(["bash", str(QUEUES / "mujoco_1m.sh"), "sideways"], env=queue_env, capture_output=True, text=True)
    assert (bad.returncode, bad.stderr) == (2, "mujoco_1m: usage: mujoco_1m.sh [backward], not: sideways\n")


@pytest.fixture
def stub_queues(tmp_path: Path) -> Path:
    """chain.sh beside two stub queues that log their start and end; mujoco_1m.sh sleeps, then fails."""
    queues = tmp_path / "benchmark" / "queues"
    queues.mkdir(parents=True)
    shutil.copy(QUEUES / "chain.sh", queues)
    for name, body in (
        ("mujoco_1m.sh", 'sleep "${MUJOCO_S:-0}"; false'),
        ("issue54.sh", 'sleep "${ISSUE54_S:-0}"'),
    ):
        log = tmp_path / "order.log"
        (queues / name).write_text(
            f'echo "start {name} $$" >> {log}\n{body}\nstatus=$?\necho "end {name}" >> {log}\nexit $status\n'
        )
    return queues


def test_chain_waits_for_a_queue_started_by_hand_then_runs_all_in_turn(stub_queues, tmp_path):
    env = {**os.environ, "CHAIN_POLL_S": "0.2"}
    by_hand = subprocess.Popen(["bash", "benchmark/queues/mujoco_1m.sh"], cwd=tmp_path, env={**env, "MUJOCO_S": "3"})
    wait_for(lambda: (tmp_path / "order.log").exists())
    chain = subprocess.run(["bash", str(stub_queues / "chain.sh")], env=env, capture_output=True, text=True, timeout=60)
    by_hand.wait()
    assert chain.returncode == 0, chain.stderr
    assert "mujoco_1m.sh is already running" in chain.stdout and "mujoco_1m.sh ended, exit 1" in chain.stdout
    order = [line.split()[:2] for line in (tmp_path / "order.log").read_text().splitlines()]
    assert [" ".join(step) for step in order] == [
        "start mujoco_1m.sh",  # the one started by hand, which the chain does not race
        "end mujoco_1m.sh",
        "start mujoco_1m.sh",
        "end mujoco_1m.sh",  # failed (exit 1): the chain goes on
        "start issue54.sh",
        "end issue54.sh",
    ]


def test_chain_stopped_stops_the_running_queue_and_goes_no_further(stub_queues, tmp_path):
    chain = subprocess.Popen(
        ["bash", str(stub_queues / "chain.sh")], env={**os.environ, "MUJOCO_S": "120"}, stdout=subprocess.PIPE, text=True
    )
    log = tmp_path / "order.log"
    wait_for(lambda: log.exists() and "start mujoco_1m.sh" in log.read_text())
    queue_pid = int(log.read_text().split("start mujoco_1m.sh ")[1].split()[0])
    chain.send_signal(signal.SIGTERM)
    assert chain.wait(timeout=30) == 130
    wait_for(lambda: not Path(f"/proc/{queue_pid}").exists(), seconds=10)
    assert "end mujoco_1m.sh" not in log.read_text() and "start issue54.sh" not in log.read_text()
    assert "chain: stopped" in chain.stdout.read()
