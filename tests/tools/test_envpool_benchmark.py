"""benchmark/checks/envpool_procgen.py: its report applies the bars to hand-made results (no benchmark is run here)."""

import json
import subprocess
import sys

import pytest


def write_result(path, returns, sps=100.0):
    path.write_text(json.dumps({"sps": sps, "episodic_returns": returns}))


def write_rates(out, kind="speed", **rates):
    """`<kind>__<script>__<round>.json` for each script's rate in each round, as the speed runs write them."""
    for script, rounds in rates.items():
        for round_, sps in enumerate(rounds, 1):
            write_result(out / f"{kind}__{script}__{round_}.json", [], sps=sps)


def test_report_applies_three_times_random_to_the_last_20_games(tmp_path):
    from benchmark.checks import envpool_procgen as bench

    write_result(tmp_path / "random__Breakout-v5.json", [1.0, 2.0])  # mean 1.5
    write_result(tmp_path / "random__starpilot.json", [2.0, 2.0])
    # PPO reaches 3 x random only when the last 20 games count, not the early ones
    write_result(tmp_path / "ours__ppo_atari_envpool__Breakout-v5__1000000__1.json", [0.0] * 30 + [4.5] * 20)
    write_result(tmp_path / "ours__pqn_atari_envpool__Breakout-v5__1000000__1.json", [9.0] * 5 + [4.4] * 20)
    write_rates(tmp_path, ppo_atari_envpool=[330.0, 310.0], ppo_atari=[200.0])

    table = bench.report(tmp_path)
    assert "| ppo_atari_envpool | Breakout-v5 | 1000k | 1 | 4.5 | 1.50 | 3.0× | yes |" in table
    assert "| pqn_atari_envpool | Breakout-v5 | 1000k | 1 | 4.4 | 1.50 | 2.9× | **no** |" in table
    assert "ppo_procgen" not in table  # not run: no row rather than a made-up one
    assert "Random policy, mean whole-game score: Breakout-v5 1.50, starpilot 2.00." in table
    assert "| ppo_atari_envpool | Breakout-v5 | 320 | 330, 310 |" in table
    assert "| ppo_atari | BreakoutNoFrameskip-v4 | 200 | 200 |" in table
    assert table.endswith("ppo_atari_envpool / ppo_atari: 1.60× (bar 1.5×: yes)")


def test_report_fails_a_speedup_below_the_bar_and_needs_both_sides(tmp_path):
    from benchmark.checks import envpool_procgen as bench

    write_result(tmp_path / "speed__ppo_atari_envpool__1.json", [], sps=290.0)
    assert "ppo_atari_envpool / ppo_atari" not in bench.report(tmp_path)  # one side only: no ratio
    write_result(tmp_path / "speed__ppo_atari__1.json", [], sps=200.0)
    assert bench.report(tmp_path).endswith("ppo_atari_envpool / ppo_atari: 1.45× (bar 1.5×: **no**)")


def test_report_times_the_xla_files_beside_ppo_atari_envpool(tmp_path):
    from benchmark.checks import envpool_procgen as bench

    write_result(tmp_path / "random__Breakout-v5.json", [1.0, 2.0])  # mean 1.5
    write_result(tmp_path / "ours__ppo_atari_envpool_xla_jax__Breakout-v5__500000__1.json", [5.0] * 20)
    write_result(tmp_path / "speed__ppo_atari_envpool_xla_jax_scan__1.json", [], sps=250.0)
    table = bench.report(tmp_path)
    assert "| ppo_atari_envpool_xla_jax | Breakout-v5 | 500k | 1 | 5.0 | 1.50 | 3.3× | yes |" in table
    assert "/ ppo_atari_envpool:" not in table  # one side only: no ratio
    write_result(tmp_path / "speed__ppo_atari_envpool__1.json", [], sps=200.0)
    assert bench.report(tmp_path).endswith("ppo_atari_envpool_xla_jax_scan / ppo_atari_envpool: 1.25×")


def test_report_compares_procgen_with_its_own_random_policy(tmp_path):
    from benchmark.checks import envpool_procgen as bench

    write_result(tmp_path / "random__Breakout-v5.json", [1.0])
    write_result(tmp_path / "random__starpilot.json", [2.5, 3.5])  # mean 3.0
    write_result(tmp_path / "ours__ppo_procgen__starpilot__1000000__1.json", [10.0] * 20)
    assert "| ppo_procgen | starpilot | 1000k | 1 | 10.0 | 3.00 | 3.3× | yes |" in bench.report(tmp_path)


def test_random_policy_scores_whole_games_not_lives():
    pytest.importorskip("envpool")
    from benchmark.checks import envpool_procgen as bench

    # each of Breakout's 5 lives lasts at least ~24 agent steps under random play: a whole game is
    # over 100 steps long, a single life is not; scores are sums of whole points
    games = bench.random_policy_games("Breakout-v5", 2)
    assert len(games) == 2
    assert all(score >= 0 and score == int(score) and length > 100 for score, length in games)


def test_report_bounds_the_speedup_by_the_share_of_time_in_the_games(tmp_path):
    from benchmark.checks import envpool_procgen as bench

    write_rates(tmp_path, ppo_atari_envpool=[240.0], ppo_atari=[200.0])
    # ppo_atari.py: 5 ms a step, 1 ms of it in its games (1000 steps/s alone); envpool's games: 0.5 ms
    write_rates(tmp_path, "envonly", ppo_atari=[1000.0], ppo_atari_envpool=[2000.0])
    table = bench.report(tmp_path)
    assert "| ppo_atari (BreakoutNoFrameskip-v4) | 1000 | 1000 |" in table
    assert "| ppo_atari_envpool (Breakout-v5) | 2000 | 2000 |" in table
    assert table.endswith(
        "The games take 20% of ppo_atari.py's time; with envpool's env cost it would run at 222 steps/s (1.11×), "
        "and with games that cost nothing at 250 (1.25×)."
    )


# ppo_atari's pipeline (5 s of one core) is `extended`: CI runs it after the quick run
@pytest.mark.parametrize("script", [pytest.param("ppo_atari", marks=pytest.mark.extended), "ppo_atari_envpool"])
def test_env_only_rate_steps_each_files_own_pipeline(script):
    pytest.importorskip("envpool")
    from benchmark.checks import envpool_procgen as bench

    assert bench.env_only_rate(script, steps=8) > 0


def test_procgen_run_writes_checkpoints_and_keeps_large_allocations(tmp_path):
    """ppo_procgen's 1M steps outlast a working session: its run writes checkpoints (harness's queue resumes it)."""
    from benchmark.checks import envpool_procgen as bench

    (procgen,) = bench.learning_runs(tmp_path, ["ppo_procgen"])
    assert (procgen.env_id, procgen.seed, procgen.checkpoint_every) == ("starpilot", 1, 2)
    assert procgen.args == ("--total-timesteps", "1000000")
    assert procgen.result == tmp_path / "ours__ppo_procgen__starpilot__1000000__1.json"
    assert [run.checkpoint_every for run in bench.learning_runs(tmp_path, ["pqn_atari_envpool"])] == [0]  # not asked for
    env = bench.run_env(2)  # alone on the machine: 2 torch threads, still one XLA thread
    assert env["OMP_NUM_THREADS"] == "2" and "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert "glibc.malloc.mmap_threshold=4294967296" in env["GLIBC_TUNABLES"]


FREE_100_MB = """
import os, numpy as np
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
block = np.ones(100 * 2**20 // 8)
before = rss()
del block
print((before - rss()) / 2**20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_keep_large_allocations_keeps_freed_blocks_in_the_heap():
    from benchmark.harness import keep_large_allocations

    def returned_mb(env):
        return float(
            subprocess.run([sys.executable, "-c", FREE_100_MB], env=env, capture_output=True, text=True, check=True).stdout
        )

    plain = {"PATH": "/usr/bin:/bin"}
    assert returned_mb(plain) > 90  # glibc gives a freed 100 MB block straight back to the kernel
    assert returned_mb(keep_large_allocations(plain)) < 10  # kept for the next minibatch
    earlier = keep_large_allocations({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"]
    assert earlier.startswith("glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=")  # a user's own tunables stay
