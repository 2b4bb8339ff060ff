"""The benchmark scripts run end to end (with few steps) and print what the docs quote."""

import dataclasses
import json
import os
import re
import subprocess
import sys

from tests.helpers import REPO, script_env


def test_speed_vs_sb3_prints_both_rates_and_the_ratio(tmp_path):
    # one run per algorithm, each with few steps: ppo.py logs its SPS after each 512-step update, dqn.py only once
    # it learns, after its 10000 learning-starts steps
    for algo, steps in (("ppo", 1024), ("dqn", 10240)):
        command = [sys.executable, str(REPO / "benchmark" / "speed_vs_sb3.py"), "--algos", algo]
        command += ["--total-timesteps", str(steps), "--rounds", "2"]
        proc = subprocess.run(command, cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        cell = r"(\d+) \((\d+), (\d+)\)"  # median (round 1, round 2)
        rows = re.findall(
            rf"^\| (ppo|dqn) \({steps} steps, SB3 default threads\) \| {cell} \| {cell} \| ([\d.]+)x \|$", proc.stdout, re.M
        )
        assert [row[0] for row in rows] == [algo]
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


def write_result(path, returns, sps=100.0):
    import json

    path.write_text(json.dumps({"sps": sps, "episodic_returns": returns}))


def test_atari_report_applies_the_bars_of_each_check(tmp_path):
    from benchmark import atari_vs_sb3 as bench

    write_result(tmp_path / "random__BreakoutNoFrameskip-v4.json", [1.0, 2.0])  # mean 1.5
    # PPO: ours 10 and 8 (mean 9) against SB3's 10 and 12 (mean 11): 9 >= 0.8 x 11 and 9 >= 3 x 1.5
    for seed, ours, sb3 in ((1, 10.0, 10.0), (2, 8.0, 12.0)):
        write_result(tmp_path / f"ours__ppo_atari__BreakoutNoFrameskip-v4__300000__{seed}.json", [0.0] * 50 + [ours] * 20)
        write_result(tmp_path / f"sb3__ppo_atari__BreakoutNoFrameskip-v4__300000__{seed}.json", [sb3] * 20)
    # DQN reaches 2 x random only if its last 20 episodes count, not the early ones
    write_result(tmp_path / "ours__dqn_atari__BreakoutNoFrameskip-v4__200000__1.json", [0.0] * 30 + [3.0] * 20)
    write_result(tmp_path / "ours__c51_atari__BreakoutNoFrameskip-v4__200000__1.json", [2.9] * 20)
    write_result(tmp_path / "speed__ppo_atari__1.json", [], sps=300.0)
    write_result(tmp_path / "speed__ppo_atari__2.json", [], sps=320.0)

    table = bench.report(tmp_path)
    assert "| ppo_atari | BreakoutNoFrameskip-v4 | 300k | 2 | 9.0 ± 1.0 | 11.0 ± 1.0 | 1.50 | 6.0× | yes |" in table
    assert "| dqn_atari | BreakoutNoFrameskip-v4 | 200k | 1 | 3.0 ± 0.0 | — | 1.50 | 2.0× | yes |" in table
    assert "| c51_atari | BreakoutNoFrameskip-v4 | 200k | 1 | 2.9 ± 0.0 | — | 1.50 | 1.9× | **no** |" in table
    assert "rainbow_atari" not in table and "sac_atari" not in table  # not run: no row rather than a made-up one
    assert "| ppo_atari | 310 | 300, 320 |" in table


def test_atari_report_fails_ppo_that_trails_sb3(tmp_path):
    from benchmark import atari_vs_sb3 as bench

    write_result(tmp_path / "random__BreakoutNoFrameskip-v4.json", [1.0])
    write_result(tmp_path / "ours__ppo_atari__BreakoutNoFrameskip-v4__300000__1.json", [7.0] * 20)
    write_result(tmp_path / "sb3__ppo_atari__BreakoutNoFrameskip-v4__300000__1.json", [10.0] * 20)
    assert "| 7.0× | **no** |" in bench.report(tmp_path)  # 7 >= 3 x random, but below 0.8 x 10


def test_atari_report_holds_multigpu_to_ppo_atari_within_noise(tmp_path):
    from benchmark import atari_vs_sb3 as bench

    write_result(tmp_path / "random__BreakoutNoFrameskip-v4.json", [1.0])
    for seed, score in ((1, 10.0), (2, 14.0)):  # ppo_atari: 12 ± 2
        write_result(tmp_path / f"ours__ppo_atari__BreakoutNoFrameskip-v4__300000__{seed}.json", [score] * 20)
    for seed, score in ((1, 10.0), (2, 11.0)):  # 10.5 >= 12 - 2
        write_result(tmp_path / f"ours__ppo_atari_multigpu__BreakoutNoFrameskip-v4__300000__{seed}.json", [score] * 20)
    assert (
        "| ppo_atari_multigpu | BreakoutNoFrameskip-v4 | 300k | 2 | 10.5 ± 0.5 | ppo_atari: 12.0 ± 2.0 | 1.00 | 10.5× | yes |"
        in (bench.report(tmp_path))
    )
    write_result(tmp_path / "ours__ppo_atari_multigpu__BreakoutNoFrameskip-v4__300000__2.json", [9.0] * 20)
    assert "| 9.5× | **no** |" in bench.report(tmp_path)  # 9.5 < 12 - 2, though 9.5 x random
    (run,) = [r for r in bench.learning_runs(tmp_path, ["ppo_atari_multigpu"]) if r.seed == 1]
    assert run.program[:4] == ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2")


def test_atari_learning_runs_pair_ours_with_sb3_and_checkpoint_the_long_one(tmp_path):
    from benchmark import atari_vs_sb3 as bench

    runs = {run.result.name: run for run in bench.learning_runs(tmp_path, ["ppo_atari", "sac_atari"])}
    ours = runs["ours__ppo_atari__BreakoutNoFrameskip-v4__300000__2.json"]
    assert ours.args == ("--total-timesteps", "300000") and (ours.env_id, ours.seed) == ("BreakoutNoFrameskip-v4", 2)
    sb3 = runs["sb3__ppo_atari__BreakoutNoFrameskip-v4__300000__2.json"]
    assert sb3.program[-1] == "ppo_atari" and sb3.args[-2:] == ("--json", str(sb3.result)) and sb3.summarize is None
    assert runs["ours__sac_atari__BeamRiderNoFrameskip-v4__200000__1.json"].checkpoint_every == 10_000
    assert not ours.checkpoint_every


FAKE_TRAINING = """
import os, sys
from pathlib import Path
Path("argv.txt").write_text(" ".join(sys.argv[1:]))
if "fail" in sys.argv:
    sys.exit(3)
run = Path("runs") / f"run{len(list(Path('runs').glob('*'))) if Path('runs').exists() else 0}"
run.mkdir(parents=True)
(run / "events.out.tfevents.0").write_text("")
print("trained")
"""


def test_queue_runs_what_is_not_done_through_the_runner_and_resumes_checkpointed_runs(tmp_path):
    from benchmark.benchlib import QueuedRun, one_thread_env, run_queue

    program = tmp_path / "train.py"
    program.write_text(FAKE_TRAINING)
    summarized = []

    def queued(name, *args, checkpoint_every=0):
        result = tmp_path / "out" / f"{name}.json"
        summarize = lambda run_dir: (summarized.append(run_dir), result.write_text("{}"))  # noqa: E731
        return QueuedRun(result, (str(program),), args, "Env-v0", 7, checkpoint_every, summarize)

    done, fresh, stopped, failing = (
        queued("done"),
        queued("fresh", "--a"),
        queued("stopped", "--a", checkpoint_every=5),
        queued("bad", "fail"),
    )
    done.result.parent.mkdir()
    done.result.write_text("{}")
    checkpoints = stopped.workdir / "runs" / "Env-v0__x__7__1" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "checkpoint_10.pt").write_bytes(b"")

    logs = tmp_path / "out" / "logs"
    assert run_queue([done, fresh, stopped, failing], 2, one_thread_env(), logs) == 1  # one run failed
    assert not done.workdir.exists()  # done before: not run again
    assert (fresh.workdir / "argv.txt").read_text() == "--a --env-id Env-v0 --seed 7"  # in its own folder
    assert fresh.result.exists() and summarized[0] == fresh.workdir / "runs" / "run0"
    # a run with checkpoints goes on from its newest one, with the arguments it was started with
    assert (stopped.workdir / "argv.txt").read_text() == "--resume runs/Env-v0__x__7__1 --env-id Env-v0 --seed 7"
    assert not failing.result.exists() and len(summarized) == 2
    assert "trained" in (logs / "fresh.log").read_text() and (logs / "bad.log").exists()


def test_benchmark_runs_go_through_the_runner(tmp_path):
    from benchmark.benchlib import QueuedRun, one_thread_env, run_queue, script, summarize_run

    result = tmp_path / "ppo.json"
    run = QueuedRun(result, script("ppo"), ("--total-timesteps", "256", "--num-steps", "64"), "CartPole-v1", 3)
    run = dataclasses.replace(run, summarize=lambda run_dir: summarize_run(run_dir, result, seed=3))
    assert run_queue([run], 1, one_thread_env() | {"WANDB_MODE": "offline"}, tmp_path / "logs") == 0
    assert json.loads(result.read_text())["episodic_returns"]  # summarised from the real script's events
    assert list((run.workdir / "runs").glob("CartPole-v1__ppo__3__*"))  # the runner added the env and seed
    assert "global_step=" in (tmp_path / "logs" / "ppo.log").read_text()  # the run's output is kept in its log


def test_random_policy_scores_whole_games_not_lives():
    from benchmark import atari_vs_sb3 as bench

    # Breakout has 5 lives; the training wrappers end an episode at each, but a random game's score is the
    # whole game's: every game recorded spans all 5 lives, and its score is a sum of whole points
    games = bench.random_policy_games("BreakoutNoFrameskip-v4", 2)
    assert [lives for _, lives in games] == [5, 5]
    assert all(score >= 0 and score == int(score) for score, _ in games)


def test_continuous_report_compares_with_sb3_and_uses_the_quiet_speeds(tmp_path):
    from benchmark import continuous_vs_sb3 as bench

    for seed, ours, sb3 in ((1, -150.0, -170.0), (2, -170.0, -190.0), (3, -160.0, -180.0)):
        write_result(tmp_path / f"ours__sac_continuous_action__Pendulum-v1__20000__{seed}.json", [-1000.0] + [ours] * 10, 50)
        write_result(tmp_path / f"sb3__sac__Pendulum-v1__20000__{seed}.json", [sb3] * 10, 40)
    write_result(tmp_path / "speed__ours__sac_continuous_action__Pendulum-v1__4000__1.json", [], sps=120.0)
    write_result(tmp_path / "speed__sb3__sac__Pendulum-v1__4000__1.json", [], sps=100.0)
    row = next(line for line in bench.report(tmp_path).splitlines() if line.startswith("| sac_continuous_action"))
    assert row == (
        "| sac_continuous_action | Pendulum-v1 | 20k | -160.0 ± 8.2 (3 seeds) | -180.0 ± 8.2 (3 seeds) | yes | 120 | 100 | 1.20× |"
    )


def write_episode_lengths(run_dir, lengths_by_player):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir))
    for player, points in enumerate(lengths_by_player):
        for step, length in points:
            writer.add_scalar(f"charts/episodic_length-player{player}", length, step)
    writer.add_scalar("charts/SPS", 100, 1000)
    writer.close()


def test_selfplay_report_bins_both_players_episodes_by_step(tmp_path):
    from benchmark import pettingzoo_pong_selfplay as bench

    # player 0 and 1 end games at the same steps; lengths grow from 200 to 800 over a 1000-step run
    points = [(100, 200), (400, 300), (600, 500), (1000, 800)]
    write_episode_lengths(tmp_path, [points, [(step, length + 20) for step, length in points]])
    table = bench.report(tmp_path, bins=2)
    assert "| 0–500 | 4 | 260 |" in table  # (200 + 300 + 220 + 320) / 4
    assert "| 500–1,000 | 4 | 660 |" in table  # (500 + 800 + 520 + 820) / 4
    assert table.endswith("start 260 → end 660 agent steps per game (2.54×)")


def test_selfplay_report_leaves_out_ranges_without_games(tmp_path):
    from benchmark import pettingzoo_pong_selfplay as bench

    curve = bench.length_curve([(900, 50.0), (950, 70.0)], total_steps=1000, bins=4)
    assert curve == [(750, 1000, 2, 60.0)]


def test_trxl_benchmark_runs_with_and_without_memory(tmp_path):
    command = [sys.executable, str(REPO / "benchmark" / "trxl_proof_of_memory.py"), "--seeds", "1"]
    command += ["--total-timesteps", "2048", "--out", str(tmp_path)]
    proc = subprocess.run(
        command, cwd=tmp_path, env=script_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(r"^\| (16|1) \| 1 \| (-?[\d.]+) \| (\d+) \|$", proc.stdout, re.M)
    assert [memory for memory, _, _ in rows] == ["16", "1"]
    # an episode of ProofofMemory-v0 returns 1.0 at best (the cued end, shortest way) and -1.6 at worst
    assert all(-1.6 <= float(mean) <= 1.0 for _, mean, _ in rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory1", "memory16"]


def test_jax_speed_leaves_the_compiling_interval_out():
    from benchmark import benchlib as bench

    # logs every 100 steps at 0.1 s each (1000 steps/s), but the interval holding the first update
    # (step 1000, logged at step 1100) took 3.1 s: 3 s of compilation
    times, t = [], 0.0
    for step in range(100, 2001, 100):
        t += 3.1 if step == 1100 else 0.1
        times.append((step, t))
    rate, extra = bench.steady_rate(times, first_update=1000)
    assert abs(rate - 1000) < 1e-6 and abs(extra - 3.0) < 1e-6


def test_jax_report_checks_every_seed_window(tmp_path):
    import json

    from benchmark import jax_vs_torch as bench

    good = [[step, 500.0] for step in range(1000, 500_001, 1000)]
    for seed in (1, 2):
        (tmp_path / f"learn__dqn_jax__{seed}.json").write_text(json.dumps({"episodic_returns": good}))
    # seed 3 never holds 475 over 50k steps: 470 throughout
    (tmp_path / "learn__dqn_jax__3.json").write_text(json.dumps({"episodic_returns": [[s, 470.0] for s, _ in good]}))
    for script, sps, extra in (("dqn_jax", 3000.0, 2.5), ("dqn", 2000.0, 0.2)):
        (tmp_path / f"speed__{script}__1.json").write_text(json.dumps({"sps": sps, "first_update_extra_s": extra}))
    table = bench.report(tmp_path)
    assert "| dqn_jax | dqn | CartPole-v1 | 30k | 3000 | 2000 | 1.50× | 2.5 | 0.2 |" in table
    assert "| dqn_jax | 3 | 500.0, 500.0, 470.0 | **no** | 490.00 ± 14.14 | 498.38 ± 2.29 |" in table
    assert "c51_jax" not in table and "td3" not in table


def test_same_scalars_tells_identical_runs_from_different_ones(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    from benchmark.same_scalars import main

    for name, loss in (("a", 0.5), ("b", 0.5), ("c", 0.25)):
        with SummaryWriter(tmp_path / name) as writer:
            writer.add_scalar("charts/episodic_return", 10.0, 4)
            writer.add_scalar("losses/td_loss", loss, 4)
            writer.add_scalar("charts/SPS", {"a": 100, "b": 200, "c": 100}[name], 4)  # wall clock: ignored
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert main([str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    assert "losses/td_loss" in capsys.readouterr().out
    assert main([str(tmp_path / "a"), str(tmp_path / "nothing")]) == 2


def test_algorithm_files_keep_the_length_rule():
    """The contract's length rule: median ratio to the original file at most 1.00, none above 1.25, no packing."""
    from benchmark.script_lengths import problems, ratios

    found = ratios()
    assert len(found) == 35  # every original variant has its file here
    assert problems(found) == []
