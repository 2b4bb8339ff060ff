"""benchmark/checks/mujoco_1m.py: run folders to compact JSON files, and those to the record's statistic and verdicts."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from benchmark.checks import mujoco_1m as bench
from tests.helpers import REPO

TAGS = "no-tag-520-gc105263"


def write_run(runs, script, env_id, seed, episodes, sps, learning_starts=25000, tags=TAGS, purge_step=None):
    """A run folder as the scripts leave it: hyperparameters and tags texts, episodes (step, return) and `sps`
    (step, value); the scripts log SPS every 100 steps, a few values stand for them here."""
    from torch.utils.tensorboard import SummaryWriter

    folder = runs / f"{env_id}__{script}__{seed}__1700000000"
    writer = SummaryWriter(str(folder), purge_step=purge_step)
    if purge_step is None:
        table = f"|exp_name|{script}|\n|seed|{seed}|\n|env_id|{env_id}|\n|total_timesteps|1000000|\n"
        writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}|learning_starts|{learning_starts}|")
        writer.add_text("tags", tags)
    for step, value in episodes:
        writer.add_scalar(bench.RETURN_TAG, value, step)
    for step, value in sps:
        writer.add_scalar(bench.SPS_TAG, value, step)
    writer.close()
    return folder


def summary(script, env_id, seed, final_returns, complete=True, early=(), learning_starts=25000):
    """A run's JSON summary: `early` episodes (step, return) first, then one episode per 1000 steps ending at 1M
    with `final_returns`."""
    count = len(final_returns)
    episodes = [*early, *zip(range(1_000_000 - 1000 * (count - 1) - 1, 1_000_000, 1000), final_returns)]
    steps = [s for s, _ in episodes]
    return {
        "format": bench.FORMAT,
        "script": script,
        "env_id": env_id,
        "seed": seed,
        "run_name": f"{env_id}__{script}__{seed}__1",
        "tags": TAGS,
        "commit": "c105263",
        "total_timesteps": 1_000_000,
        "learning_starts": learning_starts,
        "steps": 1_000_000 if complete else 600_000,
        "complete": complete,
        "median_sps": 90.0 + seed,
        "episodes": len(episodes),
        "step_deltas": bench.encode_steps(steps),
        "returns": [r for _, r in episodes],
    }


def write_summaries(out, summaries):
    out.mkdir(parents=True, exist_ok=True)
    for s in summaries:
        (out / bench.result_name(s)).write_text(bench.dump(s))


def table_row(record, algo, env_id):
    return next(line for line in record.splitlines() if line.startswith(f"| {algo} (") and f"| {env_id} |" in line)


def test_collect_writes_each_run_compactly_and_marks_the_one_still_going(tmp_path):
    runs = tmp_path / "runs"
    # complete: it logged within the last 100 steps of the budget; returns to be rounded to 0.1
    episodes = [(12, 10.149), (40_000, 250.26), (999_500, 3012.96)]
    write_run(runs, "td3_continuous_action_jax", "Hopper-v4", 1, episodes, [(100_000, 100), (500_000, 80), (999_900, 70)])
    write_run(runs, "td3_continuous_action_jax", "Hopper-v4", 2, [(30_000, 99.0)], [(430_000, 90)])  # still going
    write_run(runs, "ppo_continuous_action", "Hopper-v4", 1, [(500, 20.0)], [(1000, 900)])  # not this benchmark's
    out = tmp_path / "results"

    assert bench.main(["collect", "--runs", str(runs), "--out", str(out)]) == 0

    assert sorted(p.name for p in out.iterdir()) == [
        "td3_continuous_action_jax__Hopper-v4__1.json",
        "td3_continuous_action_jax__Hopper-v4__2.json",
    ]  # nothing else: no temporary file, no file of the other script
    done = json.loads((out / "td3_continuous_action_jax__Hopper-v4__1.json").read_text())
    assert {k: done[k] for k in ("script", "env_id", "seed", "tags", "commit", "total_timesteps", "learning_starts")} == {
        "script": "td3_continuous_action_jax",
        "env_id": "Hopper-v4",
        "seed": 1,
        "tags": TAGS,
        "commit": "c105263",
        "total_timesteps": 1_000_000,
        "learning_starts": 25000,
    }
    assert done["complete"] is True and done["steps"] == 999_901
    assert done["step_deltas"] == [12, 39_988, 959_500]  # differences: 12, 40000, 999500
    assert done["returns"] == [10.1, 250.3, 3013.0]
    assert done["median_sps"] == 80.0
    partial = json.loads((out / "td3_continuous_action_jax__Hopper-v4__2.json").read_text())
    assert partial["complete"] is False and partial["steps"] == 430_001 and partial["episodes"] == 1


def test_resumed_run_is_one_history_and_final_checkpoint_completes_it(tmp_path):
    runs = tmp_path / "runs"
    first = [(step, 1.0) for step in range(30_000, 600_001, 10_000)]  # logged past the checkpoint at 500k, then killed
    folder = write_run(runs, "sac_continuous_action_jax", "Walker2d-v4", 3, first, [(600_000, 50)])
    second = [(step, 2.0) for step in range(505_000, 995_001, 10_000)]  # resumed from the checkpoint at 500k
    write_run(runs, "sac_continuous_action_jax", "Walker2d-v4", 3, second, [(990_000, 50)], purge_step=500_001)
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "checkpoint_1000000.pt").write_bytes(b"")  # written after the last step

    bench.collect([runs], tmp_path / "out")

    s = json.loads((tmp_path / "out" / "sac_continuous_action_jax__Walker2d-v4__3.json").read_text())
    steps = bench.decode_steps(s["step_deltas"])
    assert steps == [*range(30_000, 500_001, 10_000), *range(505_000, 995_001, 10_000)]
    assert s["returns"] == [1.0] * 48 + [2.0] * 50
    assert s["complete"] is True and s["steps"] == 1_000_000


def test_the_published_statistic_and_the_verdicts_by_hand(tmp_path):
    out = tmp_path / "mujoco_1m"
    random_early = [(1000 * k, 20.0) for k in range(1, 21)]  # ended before step 25000: random play, mean 20
    # TD3 Hopper: 50 early episodes of 10000 must fall outside the last-100 window; the window means are
    # 3000, 3300, 3600: 3300 ± sqrt((300² + 0 + 300²) / 3) = 244.9, over the bar 2940.10 - 2 × 655.63 = 1628.84
    td3_hopper = [
        summary("td3_continuous_action_jax", "Hopper-v4", seed, [10000.0] * 50 + [value] * 100, early=random_early)
        for seed, value in [(1, 3000.0), (2, 3300.0), (3, 3600.0)]
    ]
    # SAC Hopper: 1100 below its bar 2310.46 - 2 × 342.82 = 1624.82, above random play (20): learns
    sac_hopper = [
        summary("sac_continuous_action_jax", "Hopper-v4", s, [v] * 100) for s, v in [(1, 1000.0), (2, 1100.0), (3, 1200.0)]
    ]
    # SAC Walker2d: 3.0 at or below its random play (the early episodes' 5.0): fails its check
    walker_early = [(1000 * k, 5.0) for k in range(1, 5)]
    sac_walker = [
        summary("sac_continuous_action_jax", "Walker2d-v4", s, [3.0] * 100, early=walker_early, learning_starts=5000)
        for s in (1, 2, 3)
    ]
    # TD3 HalfCheetah: seed 3 still going, and with 40 episodes so far its score is their mean
    td3_cheetah = [
        summary("td3_continuous_action_jax", "HalfCheetah-v4", 1, [9000.0] * 100),
        summary("td3_continuous_action_jax", "HalfCheetah-v4", 2, [9500.0] * 100),
        summary("td3_continuous_action_jax", "HalfCheetah-v4", 3, [400.0] * 40, complete=False),
    ]
    write_summaries(out, [*td3_hopper, *sac_hopper, *sac_walker, *td3_cheetah])
    record_path = tmp_path / "mujoco_1m.md"

    assert bench.main(["report", "--out", str(out), "--images", str(tmp_path / "images"), "--bootstrap-samples", "200"]) == 0

    record = record_path.read_text()
    cells = [c.strip() for c in table_row(record, "TD3", "Hopper-v4").split("|")[1:-1]]
    assert cells[2:4] == ["3 of 3", "3300.0 ± 244.9"]
    assert cells[4].startswith("3300.0 [")  # the IQM of 3 seeds cuts none: their mean
    assert cells[5] == "92"  # median over the seeds of the runs' median SPS (91, 92, 93)
    assert cells[6].startswith("2940.10 ± 655.63 (`td3_continuous_action_jax.py`, v4)")
    assert cells[7:] == ["1628.8", "**matches published**"]
    assert table_row(record, "SAC", "Hopper-v4").endswith("| 1624.8 | learns |")
    assert table_row(record, "SAC", "Walker2d-v4").endswith("| fails its check |")
    cheetah = table_row(record, "TD3", "HalfCheetah-v4")
    assert "| 2 of 3 |" in cheetah and "| 6300.0 ± 4176.9 (last 40/100 episodes) |" in cheetah
    assert cheetah.endswith("| pending (2 of 3 seeds at 1M) |")
    assert "**Incomplete: 11 of 27 runs reached 1M steps** (12 run files)" in record
    assert "| Hopper-v4 | 20.0 | 60 |" in record  # random play: 3 TD3 runs × 20 episodes before step 25000
    assert (tmp_path / "images" / "learning_curves.png").stat().st_size > 0
    assert not [p for p in tmp_path.rglob(".*tmp*")]  # written whole: no temporary files left


def test_random_play_counts_the_episodes_runs_of_one_seed_share_once(tmp_path):
    # TD3 and DDPG of seed 1 play the same random episodes (same seeds, same sampler, learning from 25000);
    # SAC of seed 1 learns from 5000, so it shares the first of them; seed 2 plays its own
    shared = [(4000, 10.0), (9000, 30.0), (20000, 50.0)]
    write_summaries(
        tmp_path,
        [
            summary("td3_continuous_action_jax", "Hopper-v4", 1, [3000.0] * 100, early=shared),
            summary("ddpg_continuous_action_jax", "Hopper-v4", 1, [1000.0] * 100, early=shared),
            summary("sac_continuous_action_jax", "Hopper-v4", 1, [2000.0] * 100, early=shared[:1], learning_starts=5000),
            summary("td3_continuous_action_jax", "Hopper-v4", 2, [3000.0] * 100, early=[(4000, 10.0), (15000, 70.0)]),
        ],
    )
    results = bench.load_results(tmp_path)
    assert sorted(bench.random_play_episodes(results)["Hopper-v4"]) == [10.0, 10.0, 30.0, 50.0, 70.0]
    assert bench.random_play_means(results) == {"Hopper-v4": pytest.approx(34.0)}
    assert "| Hopper-v4 | 34.0 | 5 |" in bench.random_play_section(results)


def test_verdict_at_the_bar_and_the_aggregate_iqm_of_normalised_scores():
    bar = bench.primary("TD3", "Hopper-v4").bar
    assert bar == pytest.approx(2940.10 - 2 * 655.63)
    assert bench.verdict(bar, 3, bench.primary("TD3", "Hopper-v4"), 18.0) == "matches published"  # at the bar
    assert bench.verdict(bar - 0.01, 3, bench.primary("TD3", "Hopper-v4"), 18.0) == "learns"
    assert bench.verdict(1e6, 2, bench.primary("TD3", "Hopper-v4"), 18.0) == "pending (2 of 3 seeds at 1M)"

    # TD3's 9 runs as multiples of their env's published mean; pooled and sorted: 0.5 0.6 | 0.7 0.8 0.9 1.0 1.5 | 2.0 3.0
    multiples = {"Hopper-v4": (0.5, 1.0, 1.5), "HalfCheetah-v4": (0.6, 0.9, 2.0), "Walker2d-v4": (0.7, 0.8, 3.0)}
    results = [
        bench.Result(
            "td3_continuous_action_jax",
            env_id,
            seed,
            TAGS,
            1_000_000,
            25000,
            1_000_000,
            True,
            90.0,
            [999_999],
            [m * bench.primary("TD3", env_id).mean],
        )  # fmt: skip
        for env_id, ms in multiples.items()
        for seed, m in zip((1, 2, 3), ms)
    ]
    table = bench.cells(results, reps=500, confidence=0.95, seed=0)
    estimate = bench.aggregate(table, reps=500, confidence=0.95, seed=0)["TD3"]
    assert estimate.value == pytest.approx((0.7 + 0.8 + 0.9 + 1.0 + 1.5) / 5)  # the middle 5 of 9
    assert estimate.low <= estimate.value <= estimate.high
    assert "| TD3 | 9 runs on 3 envs, 9 at 1M |" in bench.aggregate_section({"TD3": estimate}, table, 0.95)
    one = bench.cells(results[:1], reps=500, confidence=0.95, seed=0)
    one_estimate = bench.aggregate(one, reps=500, confidence=0.95, seed=0)
    assert "| TD3 | 1 run on 1 env, 1 at 1M |" in bench.aggregate_section(one_estimate, one, 0.95)
    hopper = next(c for c in table if c.env_id == "Hopper-v4")
    assert hopper.mean == pytest.approx(2940.10) and hopper.std == pytest.approx(2940.10 * math.sqrt(1 / 6))
    assert hopper.iqm.value == pytest.approx(hopper.mean)
    assert np.isfinite([hopper.iqm.low, hopper.iqm.high]).all()


def test_every_cell_has_one_primary_published_figure_with_a_spread():
    for algo in bench.ALGOS:
        for env_id in bench.ENVS:
            figures = [p for p in bench.PUBLISHED if p.algo == algo and p.env_id == env_id and p.primary]
            assert len(figures) == 1 and figures[0].std is not None and figures[0].version == "v4"
    assert all(p.source in bench.SOURCES for p in bench.PUBLISHED)


@pytest.mark.extended  # two interpreters importing matplotlib and TensorBoard: a few seconds
def test_the_module_runs_with_python_dash_m_from_the_repository_root(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "ddpg_continuous_action_jax", "HalfCheetah-v4", 1, [(999, -250.0), (30_999, 800.0)], [(31_000, 300)])
    out = tmp_path / "mujoco_1m"
    for command in (["collect", "--runs", str(runs)], ["report", "--images", str(tmp_path / "images")]):
        done = subprocess.run(
            [sys.executable, "-m", "benchmark.checks.mujoco_1m", *command, "--out", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    assert (
        "| DDPG (`ddpg_continuous_action_jax.py`) | HalfCheetah-v4 | 0 of 3 | 275.0 (one seed, last 2 episodes) |"
        in done.stdout
    )
    assert (tmp_path / "mujoco_1m.md").read_text().startswith("# DDPG, TD3 and SAC at 1M steps")
