"""ppo_pettingzoo_ma_atari.py: self-play on PettingZoo's Pong, checked the way the script contract checks the others.

Its episode tags are per player (`charts/episodic_return-player0/1`) and it has no --save-model, so the
generic rows of test_script_contract.py do not fit it; this file asserts the same promises for its tags.
Games are cut short with --max-cycles (400 emulator frames = 100 agent steps) so episodes end quickly.
The runs use one CPU thread: on a busy machine PyTorch's thread pool makes the CNN several times slower.
"""

import re
import signal
import sys

import pytest

from tests.helpers import Run, read_wandb_history_keys, run_in_process, run_script, script_env, start_script

SCRIPT = "ppo_pettingzoo_ma_atari.py"
TINY = ("--num-envs", "4", "--num-steps", "50", "--total-timesteps", "400", "--max-cycles", "400")
PLAYER_TAGS = {f"charts/episodic_{kind}-player{p}" for kind in ("return", "length") for p in (0, 1)}
TAGS = PLAYER_TAGS | {
    "charts/learning_rate",
    "charts/SPS",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
}
ONE_THREAD = script_env(OMP_NUM_THREADS="1")
EPISODE_LINE = re.compile(r"^global_step=(\d+), player=([01]), episodic_return=(-?[\d.]+)$", re.M)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Run:
    cwd = tmp_path_factory.mktemp("pettingzoo")
    run = run_script(SCRIPT, *TINY, "--capture-video", "--track", "--wandb-project-name", "tests", cwd=cwd, env=ONE_THREAD)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_run_logs_every_documented_tag_and_nothing_else(smoke):
    assert re.fullmatch(r"pong_v3__ppo_pettingzoo_ma_atari__1__\d+", smoke.run_dir.name)
    assert "|num_envs|4|" in smoke.texts()["hyperparameters"]
    assert set(smoke.scalars()) == TAGS
    (wandb_run,) = (smoke.cwd / "wandb").glob("offline-run-*/run-*.wandb")
    assert TAGS <= read_wandb_history_keys(wandb_run)


def test_each_player_episode_is_logged_and_printed(smoke):
    scalars = smoke.scalars()
    printed = [(int(step), int(player), float(r)) for step, player, r in EPISODE_LINE.findall(smoke.stdout)]
    for player in (0, 1):
        logged = scalars[f"charts/episodic_return-player{player}"]
        assert [(s, r) for s, p, r in printed if p == player] == logged
        # the two game copies are cut after 100 agent steps, at global step 4 envs x 100
        assert logged and all(step == 400 for step, _ in logged)
        assert [n for _, n in scalars[f"charts/episodic_length-player{player}"]] == [100] * len(logged)
    # one game per copy, seen by both of its players; returns are sums of clipped Pong rewards (whole points)
    assert sorted(p for _, p, _ in printed) == [0, 0, 1, 1]
    assert all(r == int(r) for _, _, r in printed)


def test_capture_video_writes_mp4s_of_the_first_game(smoke):
    videos = smoke.videos()
    assert [v.name for v in videos] == ["rl-video-episode-0.mp4"]  # the first game; the second had not ended
    assert all(v.stat().st_size > 1000 and v.read_bytes()[4:8] == b"ftyp" for v in videos)


def test_same_seed_same_run_other_seed_differs(smoke, tmp_path):
    def history(run: Run) -> list:
        assert run.returncode == 0, run.stderr[-3000:]
        scalars = run.scalars()
        return [scalars[tag] for tag in sorted(PLAYER_TAGS)] + [[v for _, v in scalars["losses/value_loss"]]]

    again = run_script(SCRIPT, *TINY, cwd=tmp_path / "again", env=ONE_THREAD)
    other = run_script(SCRIPT, *TINY, "--seed", "2", cwd=tmp_path / "other", env=ONE_THREAD)
    assert history(again) == history(smoke)  # capturing video does not change what is learned
    assert history(other) != history(smoke)


BAD_INPUT = {
    "unknown game": (("--env-id", "NoSuchGame_v0"), "not a game of pettingzoo.atari"),
    "four players": (("--env-id", "quadrapong_v4"), "needs a two-player game"),
    "odd number of envs": (("--num-envs", "3"), "must be even"),
    "minibatches do not divide the batch": (("--num-minibatches", "3"), "does not divide"),
    "one-transition minibatches with norm-adv": (
        ("--num-envs", "2", "--num-steps", "2", "--num-minibatches", "4"),
        "--norm-adv needs minibatches of at least 2",
    ),
    "missing optional dependency": ((), '.[pettingzoo]"'),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_clear_line(case, tmp_path, monkeypatch):
    """In this process (each case stops before training): no interpreter importing torch and PettingZoo for each."""
    args, expected = BAD_INPUT[case]
    if case == "missing optional dependency":
        monkeypatch.setitem(sys.modules, "supersuit", None)  # `import supersuit` fails as if it were not installed
    run = run_in_process(SCRIPT, *args, cwd=tmp_path)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{SCRIPT}: error: ") and expected in lines[0], run.stderr
    assert not (tmp_path / "runs").exists()


def test_help_and_underscore_flags(tmp_path):
    helped = run_in_process(SCRIPT, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--env-id" in helped.stdout and "--max-cycles" in helped.stdout
    run = run_in_process(SCRIPT, "--env_id", "NoSuchGame_v0", cwd=tmp_path)
    assert run.returncode != 0 and "NoSuchGame_v0" in run.stderr


def test_interrupted_run_keeps_what_it_logged(tmp_path):
    args = ("--num-envs", "4", "--num-steps", "500", "--max-cycles", "400")  # the signal lands mid-rollout
    proc = start_script(SCRIPT, *args, cwd=tmp_path, env=ONE_THREAD)
    printed = []
    for line in proc.stdout:  # wait for the first finished game
        if line.startswith("global_step="):
            printed.append(line)
            break
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    out, err = proc.stdout.read(), proc.stderr.read()
    printed += [line for line in out.splitlines() if line.startswith("global_step=")]
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    scalars = Run(proc.returncode, out, err, tmp_path).scalars()
    logged = sorted((s, r) for p in (0, 1) for s, r in scalars[f"charts/episodic_return-player{p}"])
    assert logged == sorted((int(s), float(r)) for s, _, r in EPISODE_LINE.findall("\n".join(p.strip() for p in printed)))
