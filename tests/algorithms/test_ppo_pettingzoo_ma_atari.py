"""ppo_pettingzoo_ma_atari.py: self-play on PettingZoo's Pong, checked the way the script contract checks the others.

Its episode tags are per player (`charts/episodic_return-player0/1`) and its evaluation counts points
against a random player, so the generic rows of test_script_contract.py do not fit it; this file asserts
the same promises for its tags. Games are cut short with --max-cycles (400 emulator frames = 100 agent
steps) so episodes end quickly. The runs use one CPU thread: on a busy machine PyTorch's thread pool makes
the CNN several times slower.
"""

import re
import shutil
import signal
import sys

import numpy as np
import pytest
import torch

from cleanrl_utils.runtime.evals.special import points_against_random
from tests.contract.test_script_contract import PPO_TAGS
from tests.helpers import Run, read_wandb_history_keys, run_in_process, run_script, script_env, start_script

SCRIPT = "ppo_pettingzoo_ma_atari.py"
TINY = ("--num-envs", "4", "--num-steps", "50", "--total-timesteps", "400", "--max-cycles", "400")
PLAYER_TAGS = {f"charts/episodic_{kind}-player{p}" for kind in ("return", "length") for p in (0, 1)}
# PPO's tags, with each player's returns and lengths instead of the single-agent ones
TAGS = PLAYER_TAGS | (PPO_TAGS - {"charts/episodic_return", "charts/episodic_length"})
ONE_THREAD = script_env(OMP_NUM_THREADS="1")
EPISODE_LINE = re.compile(r"^global_step=(\d+), player=([01]), episodic_return=(-?[\d.]+)$", re.M)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Run:
    cwd = tmp_path_factory.mktemp("pettingzoo")
    track = ("--track", "--wandb-project-name", "tests")
    snapshots = ("--snapshot-frequency", "1")  # the policy after each of the 2 iterations
    run = run_script(SCRIPT, *TINY, "--save-model", "--capture-video", *track, *snapshots, cwd=cwd, env=ONE_THREAD)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_run_logs_every_documented_tag_and_nothing_else(smoke):
    assert re.fullmatch(r"pong_v3__ppo_pettingzoo_ma_atari__1__\d+", smoke.run_dir.name)
    assert "|num_envs|4|" in smoke.texts()["hyperparameters"]
    assert set(smoke.scalars()) == TAGS | {"eval/episodic_return"}
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


def test_saved_model_scores_ten_games_against_a_random_player(smoke):
    from cleanrl.ppo_pettingzoo_ma_atari import Agent, make_vector_env
    from cleanrl_utils.runtime.evals.special import make_game

    model = smoke.run_dir / "ppo_pettingzoo_ma_atari.cleanrl_model"
    envs = make_game(make_vector_env, "pong_v3", 400)
    Agent(envs).load_state_dict(torch.load(model, weights_only=True))  # the weights of the script's network
    envs.close()
    evals = smoke.scalars()["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))
    assert all(points == int(points) >= 0 for _, points in evals)  # points won per game, 100 agent steps each
    printed = re.findall(r"^eval_episode=(\d), episodic_return=([\d.]+)$", smoke.stdout, re.M)
    assert [(int(i), float(r)) for i, r in printed] == evals


def test_snapshots_keep_the_policy_of_each_iteration(smoke):
    """--snapshot-frequency 1: the policy after iterations 1 and 2 (global steps 200 and 400), as model files of the
    script's network; the last one is the final model (the smoke run's other reruns, without snapshots, log the same
    run: test_same_seed_same_run_other_seed_differs)."""
    from cleanrl.ppo_pettingzoo_ma_atari import Agent, make_vector_env
    from cleanrl_utils.runtime.evals.special import make_game

    names = sorted(p.name for p in smoke.run_dir.glob("ppo_pettingzoo_ma_atari-*.cleanrl_model"))
    assert names == ["ppo_pettingzoo_ma_atari-200.cleanrl_model", "ppo_pettingzoo_ma_atari-400.cleanrl_model"]
    envs = make_game(make_vector_env, "pong_v3", 400)
    first, last = (torch.load(smoke.run_dir / name, weights_only=True) for name in names)
    Agent(envs).load_state_dict(first)
    envs.close()
    final = torch.load(smoke.run_dir / "ppo_pettingzoo_ma_atari.cleanrl_model", weights_only=True)
    assert all(torch.equal(last[k], final[k]) for k in final)
    assert any(not torch.equal(first[k], last[k]) for k in final), "the second iteration changed the policy"


def test_the_network_sees_frames_and_player_indicators_in_0_1():
    """SuperSuit's agent_indicator now marks the observed player with 255 (the observation's maximum), where the
    original CleanRL's version marked it with 1: the network divides all six channels by 255, so it reads the frames
    in [0, 1] and the indicators as 0/1, as the original's network did."""
    from cleanrl.ppo_pettingzoo_ma_atari import Agent, make_vector_env
    from cleanrl_utils.runtime.evals.special import make_game

    envs = make_game(make_vector_env, "pong_v3", 400)
    obs, _ = envs.reset(seed=0)
    envs.close()
    assert {tuple(np.unique(obs[i, :, :, 4:])) for i in (0, 1)} == {(0, 255)}  # the env's own marks
    agent, seen = Agent(envs), []
    agent.network[0].register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    agent.act(torch.as_tensor(obs))
    (x,) = seen  # (2 players, 6 channels, 84, 84)
    assert x.min() >= 0 and x.max() <= 1 and x[:, :4].max() > 0
    assert [x[i, 4:].flatten(1).amax(1).tolist() for i in (0, 1)] == [[1.0, 0.0], [0.0, 1.0]]
    assert set(torch.unique(x[:, 4:]).tolist()) == {0.0, 1.0}


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_a_game_played_again_from_its_actions_is_the_game_that_was_played():
    """What a resumed run does with its checkpoint's games: fresh envs, reset, and each game copy's actions since
    its last reset played again give the frames, returns and lengths (and the emulators' RAM) of the games that
    were played, across a reset in the middle; and both go on the same."""
    from cleanrl.ppo_pettingzoo_ma_atari import make_vector_env, start_games

    rng = np.random.default_rng(0)
    played = make_vector_env("pong_v3", 4, 600, False)  # 2 game copies, games cut after 150 agent steps
    obs, _ = played.reset(seed=5)
    game_actions, returns, lengths = [[], []], np.zeros(4), np.zeros(4, dtype=np.int64)
    for _ in range(400):
        actions = rng.integers(0, 6, 4)
        obs, rewards, terminations, truncations, _ = played.step(actions)
        over = (terminations | truncations).astype(bool)
        returns, lengths = np.where(over, 0, returns + rewards), np.where(over, 0, lengths + 1)
        game_actions = [[] if over[2 * k] else [*moves, actions[2 * k : 2 * k + 2]] for k, moves in enumerate(game_actions)]
    assert [len(moves) for moves in game_actions] == [100, 100]  # two resets (at 150 and 300 steps) behind each copy
    assert returns.any(), "points were scored in the games under way"

    again = make_vector_env("pong_v3", 4, 600, False)
    replayed_obs, replayed_returns, replayed_lengths = start_games(again, 5, game_actions)
    np.testing.assert_array_equal(replayed_obs, obs)
    np.testing.assert_array_equal(replayed_returns, returns)
    np.testing.assert_array_equal(replayed_lengths, lengths)
    rams = [[game.par_env.unwrapped.ale.getRAM() for game in envs.vec_envs] for envs in (played, again)]
    assert all(np.array_equal(a, b) for a, b in zip(*rams))
    for _ in range(200):  # past the next cut, at 150 steps into these games
        actions = rng.integers(0, 6, 4)
        for a, b in zip(played.step(actions)[:4], again.step(actions)[:4]):
            np.testing.assert_array_equal(a, b)
    played.close()
    again.close()


@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_a_checkpoint_whose_games_do_not_fit_is_one_line(tmp_path):
    """The games of a checkpoint are played again on --resume: actions this game does not have, or another number of
    game copies, are refused in one line before any of them is played."""
    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.runtime import plain_data

    first = run_in_process(SCRIPT, *TINY, "--checkpoint-frequency", "1", cwd=tmp_path / "first", timeout_s=300)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)[0]
    state = plain_data.read(saved)
    assert [len(moves) for moves in state["game_actions"]] == [50, 50]  # both copies 50 steps into their games
    for name, game_actions in {
        "unknown action": [np.array([[0, 99]]), np.zeros((0, 2), dtype=np.int64)],
        "three game copies": [np.zeros((0, 2), dtype=np.int64)] * 3,
        "three players": [np.zeros((4, 3), dtype=np.int64)] * 2,
    }.items():
        cwd = tmp_path / name.replace(" ", "_")  # a copy of the run each: a refused resume keeps its folder's lock here
        shutil.copytree(tmp_path / "first", cwd)
        bad = cwd / "bad.pt"
        with open(bad, "wb") as f:
            plain_data.write(f, {**state, "game_actions": game_actions})
        run = run_in_process(SCRIPT, "--resume", str(bad), cwd=cwd)
        lines = run.stderr.strip().splitlines()
        # another number of copies is refused by the list's length (`exp.saved_list`), the rest by the script's check
        one_line = len(lines) == 1 and lines[0].startswith(f"{SCRIPT}: error: --resume: ") and "game" in lines[0]
        assert run.returncode == 2 and one_line, (
            name,
            run.stderr[-2000:],
        )


def test_capture_video_writes_mp4s_of_the_first_game(smoke):
    videos = smoke.videos()
    assert [v.name for v in videos] == ["rl-video-episode-0.mp4"]  # the first game; the second had not ended
    # the evaluation films its games 0, 1 and 8, as training would
    eval_videos = smoke.videos("-eval")
    assert [v.name for v in eval_videos] == [f"rl-video-episode-{i}.mp4" for i in (0, 1, 8)]
    assert all(v.stat().st_size > 1000 and v.read_bytes()[4:8] == b"ftyp" for v in videos + eval_videos)


@pytest.mark.extended  # 16 s of one core: CI runs it after the quick run
def test_same_seed_same_run_other_seed_differs(smoke, tmp_path):
    def history(run: Run) -> list:
        assert run.returncode == 0, run.stderr[-3000:]
        scalars = run.scalars()
        return [scalars[tag] for tag in sorted(PLAYER_TAGS)] + [[v for _, v in scalars["losses/value_loss"]]]

    # in this process (tests/conftest.py gives it the scripts' one thread): no new interpreter for each run
    again = run_in_process(SCRIPT, *TINY, cwd=tmp_path / "again", timeout_s=300)
    other = run_in_process(SCRIPT, *TINY, "--seed", "2", cwd=tmp_path / "other", timeout_s=300)
    assert history(again) == history(smoke)  # capturing video, tracking and evaluating do not change what is learned
    assert history(other) != history(smoke)


EVAL_CYCLES = 400  # evaluation games cut after 100 agent steps (~1 s): random players score a point every ~35 steps


def recording(log: list):
    """The script's make_vector_env, each step of its envs appended to `log` as (actions, rewards, game over)."""
    from cleanrl.ppo_pettingzoo_ma_atari import make_vector_env

    def make(*args):
        envs = make_vector_env(*args)
        step = envs.step

        def logged_step(actions):
            out = step(actions)
            log.append((np.array(actions), out[1].copy(), bool((out[2] | out[3]).all())))
            return out

        envs.step = logged_step
        return envs

    return make


def games_of(log: list) -> list[list]:
    """The logged steps split into games."""
    games, game = [], []
    for actions, rewards, over in log:
        game.append((actions, rewards))
        if over:
            games.append(game)
            game = []
    return games


@pytest.mark.extended  # 7 s of one core: CI runs it after the quick run
def test_random_against_random_is_reproducible_and_alternates_sides():
    log, again, other = [], [], []
    points = points_against_random(recording(log), "pong_v3", None, 2, seed=3, max_cycles=EVAL_CYCLES)
    assert points == points_against_random(recording(again), "pong_v3", None, 2, seed=3, max_cycles=EVAL_CYCLES)
    assert all((a == b).all() for (a, *_), (b, *_) in zip(log, again, strict=True))  # the same buttons, step for step
    points_against_random(recording(other), "pong_v3", None, 1, seed=4, max_cycles=80)  # 20 steps of another seed
    assert any((a != b).any() for (a, *_), (b, *_) in zip(log, other))
    games = games_of(log)
    assert [len(game) for game in games] == [EVAL_CYCLES // 4] * 2  # each game cut by max_cycles, both players together
    # the measured side is player 0 in game 0 and player 1 in game 1; its positive rewards are its points
    by_side = [[sum(rewards[side] > 0 for _, rewards in game) for side in (0, 1)] for game in games]
    assert points == [float(sides[g % 2]) for g, sides in enumerate(by_side)]
    assert sum(points) > 0 and any(a != b for a, b in by_side)  # points were scored, not alike for both sides


def test_fixed_action_policy_against_random_counts_its_points():
    fire = 1  # Pong's FIRE: the policy serves whenever it has the ball, and otherwise stands still
    log, sides_seen = [], []

    def act(obs: np.ndarray) -> np.ndarray:
        sides_seen.append(tuple(obs[0, 0, 0, 4:]))  # the player-indicator channels: (255, 0) for player 0
        return np.full(len(obs), fire)

    points = points_against_random(recording(log), "pong_v3", act, 2, seed=0, max_cycles=EVAL_CYCLES)
    assert len(points) == 2 and all(p == int(p) >= 0 for p in points)
    steps = EVAL_CYCLES // 4
    assert sides_seen == [(255, 0)] * steps + [(0, 255)] * steps  # side 0 in game 0, side 1 in game 1
    for g, game in enumerate(games_of(log)):
        assert all(actions[g % 2] == fire for actions, _ in game)  # the policy's buttons, on its side
        assert len({int(actions[1 - g % 2]) for actions, _ in game}) > 1  # the opponent's are random
        assert points[g] == sum(rewards[g % 2] > 0 for _, rewards in game)


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
