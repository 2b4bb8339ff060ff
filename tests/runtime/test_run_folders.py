"""Run folders never collide: two runs of one env id, exp name and seed started in the same second get two folders."""

import pytest

from cleanrl_utils import experiment
from cleanrl_utils.experiment import Experiment
from tests.runtime.test_experiment import SCRIPT, Args, fails_with

NOW = 1_796_000_000


@pytest.fixture
def same_second(tmp_path, monkeypatch):
    """Runs start in a scratch folder, all in the same second."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(experiment.time, "time", lambda: NOW + 0.5)
    yield
    monkeypatch.undo()  # time again, before the writers are closed


def test_a_second_run_in_the_same_second_gets_a_folder_of_its_own(same_second, tmp_path):
    first = Experiment(Args(seed=3), SCRIPT)
    first.start_logging()
    second = Experiment(Args(seed=3), SCRIPT)
    second.start_logging()
    (tmp_path / "videos" / f"CartPole-v1__algo__3__{NOW}-3").mkdir(parents=True)  # a video folder counts too
    third = Experiment(Args(seed=3), SCRIPT)
    base = f"CartPole-v1__algo__3__{NOW}"
    assert (first.run_name, second.run_name, third.run_name) == (base, f"{base}-2", f"{base}-4")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [base, f"{base}-2"]
    for exp in (first, second):
        exp.writer.close()
    # the documented name keeps its four parts: the suffix rides on the time
    assert second.run_name.split("__")[:3] == ["CartPole-v1", "algo", "3"]


def test_a_folder_made_meanwhile_by_another_run_is_refused(same_second, tmp_path, capsys):
    """Both runs picked the free name; the one that starts logging second must not write into the other's folder."""
    first, second = Experiment(Args(seed=3), SCRIPT), Experiment(Args(seed=3), SCRIPT)
    assert first.run_name == second.run_name
    first.start_logging()
    line = fails_with(capsys, second.start_logging)
    assert f"runs/{first.run_name} was made meanwhile by another run of the same name" in line
    first.writer.close()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [first.run_name]
