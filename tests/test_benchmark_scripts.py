"""The benchmark scripts run end to end (with few steps) and print what the docs quote."""

import os
import re
import subprocess
import sys

from tests.helpers import REPO, script_env


def test_speed_vs_sb3_prints_both_rates_and_the_ratio(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmark" / "speed_vs_sb3.py"), "--total-timesteps", "10240", "--algos", "ppo", "dqn"],
        cwd=tmp_path,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(
        r"^\| (ppo|dqn) \(10240 steps, SB3 default threads\) \| (\d+) \| (\d+) \| ([\d.]+)x \|$", proc.stdout, re.M
    )
    assert [r[0] for r in rows] == ["ppo", "dqn"]
    for _, ours, theirs, ratio in rows:
        assert int(ours) > 0 and int(theirs) > 0
        assert abs(float(ratio) - int(ours) / int(theirs)) < 0.01


def test_learning_benchmark_script_runs_each_seed_and_summarises(tmp_path):
    env = script_env(SEEDS="1 2", TOTAL_TIMESTEPS="1024", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", str(REPO / "benchmark" / "ppo.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(re.findall(r"^\| CartPole-v1__ppo__[12]__\d+ \|", proc.stdout, re.M)) == 2
    assert "**2 runs**" in proc.stdout
