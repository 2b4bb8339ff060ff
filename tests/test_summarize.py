"""cleanrl_utils.summarize on hand-made series and on real TensorBoard event files."""

import pytest
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils.summarize import best_window_mean, curve, last_mean, main


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


def write_run(logdir, returns, sps=1000.0):
    writer = SummaryWriter(logdir)
    for step, r in returns:
        writer.add_scalar("charts/episodic_return", r, step)
    writer.add_scalar("charts/SPS", sps, returns[-1][0])
    writer.close()


def test_main_prints_per_run_and_across_seeds(tmp_path, capsys):
    write_run(tmp_path / "CartPole-v1__dqn__1__1", [(i * 100, 500.0) for i in range(200)])
    write_run(tmp_path / "CartPole-v1__dqn__2__1", [(i * 100, 400.0) for i in range(200)])
    assert main([str(tmp_path / "CartPole-v1__dqn__1__1"), str(tmp_path / "CartPole-v1__dqn__2__1"), "--last", "100"]) == 0
    out = capsys.readouterr().out
    assert "| CartPole-v1__dqn__1__1 | 200 | 500.00 | 500.00 (0) | 1000 |" in out
    assert "**450.00 ± 50.00**" in out


def test_main_reports_missing_runs_in_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("summarize: error: no TensorBoard run folder")


def test_curve_averages_per_bucket_and_skips_empty_ones():
    series = [(10, 1.0), (90, 3.0), (150, 10.0), (450, 7.0)]
    assert curve(series, 100) == {100: 2.0, 200: 10.0, 500: 7.0}


def test_main_prints_the_curve_table(tmp_path, capsys):
    write_run(tmp_path / "a", [(50, 1.0), (150, 3.0)])
    write_run(tmp_path / "b", [(60, 5.0)])
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--curve", "100"]) == 0
    out = capsys.readouterr().out
    assert "| steps up to | a | b |" in out
    assert "| 100 | 1.0 | 5.0 |" in out and "| 200 | 3.0 | - |" in out
