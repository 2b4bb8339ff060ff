"""tests/preloaded.py: a run in a fork of the preloaded Python ends as the same run in a fresh interpreter."""

import pytest

from tests.helpers import run_script, script_env

CASES = {
    "help": ("ppo.py", ("--help",), False),
    "argument parser error (several lines)": ("dqn.py", ("--no-such-flag", "1"), False),
    "script's own check": ("ppo.py", ("--num-minibatches", "3"), False),
    "blocked package, imported at the top": ("dqn_atari.py", (), True),
    "blocked package, imported later": ("ppo.py", ("--save-model",), True),
    "finished run": ("ppo.py", ("--total-timesteps", "256", "--num-envs", "1", "--num-steps", "128"), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fork_ends_like_a_fresh_interpreter(case, preloaded, blocked_imports, tmp_path):
    script, args, block = CASES[case]
    env = script_env()
    if block:
        env["PYTHONPATH"] = f"{blocked_imports}:{env['PYTHONPATH']}"
    fresh = run_script(script, *args, cwd=tmp_path / "fresh", env=env, timeout=120)
    forked = preloaded.run(script, *args, cwd=tmp_path / "forked", env=env, blocked=blocked_imports if block else None)
    assert forked.returncode == fresh.returncode
    if case == "finished run":  # the run's name has its start time in it, and its speed varies
        assert fresh.returncode == 0 and len(forked.run_dirs) == 1 and forked.scalars().keys() == fresh.scalars().keys()
    else:
        assert forked.stderr == fresh.stderr and forked.stdout == fresh.stdout
        assert fresh.returncode != 0 or case == "help"


def test_a_run_past_its_timeout_is_killed(preloaded, tmp_path):
    run = preloaded.run("ppo.py", "--total-timesteps", "100000000", cwd=tmp_path, env=script_env(), timeout=3)
    assert run.returncode == -9
