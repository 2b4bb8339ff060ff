"""The benchmark scripts run end to end (with few steps) and print what the docs quote."""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, script_env


@pytest.mark.extended  # 20 s of one core: CI runs it after the quick run
def test_classic_control_script_runs_through_runner_and_reports_each(tmp_path):
    # what benchmark/ppo.sh did: one algorithm on one env, each seed, then each run's own line and curve table
    env = script_env(
        ALGOS="ppo", ENV_IDS="CartPole-v1", NUM_SEEDS="2", WORKERS="2", EXTRA="--total-timesteps 1024",
        CURVE_TABLE_STEPS="512", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
    )  # fmt: skip
    command = ["bash", str(REPO / "benchmark" / "checks" / "classic_control.sh"), str(tmp_path / "out")]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.strip() in proc.stdout  # printed and written
    assert re.search(r"^\| CartPole-v1 \| [\d.]+ ± [\d.]+ \|$", report.split("## Results", 1)[1], re.M)
    per_run = report.split("## Per run", 1)[1].split("\n## ", 1)[0]
    assert (
        len(re.findall(r"^\| CartPole-v1__ppo__[12]__\d+ \| \d+ \| [\d.]+ \| [\d.]+ \(\d+\) \| \d+ \|$", per_run, re.M)) == 2
    )
    curve = report.split("## Learning curve by steps", 1)[1]
    assert re.search(r"^\| 512 \| [\d.]+ \| [\d.]+ \|$", curve, re.M) and (tmp_path / "out" / "plots").is_dir()


def write_result(path, returns, sps=100.0):
    import json

    path.write_text(json.dumps({"sps": sps, "episodic_returns": returns}))


def test_atari_report_applies_the_bars_of_each_check(tmp_path):
    from benchmark.compare import atari_vs_sb3 as bench

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
    from benchmark.compare import atari_vs_sb3 as bench

    write_result(tmp_path / "random__BreakoutNoFrameskip-v4.json", [1.0])
    write_result(tmp_path / "ours__ppo_atari__BreakoutNoFrameskip-v4__300000__1.json", [7.0] * 20)
    write_result(tmp_path / "sb3__ppo_atari__BreakoutNoFrameskip-v4__300000__1.json", [10.0] * 20)
    assert "| 7.0× | **no** |" in bench.report(tmp_path)  # 7 >= 3 x random, but below 0.8 x 10


def test_atari_report_holds_multigpu_to_ppo_atari_within_noise(tmp_path):
    from benchmark.compare import atari_vs_sb3 as bench

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


def test_atari_runs_pair_ours_with_sb3_and_checkpoint_the_long_one(tmp_path):
    from benchmark.compare import atari_vs_sb3 as bench

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


def test_queue_runs_what_is_not_done_and_resumes_checkpointed_runs(tmp_path):
    from benchmark.harness import QueuedRun, one_thread_env, run_queue

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
    (fresh.workdir / "runs" / "partial").mkdir(parents=True)  # a stopped attempt of a run without checkpoints

    logs = tmp_path / "out" / "logs"
    assert run_queue([done, fresh, stopped, failing], 2, one_thread_env(), logs) == 1  # one run failed
    assert not done.workdir.exists()  # done before: not run again
    assert (fresh.workdir / "argv.txt").read_text() == "--a --env-id Env-v0 --seed 7"  # in its own folder
    # started over: the stopped attempt's logs are gone, so nothing reads them as one more seed
    # (two runs go at once, so they may finish, and be summarised, in either order)
    assert fresh.result.exists() and fresh.workdir / "runs" / "run0" in summarized
    assert sorted(p.name for p in (fresh.workdir / "runs").iterdir()) == ["run0"]
    # a run with checkpoints goes on from its newest one, with the arguments it was started with
    assert (stopped.workdir / "argv.txt").read_text() == "--resume runs/Env-v0__x__7__1 --env-id Env-v0 --seed 7"
    assert not failing.result.exists() and len(summarized) == 2
    assert "trained" in (logs / "fresh.log").read_text() and (logs / "bad.log").exists()


def test_a_truncated_summary_is_not_done_and_its_run_runs_again(tmp_path, capsys):
    """A summary cut short (a writer killed mid-write) must not count as a finished run."""
    from benchmark.harness import QueuedRun, one_thread_env, run_queue

    program = tmp_path / "train.py"
    program.write_text(FAKE_TRAINING)
    result = tmp_path / "out" / "cut.json"
    result.parent.mkdir()
    result.write_text('{"sps": 1200.0, "episodic_retu')  # what a killed json.dump leaves
    summarize = lambda run_dir: result.write_text(json.dumps({"sps": 1.0, "episodic_returns": [2.0]}))  # noqa: E731
    run = QueuedRun(result, (str(program),), (), "Env-v0", 3, summarize=summarize)
    assert run_queue([run], 1, one_thread_env(), tmp_path / "out" / "logs") == 0
    assert (run.workdir / "argv.txt").read_text() == "--env-id Env-v0 --seed 3", "the run ran again"
    assert json.loads(result.read_text()) == {"sps": 1.0, "episodic_returns": [2.0]}
    assert f"redoing cut: its summary {result} is not a whole JSON file" in capsys.readouterr().out


def test_summarizing_a_run_that_logged_no_episodes_is_a_clear_error(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from benchmark.harness import summarize_run

    run_dir = tmp_path / "runs" / "Env-v0__x__1__1"
    with SummaryWriter(run_dir) as writer:
        writer.add_scalar("charts/SPS", 900.0, 128)  # the run ended before any episode did
    with pytest.raises(ValueError, match=r"logged no charts/episodic_return \(logged: charts/SPS\)"):
        summarize_run(run_dir, tmp_path / "result.json")
    assert not (tmp_path / "result.json").exists()


@pytest.mark.extended  # 5 s of one core: CI runs it after the quick run
def test_benchmark_runs_go_through_the_runner(tmp_path):
    from benchmark.harness import QueuedRun, one_thread_env, run_queue, script, summarize_run

    result = tmp_path / "ppo.json"
    run = QueuedRun(result, script("ppo"), ("--total-timesteps", "256", "--num-steps", "64"), "CartPole-v1", 3)
    run = dataclasses.replace(run, summarize=lambda run_dir: summarize_run(run_dir, result, seed=3))
    assert run_queue([run], 1, one_thread_env() | {"WANDB_MODE": "offline"}, tmp_path / "logs") == 0
    assert json.loads(result.read_text())["episodic_returns"]  # summarised from the real script's events
    assert list((run.workdir / "runs").glob("CartPole-v1__ppo__3__*"))  # the runner added the env and seed
    assert "global_step=" in (tmp_path / "logs" / "ppo.log").read_text()  # the run's output is kept in its log


def test_random_policy_scores_whole_games_not_lives():
    from benchmark.compare import atari_vs_sb3 as bench

    # Breakout has 5 lives; the training wrappers end an episode at each, but a random game's score is the
    # whole game's: every game recorded spans all 5 lives, and its score is a sum of whole points
    games = bench.random_policy_games("BreakoutNoFrameskip-v4", 2)
    assert [lives for _, lives in games] == [5, 5]
    assert all(score >= 0 and score == int(score) for score, _ in games)


def test_continuous_report_compares_with_sb3_and_uses_the_quiet_speeds(tmp_path):
    from benchmark.compare import continuous_vs_sb3 as bench

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
    from benchmark.checks import pettingzoo_pong_selfplay as bench

    # player 0 and 1 end games at the same steps; lengths grow from 200 to 800 over a 1000-step run
    points = [(100, 200), (400, 300), (600, 500), (1000, 800)]
    write_episode_lengths(tmp_path, [points, [(step, length + 20) for step, length in points]])
    table = bench.lengths_report(tmp_path, bins=2)
    assert "| 0–500 | 4 | 260 |" in table  # (200 + 300 + 220 + 320) / 4
    assert "| 500–1,000 | 4 | 660 |" in table  # (500 + 800 + 520 + 820) / 4
    assert table.endswith("start 260 → end 660 agent steps per game (2.54×)")


def test_selfplay_report_leaves_out_ranges_without_games(tmp_path):
    from benchmark.checks import pettingzoo_pong_selfplay as bench

    curve = bench.length_curve([(900, 50.0), (950, 70.0)], total_steps=1000, bins=4)
    assert curve == [(750, 1000, 2, 60.0)]


@pytest.mark.extended  # 17 s of one core: CI runs it after the quick run
def test_trxl_benchmark_runs_with_and_without_memory_through_the_runner(tmp_path, monkeypatch):
    from benchmark.checks import trxl_memory as bench
    from benchmark.harness import one_thread_env, run_queue

    proof = dataclasses.replace(bench.CHECKS[0], total_timesteps=2048, seeds=(1,))
    monkeypatch.setattr(bench, "CHECKS", [proof, *bench.CHECKS[1:]])
    runs = bench.learning_runs(tmp_path, ["ProofofMemory-v0"])
    assert [run.args[run.args.index("--trxl-memory-length") + 1] for run in runs] == ["16", "1"]
    assert run_queue(runs, 1, one_thread_env(), tmp_path / "logs") == 0
    table = bench.report(tmp_path)
    rows = re.findall(
        r"^\| ProofofMemory-v0 \| 2k \| (16|1) \| 1 \| (-?[\d.]+) \| ([\d.]+) \((\d+) episodes\) \| \d+ \|$", table, re.M
    )
    assert [memory for memory, *_ in rows] == ["16", "1"]
    # an episode of ProofofMemory-v0 returns 1.0 at best (the cued end, shortest way) and -1.6 at worst
    assert all(-1.6 <= float(mean) <= 1.0 and 0.0 <= float(rate) <= 1.0 and int(n) > 0 for _, mean, rate, n in rows)
    assert "ProofofMemory-v0, 2k steps: " in table  # both arms of every seed ran: a verdict
    assert "MiniGrid" not in table  # not run: no row


def test_trxl_minigrid_runs_are_queued_with_checkpoints(tmp_path):
    from benchmark.checks import trxl_memory as bench
    from benchmark.harness import resumable_args

    runs = bench.learning_runs(tmp_path, ["MiniGrid-MemoryS9-v0"])
    assert [run.checkpoint_every for run in runs] == [4] * 4  # the published 2,048,000 steps, seeds 1 and 2
    assert [(run.result.name.split("__")[2:4], run.seed) for run in runs] == [
        (["memory64", "2048000"], 1),
        (["memory1", "2048000"], 1),
        (["memory64", "2048000"], 2),
        (["memory1", "2048000"], 2),
    ]
    assert all("--trxl-attend-self" not in run.args for run in runs)  # the original's window, the default
    assert [run.checkpoint_every for run in bench.learning_runs(tmp_path, ["ProofofMemory-v0"])] == [0] * 6
    # a fresh run is started with checkpoints on; one stopped after a checkpoint is resumed from it
    assert resumable_args(runs[0].workdir, list(runs[0].args), 4)[-2:] == ["--checkpoint-frequency", "4"]
    stopped = runs[0].workdir / "runs" / "MiniGrid-MemoryS9-v0__ppo_trxl__1__1" / "checkpoints"
    stopped.mkdir(parents=True)
    (stopped / "checkpoint_16384.pt").write_bytes(b"")
    assert resumable_args(runs[0].workdir, list(runs[0].args), 4) == [
        "--resume",
        "runs/MiniGrid-MemoryS9-v0__ppo_trxl__1__1",
    ]


def test_trxl_variant_is_queued_only_by_its_own_name_with_its_own_files(tmp_path):
    from benchmark.checks import trxl_memory as bench

    published = bench.learning_runs(tmp_path, ["MiniGrid-MemoryS9-v0"])
    assert all("--init-ent-coef" not in run.args for run in published)  # the published runs keep their default
    runs = bench.learning_runs(tmp_path, ["MiniGrid-MemoryS9-v0+self+ent0.01"])
    assert [run.result.name for run in runs] == [
        "ppo_trxl__MiniGrid-MemoryS9-v0+self+ent0.01__memory64__500000__1.json",
        "ppo_trxl__MiniGrid-MemoryS9-v0+self+ent0.01__memory1__500000__1.json",
    ]
    assert all(run.args[run.args.index("--init-ent-coef") + 1] == "0.01" and "--trxl-attend-self" in run.args for run in runs)
    assert {run.env_id for run in runs} == {"MiniGrid-MemoryS9-v0"}  # the env the runner passes to the script
    assert not {run.workdir for run in runs} & {run.workdir for run in published}  # no shared checkpoints


def test_trxl_cue_episodes_split_by_whether_the_agent_saw_the_cue():
    from benchmark.checks import trxl_memory as bench
    from cleanrl.ppo_trxl.ppo_trxl import make_env

    env = make_env("MiniGrid-MemoryS7-v0", 0, False, "")()
    starts = [(env.reset(seed=seed), env.unwrapped.agent_pos[0])[1] for seed in range(24)]  # cue_episodes' resets
    # walking straight east never turns back to the cue (west of every start) and never steps beside an object
    played = bench.cue_episodes(env, lambda obs, episode_start: 2, episodes=24, seed=0)
    assert [e.seen_at_start for e in played] == [x == 1 for x in starts]  # in view only from the room's first column
    assert 0 < sum(starts_in_first_column := [e.seen_at_start for e in played]) < 24
    assert [e.seen for e in played] == starts_in_first_column
    assert not any(e.success for e in played)  # cut at the 96-step limit
    # turning left on the spot from the room's first two columns brings the cue into view, later than the first step
    turned = bench.cue_episodes(env, lambda obs, episode_start: 0, episodes=24, seed=0)
    assert any(e.seen and not e.seen_at_start for e in turned)


def test_trxl_cue_report_rates_per_group():
    from benchmark.checks.trxl_memory import CueEpisode, cue_report

    played = [CueEpisode(True, True, True)] * 3 + [CueEpisode(True, True, False)] + [CueEpisode(False, False, True)] * 2
    table = cue_report(played + [CueEpisode(False, False, False)] * 2)
    assert "| cue in view at the first step | 4 | 0.75 |" in table
    assert "| cue seen later in the episode | 0 | – |" in table  # no such episode: no rate
    assert "| cue never seen | 4 | 0.50 |" in table
    assert "| all | 8 | 0.62 |" in table


def test_trxl_cue_plays_a_checkpoint_and_refuses_other_envs(tmp_path, monkeypatch, capsys):
    import torch

    from benchmark.checks import trxl_memory as bench
    from cleanrl.ppo_trxl.ppo_trxl import Agent, Args, make_env
    from cleanrl_utils.runtime import plain_data

    def saved(env_id: str, weights_key: str = "agent") -> Path:
        args = Args(env_id=env_id, trxl_dim=16, trxl_num_layers=1, trxl_num_heads=1, trxl_memory_length=8)
        env = make_env(env_id, 0, False, "")()
        torch.manual_seed(0)  # the same weights in both files
        agent = Agent(args, env.observation_space, env.action_space, env.spec.max_episode_steps)
        path = tmp_path / f"{env_id}.{weights_key}"
        # "agent": a run's checkpoint (plain data); "model_weights": a --save-model file (torch.save)
        saved = {"args": dataclasses.asdict(args), weights_key: agent.state_dict()}
        path.write_bytes(plain_data.dumps(saved)) if weights_key == "agent" else torch.save(saved, path)
        return path

    tables = []
    for path in (saved("MiniGrid-MemoryS7-v0"), saved("MiniGrid-MemoryS7-v0", "model_weights")):
        monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(path), "--episodes", "6"])
        bench.main()
        tables.append(capsys.readouterr().out)
        assert "| all | 6 |" in tables[-1]
    assert tables[0] == tables[1]  # the same weights and seed: the same sampled actions, the same table
    (not_a_checkpoint := tmp_path / "notes.txt").write_text("not a checkpoint")
    for path, expected in (
        (saved("ProofofMemory-v0"), "is a run of ProofofMemory-v0, not of a MiniGrid Memory env"),
        (not_a_checkpoint, "notes.txt is not a ppo_trxl.py checkpoint or model file"),
    ):
        monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(path)])
        with pytest.raises(SystemExit) as stopped:
            bench.main()
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and len(err.splitlines()) == 1 and expected in err, err
    monkeypatch.setattr(sys, "argv", ["trxl_memory.py", "cue", str(tmp_path / "missing.pt")])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2 and "cue needs a run's checkpoint or model file" in capsys.readouterr().err


def test_trxl_report_needs_success_with_memory_and_a_gap_without(tmp_path):
    from benchmark.checks import trxl_memory as bench

    (check,) = [check for check in bench.CHECKS if check.name == "MiniGrid-MemoryS9-v0+self"]
    for memory_length, returns in ((check.memory_length, [0.0] * 5 + [0.8] * 95), (1, [0.0] * 40 + [0.8] * 60)):
        result = check.result(tmp_path, memory_length, 1)
        result.write_text(json.dumps({"episodic_returns": [0.0] * 50 + returns, "sps": 100}))
    table = bench.report(tmp_path)
    assert f"| MiniGrid-MemoryS9-v0+self | 500k | {check.memory_length} | 1 | 0.76 | 0.95 (100 episodes) | 100 |" in table
    assert "MiniGrid-MemoryS9-v0+self, 500k steps: passes" in table
    assert "2048k" not in table  # the 2M runs not run: no row, no verdict
    check.result(tmp_path, 1, 1).write_text(json.dumps({"episodic_returns": [0.0] * 15 + [0.8] * 85, "sps": 100}))
    assert (
        "MiniGrid-MemoryS9-v0+self, 500k steps: **fails** (with memory every seed ≥ 0.9: yes; "
        "without memory at least 0.15 below: no)" in bench.report(tmp_path)
    )


def test_jax_speed_leaves_the_compiling_interval_out():
    from benchmark import harness as bench

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

    from benchmark.compare import jax_vs_torch as bench

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


def test_results_file_opens_with_commit_date_and_command(tmp_path, monkeypatch):
    """What benchmark/results/ files open with (tests/contract/test_layout.py checks every committed one has it)."""
    from benchmark.checks import playground_cartpole as bench

    monkeypatch.setattr(bench, "report", lambda out, total: "| table |")
    results = tmp_path / "a b.md"
    argv = [str(REPO / "benchmark" / "checks" / "playground_cartpole.py"), "report", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [*argv, "--results", str(results)])
    bench.main()
    title, blank_after_title, first, blank, table = results.read_text().splitlines()
    assert (title, blank_after_title) == (f"# {bench.TITLE}", "")
    command = f"python -m benchmark.checks.playground_cartpole report --out {tmp_path} --results '{results}'"
    assert re.fullmatch(
        rf"Measured at commit [0-9a-f]{{7,40}}(-dirty)? on \d{{4}}-\d{{2}}-\d{{2}} with `{re.escape(command)}`\.", first
    )
    assert (blank, table) == ("", "| table |")


def test_same_scalars_tells_identical_runs_from_different_ones(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    from benchmark.guards.same_scalars import main

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
    from benchmark.guards.script_lengths import problems, ratios

    found = ratios()
    assert len(found) == 35  # every original variant has its file here
    assert problems(found) == []


# a stand-in for the training scripts in the QDagger benchmark: `name` comes first (the benchmark's
# script name), then the arguments; it notes its order of start, and a teacher saves a model file
FAKE_QDAGGER_RUN = """
import sys
from pathlib import Path
name, args = sys.argv[1], sys.argv[2:]
Path("argv.txt").write_text(" ".join(args))
with open(Path(__file__).parent / "order.txt", "a") as order:
    order.write(Path.cwd().name + "\\n")
run = Path("runs") / "run"
run.mkdir(parents=True, exist_ok=True)
(run / "events.out.tfevents.0").write_text("")
if ("--save-model" in args or "--resume" in args) and not name.startswith("qdagger"):  # a resumed run keeps its flags
    (run / f"{name}.cleanrl_model").write_text("weights")
"""


def fake_qdagger_benchmark(tmp_path, monkeypatch):
    """The benchmark module with the stand-in program for every script, summaries holding only the run's identity, and
    a stand-in conversion of the teacher to Flax's format (which notes the model it converted)."""
    from benchmark.checks import qdagger_reincarnation as bench

    program = tmp_path / "fake.py"
    program.write_text(FAKE_QDAGGER_RUN)
    monkeypatch.setattr(bench, "script", lambda name: (str(program), name))
    monkeypatch.setattr(bench, "summarize", lambda run_dir, result, **identity: result.write_text(json.dumps(identity)))
    monkeypatch.setattr(bench, "torch_teacher_as_flax", lambda model, out: out.write_text(str(model)) and out)
    return bench


def test_qdagger_benchmark_runs_teacher_then_students_then_scratch(tmp_path, monkeypatch):
    from benchmark.harness import one_thread_env

    bench = fake_qdagger_benchmark(tmp_path, monkeypatch)
    out = tmp_path / "out"
    # the teacher stopped at its checkpoint of 25k steps
    teacher = bench.teacher_run(out, bench.PAIRS[0])
    checkpoints = teacher.workdir / "runs" / "BreakoutNoFrameskip-v4__dqn_atari__1__9" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "checkpoint_25000.pt").write_bytes(b"")

    assert bench.run(out, 1, None, one_thread_env()) == 0  # one at a time: the order they start in is the queue's
    started = (tmp_path / "order.txt").read_text().split()
    # one teacher for both students; the students seed by seed, the two files side by side; the scratch runs
    torch_student, jax_student = (f"student__{name}__BreakoutNoFrameskip-v4__10000+20000" for name in bench.TWINS[::-1])
    # the JAX student and its scratch runs on seeds 101-106, so that the twins share no seed's luck
    assert started == (
        ["teacher__dqn_atari__BreakoutNoFrameskip-v4__200000__1"]
        + [name for seed in range(1, 7) for name in (f"{torch_student}__{seed}", f"{jax_student}__{seed + 100}")]
        + [f"scratch__dqn_atari__BreakoutNoFrameskip-v4__20000__{seed}" for seed in (*range(1, 7), *range(101, 107))]
    )
    argv = {name: (out / name / "argv.txt").read_text() for name in started}
    # the teacher goes on from its checkpoint
    assert argv["teacher__dqn_atari__BreakoutNoFrameskip-v4__200000__1"] == (
        "--resume runs/BreakoutNoFrameskip-v4__dqn_atari__1__9 --env-id BreakoutNoFrameskip-v4 --seed 1"
    )
    # the PyTorch student reads the teacher's model file, the JAX one its conversion, written once beside it
    model = (out / "teacher__dqn_atari__BreakoutNoFrameskip-v4__200000__1" / "runs" / "run").resolve()
    for student, teacher_file in (
        (torch_student, "dqn_atari.cleanrl_model"),
        (jax_student, "dqn_atari_as_flax.cleanrl_model"),
    ):
        for seed in range(1, 7) if student == torch_student else range(101, 107):
            args = argv[f"{student}__{seed}"].split()
            assert args[args.index("--teacher-model-path") + 1] == str(model / teacher_file)
            assert args[-2:] == ["--seed", str(seed)]
            assert args[args.index("--total-timesteps") + 1] == "20000" and args[args.index("--offline-steps") + 1] == "10000"
            assert "--offline-eval-frequency 2500" in argv[f"{student}__{seed}"]
            assert "--checkpoint-frequency 1000" in argv[f"{student}__{seed}"]
    assert (model / "dqn_atari_as_flax.cleanrl_model").read_text() == str(model / "dqn_atari.cleanrl_model")
    # both students share every flag but the teacher's file
    torch_args, jax_args = argv[f"{torch_student}__3"].split(), argv[f"{jax_student}__103"].split()
    position = torch_args.index("--teacher-model-path") + 1
    assert torch_args[:position] + torch_args[position + 1 : -1] == jax_args[:position] + jax_args[position + 1 : -1]
    # the scratch run: the student's online steps and flags, none of the teacher's
    scratch = argv["scratch__dqn_atari__BreakoutNoFrameskip-v4__20000__2"]
    assert scratch == (
        "--total-timesteps 20000 --learning-starts 2000 --exploration-fraction 0.3 --buffer-size 50000"
        " --env-id BreakoutNoFrameskip-v4 --seed 2"
    )

    # started again when all is done: nothing runs
    assert bench.run(out, 2, None, one_thread_env()) == 0
    assert (tmp_path / "order.txt").read_text().split() == started


def test_qdagger_benchmark_students_wait_for_their_teachers_model(tmp_path, monkeypatch):
    bench = fake_qdagger_benchmark(tmp_path, monkeypatch)
    queues = []

    def run_queue(runs, workers, env, log_dir):  # the teacher fails
        queues.append([run.result.name.split("__")[:2] for run in runs if not run.result.exists()])
        return 1 if runs and runs[0].result.name.startswith("teacher") else 0

    monkeypatch.setattr(bench, "run_queue", run_queue)
    out = tmp_path / "out"
    assert bench.run(out, 2, None, {}) == 1  # a stage failed
    assert queues == [[["teacher", "dqn_atari"]], [], [["scratch", "dqn_atari"]] * 12]  # no student without its teacher
    # a summary whose run folder is gone (copied from another --out) teaches no student
    bench.teacher_run(out, bench.PAIRS[0]).result.write_text("{}")
    assert bench.teacher_model(out, bench.PAIRS[0]) is None

    # stopped by a signal in the teacher's stage: no later stage starts
    queues.clear()
    monkeypatch.setattr(bench, "run_queue", lambda runs, *_: queues.append(runs) or 130)
    assert bench.run(out, 2, ["dqn_atari"], {}) == 130 and len(queues) == 1


def write_qdagger_result(path, returns, eval_returns=(), offline_returns=()):
    path.write_text(
        json.dumps(
            {
                "sps": 50.0,
                "episodic_returns": returns,
                "eval_returns": list(eval_returns),
                "offline_returns": list(offline_returns),
            }
        )
    )


GAME = "BreakoutNoFrameskip-v4"


def student_file(tmp_path, name, seed):
    return tmp_path / f"student__{name}__{GAME}__10000+20000__{seed}.json"


def test_qdagger_report_applies_both_bars(tmp_path):
    from benchmark.checks import qdagger_reincarnation as bench

    write_qdagger_result(tmp_path / f"teacher__dqn_atari__{GAME}__200000__1.json", [0.0] * 50 + [12.0] * 20, [20.0] * 10)
    # seeds 1 and 2: students at 9 and 11 (mean 10 = 0.5 x 20), scratch runs at 2 and 4; only the last 20 games count
    for seed, student, scratch in ((1, 9.0, 2.0), (2, 11.0, 4.0)):
        write_qdagger_result(
            student_file(tmp_path, "qdagger_dqn_atari_impalacnn", seed),
            [0.0] * 30 + [student] * 20,
            [student + 1] * 10,
            [4.0, 6.0, 8.0, 10.0],
        )
        write_qdagger_result(tmp_path / f"scratch__dqn_atari__{GAME}__20000__{seed}.json", [50.0] * 5 + [scratch] * 20)
    table = bench.report(tmp_path)
    row = (
        "| qdagger_dqn_atari_impalacnn ← dqn_atari | BreakoutNoFrameskip-v4 | 200k | 50k + 10k + 20k | 1, 2 | 20.0 (12.0) "
        "| 2.5k: 4.0 → 5k: 6.0 → 7.5k: 8.0 → 10k: 10.0 | 10.0 ± 1.0 (11.0 ± 1.0) | 3.0 ± 1.0 | 0.50× | yes | yes "
        "| `python -m benchmark.checks.qdagger_reincarnation run --only qdagger_dqn_atari_impalacnn` |"
    )
    assert row in table.splitlines()
    assert "qdagger_dqn_atari_jax_impalacnn ←" not in table  # not run: no row rather than a made-up one
    assert table.endswith("The twins: a student of each has not finished yet.")

    # a student below half the teacher, though above scratch; then one that trails scratch
    write_qdagger_result(student_file(tmp_path, "qdagger_dqn_atari_impalacnn", 2), [10.2] * 20)  # mean 9.6
    assert "| 0.48× | **no** | yes |" in bench.report(tmp_path)
    write_qdagger_result(tmp_path / f"scratch__dqn_atari__{GAME}__20000__1.json", [20.0] * 20)
    assert "| 12.0 ± 8.0 | 0.48× | **no** | **no** |" in bench.report(tmp_path)
    # a seed whose scratch run is missing is left out of the means
    (tmp_path / f"scratch__dqn_atari__{GAME}__20000__2.json").unlink()
    assert (
        "| 1 | 20.0 (12.0) | 2.5k: 4.0 → 5k: 6.0 → 7.5k: 8.0 → 10k: 10.0 | 9.0 ± 0.0 (10.0 ± 0.0) | 20.0 ± 0.0 | 0.45× |"
        in (bench.report(tmp_path))
    )


def test_qdagger_report_compares_the_twins_with_the_rlops_test(tmp_path):
    from benchmark.checks import qdagger_reincarnation as bench
    from cleanrl_utils import rlstats

    write_qdagger_result(tmp_path / f"teacher__dqn_atari__{GAME}__200000__1.json", [12.0] * 20, [20.0] * 10)
    jax_scores, torch_scores = [8.0, 9.0, 10.0, 11.0, 12.0, 13.0], [14.0, 15.0, 16.0, 17.0, 18.0, 19.0]

    def finish(k):  # the k-th seed of each twin: 100 + k for JAX, k for PyTorch
        write_qdagger_result(student_file(tmp_path, bench.TWINS[0], 100 + k), [jax_scores[k - 1]] * 20)
        write_qdagger_result(student_file(tmp_path, bench.TWINS[1], k), [torch_scores[k - 1]] * 20)

    for k in range(1, 5):  # four seeds of each: not enough to decide
        finish(k)
    line = bench.report(tmp_path).splitlines()[-1]
    assert line.startswith("The twins, student / teacher: JAX 0.48 on seeds 101, 102, 103, 104 (0.40, 0.45, 0.50, 0.55)")
    assert "PyTorch 0.78 on seeds 1, 2, 3, 4" in line and "P(JAX > PyTorch) = 0.00" in line
    assert line.endswith("not decided (4 of 6 JAX and 4 of 6 PyTorch seeds).")
    for k in (5, 6):  # six a side, every JAX seed below every PyTorch one, no seed shared: the test decides
        finish(k)
    line = bench.report(tmp_path).splitlines()[-1]
    assert f"p = {rlstats.smallest_p(6, 6):.3g}" in line and rlstats.smallest_p(6, 6) <= bench.ALPHA
    assert line.endswith(": **they differ**.")
    # had the twins run on the same seed numbers, their luck could be shared: 3 pairs of seeds, p >= 0.25
    assert rlstats.smallest_p(6, 6, 6) == 0.25 > bench.ALPHA


def test_qdagger_summary_keeps_the_evaluation_and_offline_scores(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from benchmark.checks import qdagger_reincarnation as bench

    with SummaryWriter(tmp_path / "run") as writer:
        writer.add_scalar("charts/offline/avg_episodic_return", 7.5, 40000)
        for step, score in ((40100, 3.0), (40500, 8.0)):
            writer.add_scalar("charts/episodic_return", score, step)
        writer.add_scalar("charts/SPS", 60, 40500)
        for game, score in enumerate((10.0, 12.0)):
            writer.add_scalar("eval/episodic_return", score, game)
    bench.summarize(tmp_path / "run", tmp_path / "result.json", role="student", seed=1)
    summary = json.loads((tmp_path / "result.json").read_text())
    assert summary["episodic_returns"] == [3.0, 8.0] and summary["eval_returns"] == [10.0, 12.0]
    assert summary["offline_returns"] == [7.5] and (summary["role"], summary["seed"], summary["sps"]) == ("student", 1, 60)


def test_qdagger_students_explore_over_half_the_scratch_runs_schedule():
    from benchmark.checks import qdagger_reincarnation as bench
    from cleanrl.qdagger_dqn_atari_impalacnn import linear_schedule

    def schedule(args, total):
        fraction = float(args[args.index("--exploration-fraction") + 1])
        return lambda step: linear_schedule(1.0, 0.01, fraction * total, step)

    for pair in bench.PAIRS:
        budget = pair.budget
        scratch, student = schedule(budget.shared_args, budget.online), schedule(budget.student_args, budget.online)
        learning_starts = int(budget.shared_args[budget.shared_args.index("--learning-starts") + 1])
        # scratch explores from 1 down to 0.01 over its exploration steps
        assert scratch(0) == 1.0 and abs(scratch(budget.exploration_steps) - 0.01) < 1e-6
        # the student's online steps continue its offline count: it learns at once, and reaches 0.01 halfway
        assert learning_starts < budget.offline
        assert abs(student(budget.offline + budget.exploration_steps // 2) - 0.01) < 1e-3
        if budget.explore is None:  # by default the student starts at 0.505, as with the published defaults
            assert (
                abs(student(budget.offline) - 0.505) < 1e-9
                and budget.student_args[: len(budget.shared_args)] == budget.shared_args
            )


def test_qdagger_runs_shared_by_both_students_run_once(tmp_path):
    from benchmark.checks import qdagger_reincarnation as bench

    torch_pair, jax_pair = bench.PAIRS
    runs = bench.once([bench.scratch_run(tmp_path, torch_pair, 1), bench.scratch_run(tmp_path, jax_pair, 1)])
    assert [run.result for run in runs] == [bench.scratch_run(tmp_path, torch_pair, 1).result]
    assert bench.teacher_run(tmp_path, torch_pair).result == bench.teacher_run(tmp_path, jax_pair).result
    # the same summary from other flags would hide a run: refused
    other = bench.Pair(jax_pair.student, jax_pair.teacher, 0, bench.Budget(online=20_000, offline=10_000))
    with pytest.raises(ValueError, match="different flags"):
        bench.once([bench.scratch_run(tmp_path, torch_pair, 1), bench.scratch_run(tmp_path, other, 1)])


def test_teacher_converted_for_jax_student_gives_the_same_q_values(tmp_path):
    """dqn_atari.py's network, written in dqn_atari_jax.py's format, loads in the JAX QDagger file and gives the
    PyTorch teacher's Q-values (the first dense layer's inputs reordered from (channel, row, column) to
    (row, column, channel))."""
    import numpy as np
    import torch

    from benchmark.checks.qdagger_reincarnation import torch_teacher_as_flax
    from cleanrl import dqn_atari
    from cleanrl import qdagger_dqn_atari_jax_impalacnn as qdagger_jax
    from tests.fixtures.teachers import TEACHER_MODEL

    converted = torch_teacher_as_flax(TEACHER_MODEL, tmp_path / "teacher.cleanrl_model")
    env = qdagger_jax.make_env(GAME, 0, False, "unused")()
    teacher, params = qdagger_jax.load_teacher(str(converted), "dqn_atari", env)
    original = dqn_atari.QNetwork(env)
    original.load_state_dict(torch.load(TEACHER_MODEL, weights_only=True))
    env.close()
    frames = np.random.default_rng(0).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        expected = original(torch.as_tensor(frames)).numpy()
    np.testing.assert_allclose(np.asarray(teacher.apply(params, frames)), expected, rtol=1e-4, atol=1e-6)
    assert np.abs(expected).max() > 1e-3  # not a network of zeros


class ScriptedGames:
    """Stands in for the self-play script's vector env in `play_match`: game copy k's step t gives side 0 a point when
    t is in POINTS0, side 1 when in POINTS1; a game ends after LENGTH steps, terminated in copies 0-3 and cut by the
    time limit in the others. Each step's actions are kept."""

    LENGTH, POINTS0, POINTS1 = 5, {0, 1, 3}, {2}

    def __init__(self, env_id, num_envs, max_cycles, capture_video):
        import numpy as np

        self.vec_envs = [self.Copy(k, self) for k in range(num_envs // 2)]
        self.actions, self.np = [], np

    def reset(self, seed=None):
        return self.np.zeros((2 * len(self.vec_envs), 1)), {}

    def close(self):
        pass

    class Copy:
        def __init__(self, k, envs):
            self.k, self.envs, self.t = k, envs, 0

        def step(self, actions):
            np = self.envs.np
            self.envs.actions.append((self.k, tuple(actions)))
            rewards = np.array([self.t in ScriptedGames.POINTS0, self.t in ScriptedGames.POINTS1], dtype=np.float32)
            rewards -= rewards[::-1]  # a point is +1 for its side and -1 for the other
            self.t += 1
            over = self.t == ScriptedGames.LENGTH
            self.t %= ScriptedGames.LENGTH
            terminated, cut = np.full(2, over and self.k < 4), np.full(2, over and self.k >= 4)
            return np.full((2, 1), self.k), rewards, terminated, cut, [{}, {}]


def test_selfplay_match_alternates_sides_and_counts_points_and_winners():
    from benchmark.checks import pettingzoo_pong_selfplay as bench

    envs = []

    def make(*args):
        envs.append(ScriptedGames(*args))
        return envs[-1]

    games = bench.play_match(make, "pong_v3", lambda obs: [7] * len(obs), lambda obs: [1] * len(obs), 20, 0, 100)
    assert len(games) == 20 and len(envs[0].actions) == 20 * ScriptedGames.LENGTH  # 2 games of 5 steps per copy
    assert [g.side for g in games] == [k % 2 for k in range(10) for _ in range(2)]  # side k % 2 in copy k
    # the policy's buttons on its side, the opponent's on the other
    assert all(actions[k % 2] == 7 and actions[1 - k % 2] == 1 for k, actions in envs[0].actions)
    for k in range(10):
        game = games[2 * k]
        assert (game.points, game.conceded) == ((3, 1) if k % 2 == 0 else (1, 3))  # side 0 scores 3, side 1 once
        assert game.over == (k < 4) and game.won == (k < 4 and k % 2 == 0)  # a cut game is not won
    with pytest.raises(ValueError, match="do not divide"):
        bench.play_match(make, "pong_v3", None, None, 15, 0, 100)


def write_matches(out, wins_by_match: dict) -> None:
    """A finished 4M-step run for seeds 1-3 and its matches, each with the given (won, lost, cut) games."""
    from benchmark.checks import pettingzoo_pong_selfplay as bench

    for seed in (1, 2, 3):
        result = {"env_id": "pong_v3", "total_timesteps": bench.TOTAL_TIMESTEPS, "seed": seed, "run": f"r{seed}"}
        bench.result_path(out, "pong_v3", bench.TOTAL_TIMESTEPS, seed).write_text(json.dumps(result))
        for (player, opponent, games, _), (won, lost, cut) in zip(bench.MATCHES, wins_by_match[seed], strict=True):
            played = [{"side": i % 2, "points": 21, "conceded": 9, "over": True} for i in range(won)]
            played += [{"side": i % 2, "points": 9, "conceded": 21, "over": True} for i in range(lost)]
            played += [{"side": i % 2, "points": 5, "conceded": 5, "over": False} for i in range(cut)]
            path = bench.match_path(out, result, player, opponent, games)
            path.parent.mkdir(exist_ok=True)
            opponent_step = None if opponent is None else int(opponent * bench.TOTAL_TIMESTEPS)
            path.write_text(json.dumps({"player_step": 4_000_000, "opponent_step": opponent_step, "games": played}))


def test_selfplay_report_tests_games_won_and_judges_with_holm(tmp_path):
    from benchmark.checks import pettingzoo_pong_selfplay as bench
    from cleanrl_utils import rlstats

    others = [(30, 20, 0)] * 5  # the matches reported, not judged
    strong = [(70, 30, 0), (66, 30, 4), *others]  # vs random, vs its quarter-run self (4 games cut: left out)
    write_matches(tmp_path, {1: strong, 2: strong, 3: strong})
    table = bench.report(tmp_path)
    p_random, p_quarter = rlstats.binomial_p_value(70, 100), rlstats.binomial_p_value(66, 96)
    assert f"| 1 | final (4,000,000) | random player | 100 (100) | 70 | 0.70 | 17.4 – 12.6 | {p_random:.2g} | " in table
    assert "| 1 | final (4,000,000) | itself at 0.25 (1,000,000) | 100 (96) | 66 | 0.69 | " in table
    # Holm over the six judged tests: the three equal largest p-values (vs the quarter-run self) are multiplied by 3
    assert f"| {p_quarter:.2g} | {3 * p_quarter:.2g} |" in table
    assert "passes" in table.splitlines()[-1] and "6 of 6 judged" in table

    # one seed whose final policy is no better than its quarter-run self: the check fails
    weak = [(70, 30, 0), (52, 48, 0), *others]
    write_matches(tmp_path, {1: strong, 2: weak, 3: strong})
    assert "**fails**" in bench.report(tmp_path).splitlines()[-1]


@pytest.mark.extended  # ~40 s of one core: CI runs it after the quick run
def test_selfplay_benchmark_trains_with_snapshots_then_plays_its_matches(tmp_path, monkeypatch):
    """`run` trains through the runner (checkpoints, snapshots, --save-model); `evaluate` plays each match with the
    saved policies, and the report has a row for each."""
    from benchmark.checks import pettingzoo_pong_selfplay as bench
    from benchmark.harness import one_thread_env, run_queue

    runs = bench.training_runs(tmp_path, 256, [1], 160, ["--num-envs", "2", "--num-steps", "64"])
    assert "--snapshot-frequency" in runs[0].args and runs[0].checkpoint_every == bench.CHECKPOINT_EVERY
    assert run_queue(runs, 1, one_thread_env(), tmp_path / "logs") == 0
    (result,) = bench.finished_runs(tmp_path)
    # snapshots after each of the 2 iterations: the one nearest each fraction of the run
    assert [bench.policy_file(tmp_path, result, fraction)[1] for fraction in (0.25, 0.5, 0.9)] == [128, 128, 256]
    tiny = tuple((player, opponent, 10, judged) for player, opponent, _, judged in bench.MATCHES)  # 1 game per copy
    monkeypatch.setattr(bench, "MATCHES", tiny)
    bench.play_matches(tmp_path, 256)
    played = sorted(p.name for p in (tmp_path / "matches").iterdir())
    assert len(played) == len(tiny) and "pong_v3__256__1__final__vs__random__10.json" in played
    for path in (tmp_path / "matches").iterdir():
        games = json.loads(path.read_text())["games"]
        assert len(games) == 10 and [g["side"] for g in games] == [k % 2 for k in range(10)]
        assert all(not g["over"] for g in games)  # 40 agent steps: every game cut
    table = bench.report(tmp_path, 256)
    rows = [line for line in table.splitlines() if line.startswith("| 1 | ")]
    assert len(rows) == len(tiny) and all("| 10 (0) | 0 | — |" in row for row in rows)  # no game decided: no win rate
    assert "not complete" in table.splitlines()[-1]


def test_rnd_exploration_judges_places_reached_with_and_without_bonus(tmp_path):
    from benchmark.checks import rnd_exploration as bench

    runs = bench.learning_runs(tmp_path, [1, 2, 3])
    # both arms of a seed before the next seed, the same flags but the intrinsic coefficient; resumable
    assert [(run.seed, run.args[-1]) for run in runs] == [(s, c) for s in (1, 2, 3) for c in ("1.0", "0.0")]
    assert runs[0].args[:-1] == runs[1].args[:-1] and runs[0].env_id == "MontezumaRevenge-v5"
    assert {run.checkpoint_every for run in runs} == {bench.CHECKPOINT_EVERY}
    assert runs[0].args[runs[0].args.index("--total-timesteps") + 1] == "2000000"
    totals = {("rnd", 1): 260, ("rnd", 2): 240, ("rnd", 3): 201, ("no_intrinsic", 1): 190, ("no_intrinsic", 2): 200}
    totals[("no_intrinsic", 3)] = 185
    for (arm, seed), places in totals.items():
        summary = {"arm": arm, "seed": seed, "steps": 1_998_848, "visited_places": places, "visited_rooms": 2,
                   "episodic_returns": [0.0] * 90 + [100.0] * 10, "game_places": [5] * 30 + [40] * 100,
                   "game_rooms": [1] * 80 + [2] * 20, "sps": 120}  # fmt: skip
        bench.result_path(tmp_path, arm, seed).write_text(json.dumps(summary))
    # a summary of another budget (the 200k runs of 2026-12) is not read
    old = {**summary, "visited_places": 999}
    (tmp_path / "ppo_rnd_envpool__rnd__MontezumaRevenge-v5__200000__1.json").write_text(json.dumps(old))
    table = bench.report(tmp_path)
    assert "| rnd | 1 | 1998k | 260 | 2 | 40.0 | 1.20 | 100 | 10 | 10.0 | 120 |" in table  # per game: the last 100 games
    assert "999" not in table
    assert table.endswith("with RND 234, without 192. Every RND seed above every seed without (the verdict): yes: passes.")
    summary["visited_places"] = 201  # no_intrinsic seed 3 ties RND's seed 3: not above
    bench.result_path(tmp_path, "no_intrinsic", 3).write_text(json.dumps(summary))
    assert bench.report(tmp_path).endswith("**no**: fails.")
    bench.result_path(tmp_path, "rnd", 2).unlink()  # a seed short of an arm: no verdict yet
    assert "verdict" not in bench.report(tmp_path)


# A typo in --only used to select nothing, run nothing and exit 0; each script's names, per command
UNKNOWN_ONLY = [
    ("compare.atari_vs_sb3", ["run", "--only", "ppo_atar"], "ppo_atari BreakoutNoFrameskip-v4"),
    ("compare.atari_vs_sb3", ["speed", "--only", "ppo_atari_3_threads"], "ppo_atari ppo_atari_2_threads"),
    ("compare.continuous_vs_sb3", ["run", "--only", "Hopper-v4", "sac_continous_action"], "Hopper-v4 InvertedPendulum-v4"),
    ("checks.envpool_procgen", ["run", "--only", "starpilot", "ppo_procgn"], "ppo_procgen"),
    ("compare.jax_vs_torch", ["learn", "--only", "dqn"], "c51_jax dqn_jax"),
    ("guards.textbook_forms", ["learn", "--only", "ppo_atari.py"], "ppo_atari ppo_continuous_action"),
    ("checks.trxl_memory", ["run", "--only", "MiniGrid-MemoryS8-v0"], "MiniGrid-MemoryS9-v0 MiniGrid-MemoryS9-v0+self"),
    (
        "checks.qdagger_reincarnation",
        ["run", "--only", "qdagger"],
        "BreakoutNoFrameskip-v4 dqn_atari qdagger_dqn_atari_impalacnn",
    ),
]


def refusal(module: str, argv: list[str], out: Path, monkeypatch, capsys) -> tuple[str, str]:
    """(its program's name, the last stderr line) of `benchmark.<module>`'s main refusing `argv` with exit 2."""
    import importlib

    program = module.rsplit(".", 1)[-1]
    monkeypatch.setattr(sys, "argv", [f"{program}.py", *argv, "--out", str(out)])
    with pytest.raises(SystemExit) as stopped:
        importlib.import_module(f"benchmark.{module}").main()
    assert stopped.value.code == 2
    return program, capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(("module", "argv", "known"), UNKNOWN_ONLY, ids=[f"{m}-{a[0]}" for m, a, _ in UNKNOWN_ONLY])
def test_unknown_only_name_is_one_line_and_exit_2(module, argv, known, tmp_path, monkeypatch, capsys):
    program, error = refusal(module, argv, tmp_path, monkeypatch, capsys)
    unknown = argv[-1]
    assert error.startswith(f"{program}.py: error: --only {unknown}: not a name this benchmark knows; one of: ")
    assert set(known.split()) <= set(error.split("one of: ")[1].split())  # the names it knows, to pick from
    assert not any(tmp_path.iterdir()), "nothing ran"


@pytest.mark.parametrize(
    ("module", "argv", "error"),
    [
        ("checks.trxl_memory", ["run", "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        ("checks.qdagger_reincarnation", ["run", "--workers", "two"], "argument --workers: invalid positive_int value: 'two'"),
        ("checks.envpool_procgen", ["run", "--threads", "0"], "argument --threads: must be at least 1, got 0"),
        ("compare.atari_vs_sb3", ["speed", "--rounds", "-1"], "argument --rounds: must be at least 1, got -1"),
        ("guards.textbook_forms", ["learn", "--seeds", "0"], "argument --seeds: must be at least 1, got 0"),
    ],
)
def test_counts_below_one_are_one_line_and_exit_2(module, argv, error, tmp_path, monkeypatch, capsys):
    """0 workers used to wait forever; 0 rounds or seeds to run nothing and exit 0."""
    program, last_line = refusal(module, argv, tmp_path, monkeypatch, capsys)
    assert last_line == f"{program}.py: error: {error}"
    assert not any(tmp_path.iterdir())
