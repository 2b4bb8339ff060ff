"""cleanrl_utils.report on TensorBoard runs written here with known returns, wall times and SPS."""

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils.report import (
    best_window_mean,
    collect_runs,
    curve_by_steps,
    last_mean,
    main,
    parse_hyperparameters,
    parse_run_name,
    plot_learning_curves,
    rolling_mean,
    seed_curve,
)
from cleanrl_utils.tensorboard_reader import read_run

SEEDS = (1, 2, 3)
# Final return of seed s is BASE + SPREAD * (s - 2): the seeds' mean is BASE, their population
# std SPREAD * sqrt(2/3) (deviations -SPREAD, 0, +SPREAD).
BASE = {
    ("CartPole-v1", "ppo"): 200.0,
    ("CartPole-v1", "dqn"): 100.0,
    ("Acrobot-v1", "ppo"): -90.0,
    ("Acrobot-v1", "dqn"): -300.0,
}
SPREAD = {"ppo": 30.0, "dqn": 60.0}  # population std 24.49 and 48.99
# A ppo run of seed s lasts s minutes, a dqn run 2s minutes: 2.00 ± 0.82 and 4.00 ± 1.63 across seeds.
MINUTES_PER_SEED = {"ppo": 1, "dqn": 2}
EPISODES, LAST = 150, 100
T0 = 1_700_000_000.0


def write_run(
    runs_dir: Path, env_id: str, exp_name: str, seed: int, final: float, minutes: float, hyperparameters: bool = True
) -> Path:
    """A run as the scripts write it: 50 episodes returning 0, then 100 returning `final`."""
    run_dir = runs_dir / f"{env_id}__{exp_name}__{seed}__{int(T0)}"
    writer = SummaryWriter(run_dir)
    if hyperparameters:
        table = f"|param|value|\n|-|-|\n|exp_name|{exp_name}|\n|seed|{seed}|\n|env_id|{env_id}|\n|learning_rate|0.00025|"
        writer.add_text("hyperparameters", table, walltime=T0)
    for episode in range(EPISODES):
        # Seeds finish their episodes at different steps, as real runs do.
        value = 0.0 if episode < EPISODES - LAST else final
        writer.add_scalar("charts/episodic_return", value, episode * 10 + seed, walltime=T0 + 1 + episode * 0.01)
    # SPS values 100s, 200s and 900s: the median is 200s, so 400 ± 163 across seeds 1, 2, 3.
    for i, sps in enumerate((100 * seed, 900 * seed, 200 * seed)):
        writer.add_scalar("charts/SPS", sps, (i + 1) * 500, walltime=T0 + 2 + i)
    writer.add_scalar("losses/loss", 1.0, EPISODES * 10, walltime=T0 + minutes * 60)
    writer.close()
    return run_dir


def write_runs(runs_dir: Path, envs=("CartPole-v1", "Acrobot-v1"), exp_names=("ppo", "dqn")) -> None:
    for (env_id, exp_name), base in BASE.items():
        if env_id in envs and exp_name in exp_names:
            for seed in SEEDS:
                final = base + SPREAD[exp_name] * (seed - 2)
                write_run(runs_dir, env_id, exp_name, seed, final, MINUTES_PER_SEED[exp_name] * seed)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("report") / "runs"
    write_runs(runs)
    return runs


def report(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(out: str, section: str) -> dict[str, list[str]]:
    """{first cell: other cells} of the table under the Markdown heading `section`."""
    body = out.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in body.splitlines() if line.startswith("|") and "---" not in line]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def test_results_table_is_mean_and_population_std_of_the_last_n(runs_dir, capsys):
    code, out, err = report(capsys, runs_dir)
    assert code == 0 and err == ""
    rows = table_rows(out, "Results")
    # Columns and rows sorted by name; 24.49 = 30 * sqrt(2/3), 48.99 = 60 * sqrt(2/3).
    assert rows["env id"] == ["dqn", "ppo"]
    assert rows["Acrobot-v1"] == ["-300.00 ± 48.99", "-90.00 ± 24.49"]
    assert rows["CartPole-v1"] == ["100.00 ± 48.99", "200.00 ± 24.49"]
    assert "3 seeds per cell" in out and "population standard deviation" in out


def test_last_counts_the_earlier_zero_returns_too(runs_dir, capsys):
    # The last 150 values are 50 zeros and 100 finals: two thirds of each final.
    code, out, _ = report(capsys, runs_dir, "--last", "150", "--env-ids", "CartPole-v1", "--exp-names", "ppo")
    assert code == 0
    assert table_rows(out, "Results")["CartPole-v1"] == ["133.33 ± 16.33"]


def test_runtime_and_median_sps_tables(runs_dir, capsys):
    _, out, _ = report(capsys, runs_dir)
    # dqn runs last 2, 4, 6 minutes; ppo runs 1, 2, 3. pstdev(1, 2, 3) = 0.816.
    assert table_rows(out, "Runtime (minutes)")["CartPole-v1"] == ["4.00 ± 1.63", "2.00 ± 0.82"]
    # Medians 200, 400, 600 (the largest SPS, 900s, is ignored by the median): 400 ± 163.
    assert table_rows(out, "Median SPS")["Acrobot-v1"] == ["400 ± 163", "400 ± 163"]


def test_filters_choose_rows_and_columns_in_the_given_order(runs_dir, capsys):
    code, out, _ = report(capsys, runs_dir, "--exp-names", "ppo", "dqn", "--env-ids", "CartPole-v1")
    assert code == 0
    rows = table_rows(out, "Results")
    assert rows == {"env id": ["ppo", "dqn"], "CartPole-v1": ["200.00 ± 24.49", "100.00 ± 48.99"]}


def test_unequal_seed_counts_are_shown_in_each_cell(runs_dir, tmp_path, capsys):
    runs = shutil.copytree(runs_dir, tmp_path / "runs")
    shutil.rmtree(next(runs.glob("CartPole-v1__ppo__3__*")))
    _, out, _ = report(capsys, runs, "--env-ids", "CartPole-v1")
    # Seeds 1 and 2 of ppo: finals 170 and 200.
    assert table_rows(out, "Results")["CartPole-v1"] == ["100.00 ± 48.99 (n=3)", "185.00 ± 15.00 (n=2)"]


def test_split_by_dir_makes_a_column_group_per_folder(tmp_path, capsys):
    write_runs(tmp_path / "v1", envs=("CartPole-v1",), exp_names=("ppo",))
    write_run(tmp_path / "v2", "CartPole-v1", "ppo", 1, 500.0, 1)
    code, out, _ = report(capsys, tmp_path / "v1", tmp_path / "v2", "--split-by-dir")
    assert code == 0
    assert table_rows(out, "Results") == {
        "env id": ["ppo (v1)", "ppo (v2)"],
        "CartPole-v1": ["200.00 ± 24.49 (n=3)", "500.00 ± 0.00 (n=1)"],
    }
    _, out, _ = report(capsys, tmp_path / "v1", tmp_path / "v2", "--split-by-dir", "--groups", "v2")
    assert table_rows(out, "Results")["env id"] == ["ppo (v2)"]
    # Without the option the folders are pooled: four ppo runs.
    _, out, _ = report(capsys, tmp_path / "v1", tmp_path / "v2")
    assert table_rows(out, "Results")["env id"] == ["ppo"]
    assert "4 seeds per cell" in out


def test_names_come_from_the_hyperparameters_table_before_the_folder_name(tmp_path):
    run_dir = write_run(tmp_path / "runs", "CartPole-v1", "ppo", 7, 1.0, 1)
    run_dir.rename(tmp_path / "runs" / "renamed")
    write_run(tmp_path / "runs", "Acrobot-v1", "dqn", 4, 1.0, 1, hyperparameters=False)
    runs = sorted(collect_runs([tmp_path / "runs"], split_by_dir=False), key=lambda r: r.env_id)
    assert [(r.env_id, r.exp_name, r.seed) for r in runs] == [("Acrobot-v1", "dqn", "4"), ("CartPole-v1", "ppo", "7")]


def test_env_ids_with_a_slash_nest_and_inner_folders_belong_to_a_run(tmp_path):
    # run_name "ALE/Pong-v5__ppo__1__…" makes the folder runs/ALE/Pong-v5__ppo__1__….
    run_dir = write_run(tmp_path / "runs", "ALE/Pong-v5", "ppo", 1, 1.0, 1, hyperparameters=False)
    with SummaryWriter(run_dir / "extra") as writer:  # e.g. what add_scalars writes
        writer.add_scalar("x", 1.0, 0)
    runs = collect_runs([tmp_path / "runs"], split_by_dir=False)
    assert [(r.env_id, r.exp_name, r.path) for r in runs] == [("ALE/Pong-v5", "ppo", run_dir)]


def test_parsers():
    table = "|param|value|\n|-|-|\n|exp_name|ppo|\n|env_id|ALE/Pong-v5|\n|wandb_entity|None|"
    assert parse_hyperparameters(table) == {"exp_name": "ppo", "env_id": "ALE/Pong-v5", "wandb_entity": "None"}
    assert parse_run_name("ALE/Pong-v5__ppo_atari__2__1700000000") == {
        "env_id": "ALE/Pong-v5",
        "exp_name": "ppo_atari",
        "seed": "2",
    }
    assert parse_run_name("a") == {}


def test_read_run_gives_the_wall_time_span(runs_dir):
    events = read_run(next(runs_dir.glob("CartPole-v1__dqn__2__*")))
    assert (events.first_wall_time, events.last_wall_time) == (T0, T0 + 4 * 60)
    assert "hyperparameters" in events.texts and len(events.scalars["charts/episodic_return"]) == EPISODES


def test_rolling_mean_is_trailing_and_keeps_every_value():
    assert rolling_mean(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    assert rolling_mean(np.array([1.0, 2.0, 3.0]), 1).tolist() == [1.0, 2.0, 3.0]


def test_seed_curve_averages_seeds_on_a_common_grid():
    a = [(0, 0.0), (100, 100.0)]
    b = [(10, 20.0), (90, 100.0), (200, 0.0)]
    curve = seed_curve([a, b], smooth=1, band="std")
    # The grid covers the steps both seeds logged: 10 to 100.
    assert curve.steps[0] == 10 and curve.steps[-1] == 100 and len(curve.steps) == 200
    # At step 10: a is 10, b is 20; at step 100: a is 100, b is 100 - 10/110 * 100.
    assert curve.mean[0] == pytest.approx(15.0) and curve.high[0] - curve.mean[0] == pytest.approx(5.0)
    b_at_100 = 100 - 100 * 10 / 110
    assert curve.mean[-1] == pytest.approx((100 + b_at_100) / 2)
    minmax = seed_curve([a, b], smooth=1, band="minmax")
    assert (minmax.low[0], minmax.high[0]) == (pytest.approx(10.0), pytest.approx(20.0))


def test_figure_has_a_panel_per_env_and_a_line_per_exp_name(runs_dir):
    runs = collect_runs([runs_dir], split_by_dir=False)
    metric = "charts/episodic_return"
    figure = plot_learning_curves(runs, metric, ["Acrobot-v1", "CartPole-v1"], ["dqn", "ppo"], smooth=1, band="minmax")
    assert [ax.get_title() for ax in figure.axes] == ["Acrobot-v1", "CartPole-v1"]
    cartpole = figure.axes[1]
    assert [line.get_label() for line in cartpole.lines] == ["dqn", "ppo"]
    # Every seed returns its final value at the end: the mean line ends at the seeds' mean.
    assert cartpole.lines[1].get_ydata()[-1] == pytest.approx(BASE["CartPole-v1", "ppo"])
    assert len(cartpole.collections) == 2  # one band per line
    band_top = cartpole.collections[1].get_paths()[0].vertices[:, 1].max()
    assert band_top == pytest.approx(BASE["CartPole-v1", "ppo"] + SPREAD["ppo"])


def test_plots_are_valid_png_and_svg_linked_from_the_output(runs_dir, tmp_path, capsys):
    output = tmp_path / "report" / "results.md"
    output.parent.mkdir()
    code, out, _ = report(capsys, runs_dir, "--plot-dir", tmp_path / "report" / "plots", "--output", output)
    assert code == 0
    png, svg = tmp_path / "report" / "plots" / "learning_curves.png", tmp_path / "report" / "plots" / "learning_curves.svg"
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    # Two panels, each with an axes group in the SVG.
    assert len([g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("id", "").startswith("axes_")]) == 2
    assert "![Learning curves](plots/learning_curves.png)" in out
    assert output.read_text() == out


def test_a_report_killed_while_writing_its_output_leaves_the_previous_one(runs_dir, tmp_path, capsys):
    from tests.helpers import killed_mid_write

    output = tmp_path / "results.md"
    assert report(capsys, runs_dir, "--output", output)[0] == 0
    previous = output.read_text()
    code = f"from cleanrl_utils.report import main; main([{str(runs_dir)!r}, '--last', '3', '--output', {str(output)!r}])"
    killed_mid_write(code, tmp_path)
    assert output.read_text() == previous, "a cut-short write replaced the report"


def test_format_chooses_the_files(runs_dir, tmp_path, capsys):
    code, _, _ = report(capsys, runs_dir, "--plot-dir", tmp_path, "--format", "svg", "--exp-names", "ppo")
    assert code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["learning_curves.svg"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{tmp}/missing"], "no such folder"),
        (["{tmp}"], "no TensorBoard runs found"),
        (["{runs}", "--metric", "charts/nope"], "no run has 'charts/nope' values"),
        (["{runs}", "--exp-names", "sac"], "no runs match"),
        (["{runs}", "--groups", "runs"], "add --split-by-dir"),
        (["{runs}", "--last", "0"], "--metric-last-n-average-window and --smooth must be at least 1"),
        (["--runs-dir", "{runs}", "--best-window-steps", "0"], "--best-window-steps must be at least 1"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(runs_dir, tmp_path, capsys, argv, message):
    code, out, err = report(capsys, *(a.format(tmp=tmp_path, runs=runs_dir) for a in argv))
    assert code == 2 and out == ""
    assert err.splitlines() == [err.strip()] and err.startswith("report: error: ") and message in err


def test_split_by_dir_refuses_two_folders_with_one_name(runs_dir, tmp_path, capsys):
    code, _, err = report(capsys, runs_dir, tmp_path / "runs", "--split-by-dir")
    assert code == 2 and "given twice: runs" in err


def test_module_runs_as_a_command_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.report", str(tmp_path / "missing")], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"report: error: no such folder: {tmp_path / 'missing'}"


def test_published_results_are_compared_at_mean_minus_two_std(runs_dir, tmp_path, capsys):
    published = tmp_path / "published.json"
    # ppo on CartPole: ours 200; 260 - 2 * 30 = 200 is reached (just). dqn on CartPole: ours 100 < 150 - 2 * 20.
    # Acrobot has no published ppo entry and no row for it; dqn on Acrobot has no published number either.
    published.write_text('{"ppo": {"CartPole-v1": [260, 30]}, "dqn": {"CartPole-v1": [150, 20], "Pong-v5": [1, 1]}}')
    code, out, _ = report(capsys, runs_dir, "--published", published)
    assert code == 0
    body = out.split("## Against published results\n", 1)[1]
    rows = [line for line in body.splitlines() if line.startswith("| CartPole") or line.startswith("| Acrobot")]
    assert rows == [
        "| CartPole-v1 | dqn | 100.00 ± 48.99 | 150.00 ± 20.00 | **no** |",
        "| CartPole-v1 | ppo | 200.00 ± 24.49 | 260.00 ± 30.00 | yes |",
    ]


def test_malformed_published_file_is_one_error_line(runs_dir, tmp_path, capsys):
    published = tmp_path / "published.json"
    published.write_text('{"ppo": [1, 2]}')
    code, _, err = report(capsys, runs_dir, "--published", published)
    assert code == 2 and err.startswith("report: error: ") and "expected {exp_name" in err


def test_last_mean_uses_the_last_n_or_all():
    series = [(i, float(i)) for i in range(10)]
    assert last_mean(series, 3) == 8.0
    assert last_mean(series, 100) == 4.5
    with pytest.raises(ValueError):
        last_mean([], 3)


def test_best_window_mean_finds_the_best_stretch():
    # Returns climb to 500 between steps 300 and 390, then fall again.
    series = [(0, 10.0), (100, 20.0), (300, 500.0), (350, 500.0), (390, 500.0), (450, 100.0), (600, 50.0)]
    assert best_window_mean(series, 100) == (500.0, 300)
    # A window of 200 steps starting at 300 also holds the 100 at step 450.
    assert best_window_mean(series, 200) == ((500.0 * 3 + 100.0) / 4, 300)
    assert best_window_mean(series, 10_000) == (sum(v for _, v in series) / len(series), 0)


def test_curve_by_steps_averages_per_bucket_and_skips_empty_ones():
    series = [(10, 1.0), (90, 3.0), (150, 10.0), (450, 7.0)]
    assert curve_by_steps(series, 100) == {100: 2.0, 200: 10.0, 500: 7.0}


def test_per_run_lines_follow_the_table_order(runs_dir, capsys):
    # the per-run mode of the report (what `cleanrl_utils.summarize` printed): every run's own numbers
    code, out, _ = report(capsys, "--runs-dir", runs_dir, "--env-ids", "CartPole-v1", "--exp-names", "ppo", "dqn")
    assert code == 0 and "## Per run" not in out
    _, out, _ = report(capsys, "--runs-dir", runs_dir, "--env-ids", "CartPole-v1", "--exp-names", "ppo", "dqn",
                       "--per-run", "True", "--best-window-steps", "500", "--last", "100")  # fmt: skip
    lines = [line for line in out.split("## Per run", 1)[1].splitlines() if line.startswith("| CartPole-v1__")]
    # ppo first (the column order asked for), seeds in order; 150 values each, the last 100 all `final`; the best
    # 500-step window holds 50 values, the first of them at step 1000 + seed; SPS logged last: 200 x seed
    finals = {("ppo", seed): BASE["CartPole-v1", "ppo"] + SPREAD["ppo"] * (seed - 2) for seed in SEEDS}
    finals |= {("dqn", seed): BASE["CartPole-v1", "dqn"] + SPREAD["dqn"] * (seed - 2) for seed in SEEDS}
    expected = [
        f"| CartPole-v1__{exp}__{seed}__{int(T0)} | 150 | {finals[exp, seed]:.2f} | {finals[exp, seed]:.2f} "
        f"({(EPISODES - LAST) * 10 + seed}) | {200 * seed} |"
        for exp in ("ppo", "dqn")
        for seed in SEEDS
    ]
    assert lines == expected


def test_curve_table_has_a_column_per_run(tmp_path, capsys):
    for seed, returns in ((1, [(50, 1.0), (150, 3.0)]), (2, [(60, 5.0)])):
        with SummaryWriter(tmp_path / "runs" / f"CartPole-v1__dqn__{seed}__1") as writer:
            for step, value in returns:
                writer.add_scalar("charts/episodic_return", value, step)
    code, out, _ = report(capsys, "--runs-dir", tmp_path / "runs", "--curve-table-steps", "100")
    assert code == 0
    table = out.split("## Learning curve by steps", 1)[1]
    assert "| steps up to | CartPole-v1__dqn__1__1 | CartPole-v1__dqn__2__1 |" in table
    assert "| 100 | 1.0 | 5.0 |" in table and "| 200 | 3.0 | — |" in table


def test_runs_dir_defaults_to_runs_and_leading_folders_are_runs_dirs(runs_dir, capsys, monkeypatch):
    monkeypatch.chdir(runs_dir.parent)  # holds runs/
    default = report(capsys, "--env-ids", "CartPole-v1")
    assert default[0] == 0
    assert report(capsys, "runs", "--env-ids", "CartPole-v1") == default
    assert report(capsys, "--runs-dir", "runs", "--env-ids", "CartPole-v1") == default
