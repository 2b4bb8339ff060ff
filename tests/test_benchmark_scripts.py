"""The benchmark scripts run end to end (with few steps) and print what the docs quote."""

import os
import re
import subprocess
import sys

from tests.helpers import REPO, script_env


def test_speed_vs_sb3_prints_both_rates_and_the_ratio(tmp_path):
    command = [sys.executable, str(REPO / "benchmark" / "speed_vs_sb3.py"), "--total-timesteps", "10240", "--rounds", "2"]
    proc = subprocess.run(command, cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cell = r"(\d+) \((\d+), (\d+)\)"  # median (round 1, round 2)
    rows = re.findall(
        rf"^\| (ppo|dqn) \(10240 steps, SB3 default threads\) \| {cell} \| {cell} \| ([\d.]+)x \|$", proc.stdout, re.M
    )
    assert [row[0] for row in rows] == ["ppo", "dqn"]
    for row in rows:
        ours, ours_1, ours_2, theirs, theirs_1, theirs_2 = map(int, row[1:7])
        assert min(ours_1, ours_2, theirs_1, theirs_2) > 0
        # the median of two rounds is their mean
        assert abs(ours - (ours_1 + ours_2) / 2) <= 1 and abs(theirs - (theirs_1 + theirs_2) / 2) <= 1
        assert abs(float(row[7]) - ours / theirs) < 0.01


def test_learning_benchmark_script_runs_each_seed_and_summarises(tmp_path):
    env = script_env(SEEDS="1 2", TOTAL_TIMESTEPS="1024", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", str(REPO / "benchmark" / "ppo.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(re.findall(r"^\| CartPole-v1__ppo__[12]__\d+ \|", proc.stdout, re.M)) == 2
    assert "**2 runs**" in proc.stdout
