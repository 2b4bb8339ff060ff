"""ppo_rnd_envpool.py beyond the contract tests: the observation normaliser seeded by random play, the intrinsic
return that runs across episode ends, the per-env discounted sums that scale the intrinsic reward, and the
share of each minibatch the RND predictor trains on."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cleanrl import ppo_rnd_envpool as rnd
from tests.helpers import run_script


def moments_with_prior(data):
    """Mean and variance of `data` merged at once with the normaliser's prior (mean 0, variance 1, weight 1e-4)."""
    n, prior = len(data), 1e-4
    mean, var, total = data.mean(0), data.var(0), len(data) + prior
    return mean * n / total, (prior + var * n + mean**2 * prior * n / total) / total


def test_running_statistics_merge_batches_exactly():
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, (37, 5, 6)).astype(np.uint8)
    stats = rnd.RunningMeanStd(shape=(5, 6))
    for chunk in np.split(data, [4, 5, 20]):  # batches of unequal sizes, one of a single frame
        stats.update(chunk)
    mean, var = moments_with_prior(data)
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(stats.var, var, rtol=1e-10)
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-5)  # the prior barely counts
    assert stats.count == pytest.approx(37 + 1e-4)


class RecordingEnvs:
    """An envpool env that keeps every observation it returns."""

    def __init__(self, envs):
        self.envs, self.observations, self.done = envs, [], None
        self.action_space, self.num_envs = envs.action_space, envs.num_envs

    def step(self, actions):
        obs, rewards, terminations, truncations, infos = self.envs.step(actions)
        self.observations.append(obs.copy())
        self.done = terminations | truncations
        return obs, rewards, terminations, truncations, infos


def test_observation_normaliser_starts_from_random_play():
    """The script's envs, stepped at random: the normaliser holds the moments of the newest frames of those steps,
    and training continues from the last observation (not the one of the reset before the random play)."""
    pytest.importorskip("envpool")
    envs = RecordingEnvs(rnd.make_env("MontezumaRevenge-v5", 2, 3))
    reset_obs, _ = envs.envs.reset()
    obs_rms = rnd.RunningMeanStd(shape=(84, 84))
    stats = rnd.EpisodeStatistics(2)
    next_obs, next_done = rnd.random_play(envs, 40, obs_rms, stats, np.random.default_rng(0), lambda: None)
    envs.envs.close()
    frames = np.concatenate([obs[:, -1] for obs in envs.observations])  # (80, 84, 84)
    assert len(envs.observations) == 40
    mean, var = moments_with_prior(frames)
    np.testing.assert_allclose(obs_rms.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(obs_rms.var, var, rtol=1e-10)
    assert obs_rms.var.max() > 0  # the frames changed: the normaliser saw real play
    np.testing.assert_array_equal(next_obs, envs.observations[-1])
    np.testing.assert_array_equal(next_done, envs.done)
    assert not np.array_equal(next_obs, reset_obs)


GAE_ARGS = SimpleNamespace(gamma=0.9, int_gamma=0.8, gae_lambda=0.5)


def gae_inputs(terminations, truncations):
    rng = np.random.default_rng(1)
    steps, envs = np.shape(terminations)
    return dict(
        rewards=rng.normal(size=(steps, envs)),
        int_rewards=rng.normal(size=(steps, envs)),
        terminations=np.asarray(terminations, dtype=np.float32),
        truncations=np.asarray(truncations, dtype=np.float32),
        ext_values=rng.normal(size=(steps, envs)),
        int_values=rng.normal(size=(steps, envs)),
        next_values=(rng.normal(size=envs), rng.normal(size=envs)),
        args=GAE_ARGS,
    )


def test_intrinsic_return_runs_across_episode_ends():
    """Novelty is not episodic (the paper, the reference): a lost life or a time limit does not end the intrinsic
    return, while the extrinsic one ends at a termination and bootstraps at a truncation."""
    # env 0 terminates at step 1, env 1 is truncated at step 1; 3 steps
    ended = gae_inputs(terminations=[[0, 0], [1, 0], [0, 0]], truncations=[[0, 0], [0, 1], [0, 0]])
    ext, intrinsic = rnd.advantages(**ended)
    _, intrinsic_no_ends = rnd.advantages(**{**ended, "terminations": np.zeros((3, 2)), "truncations": np.zeros((3, 2))})
    np.testing.assert_allclose(intrinsic, intrinsic_no_ends)
    # the intrinsic advantage of step 0 sees the intrinsic rewards after the end
    r, v, (_, v_next), g, lam = ended["int_rewards"], ended["int_values"], ended["next_values"], 0.8, 0.5
    deltas = [r[0] + g * v[1] - v[0], r[1] + g * v[2] - v[1], r[2] + g * v_next - v[2]]
    np.testing.assert_allclose(intrinsic[0], deltas[0] + g * lam * (deltas[1] + g * lam * deltas[2]))

    r, v, g = ended["rewards"], ended["ext_values"], 0.9
    # env 0: no value after its termination, and step 0 sees nothing past step 1
    np.testing.assert_allclose(ext[1, 0], r[1, 0] - v[1, 0])
    np.testing.assert_allclose(ext[0, 0], r[0, 0] + g * v[1, 0] - v[0, 0] + g * 0.5 * ext[1, 0])
    # env 1: cut by a time limit, its last observation's value is credited
    np.testing.assert_allclose(ext[1, 1], r[1, 1] + g * v[2, 1] - v[1, 1])
    np.testing.assert_allclose(ext[0, 1], r[0, 1] + g * v[1, 1] - v[0, 1] + g * 0.5 * ext[1, 1])


def test_discounted_sums_run_over_time_for_each_env():
    """The intrinsic-reward scale comes from each env's discounted sum over its steps, carried between rollouts
    (a loop that ran the sum across the envs of one step instead would fail here)."""
    rewards = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    running = np.zeros(2)
    sums = rnd.discounted_sums(rewards, running, 0.5)
    np.testing.assert_allclose(sums, [[1, 10], [2.5, 25], [4.25, 42.5]])
    np.testing.assert_allclose(running, [4.25, 42.5])
    np.testing.assert_allclose(rnd.discounted_sums(rewards[:1], running, 0.5), [[3.125, 31.25]])


@pytest.mark.parametrize("proportion", [0.25, 1.0])
def test_predictor_trains_on_its_share_of_the_minibatch(proportion):
    torch.manual_seed(0)
    model = rnd.RNDModel()
    frames = torch.randn(160, 1, 84, 84, requires_grad=True)
    loss = model.predictor_loss(frames, proportion)
    loss.backward()
    trained = frames.grad.abs().sum((1, 2, 3)) > 0  # the frames the loss reads
    assert 0.15 * 160 <= trained.sum() <= 0.35 * 160 if proportion < 1 else trained.all()
    with torch.no_grad():  # the loss is the mean squared error on exactly those frames
        chosen = frames[trained]
        assert loss.item() == pytest.approx((model.predictor(chosen) - model.target(chosen)).pow(2).mean().item(), rel=1e-5)
    assert all(p.grad is None for p in model.target.parameters())  # the target stays as it was drawn
    assert all(p.grad is not None for p in model.predictor.parameters())


def test_curiosity_is_half_the_squared_feature_error():
    torch.manual_seed(0)
    model = rnd.RNDModel()
    frames = torch.randn(3, 1, 84, 84)
    with torch.no_grad():
        expected = 0.5 * ((model.target(frames) - model.predictor(frames)) ** 2).sum(1)
        np.testing.assert_allclose(model.curiosity(frames), expected, rtol=1e-6)
        assert (expected > 0).all()


def test_visited_places_count_rooms_and_cells_from_the_ram():
    from cleanrl_utils.runtime.visited_places import VisitedPlaces

    places = VisitedPlaces("MontezumaRevenge-v5", 3)
    ram = np.zeros((3, 128), dtype=np.uint8)
    ram[:, 3] = [1, 1, 2]  # rooms
    ram[:, 42] = [77, 79, 77]  # x: the first two envs share an 8-pixel cell
    ram[:, 43] = [235, 235, 235]
    places.update(ram)
    assert places.rooms == {1, 2} and places.places == {(1, 9, 29), (2, 9, 29)}
    ram[0, 42] = 100  # env 0 moves to a new cell; the others stay
    places.update(ram)
    assert len(places.places) == 3
    # per game: env 0 reached 2 places, env 2 one; env 0's next game counts from nothing, the run's total stays
    assert places.end_games(np.array([0, 2])) == [2, 1]
    places.update(ram)
    assert places.end_games(np.array([0, 1])) == [1, 1] and len(places.places) == 3
    # rooms per game: env 2 is in room 2; env 0 moves there too before its game ends
    places.update(ram)
    ram[0, 3] = 2
    places.update(ram)
    assert places.rooms_of(np.array([0, 1, 2])) == [2, 1, 1]
    # a game whose RAM layout is unknown counts nothing, whatever its RAM holds
    unknown = VisitedPlaces("Breakout-v5", 3)
    unknown.update(ram)
    assert not unknown.known and not unknown.places and unknown.end_games(np.array([0])) == [0]
    assert VisitedPlaces("MontezumaRevengeNoFrameskip-v4", 1).known


def test_visited_places_checkpointed_without_the_games_under_way(tmp_path):
    from cleanrl_utils.runtime import plain_data
    from cleanrl_utils.runtime.visited_places import VisitedPlaces

    places = VisitedPlaces("MontezumaRevenge-v5", 2)
    ram = np.zeros((2, 128), dtype=np.uint8)
    ram[:, 3], ram[:, 42], ram[:, 43] = [1, 4], [10, 200], [150, 160]
    places.update(ram)
    with open(tmp_path / "saved", "wb") as saved:
        plain_data.write(saved, places.state_dict())
    resumed = VisitedPlaces("MontezumaRevenge-v5", 2)
    resumed.update(ram[::-1].copy())  # a game under way in the fresh object: forgotten by the load
    resumed.load_state_dict(plain_data.read(tmp_path / "saved"))
    assert resumed.rooms == {1, 4} and resumed.places == {(1, 1, 18), (4, 25, 20)}
    assert resumed.end_games(np.array([0, 1])) == [0, 0]  # the resumed run's games start anew
    for bad in (
        {"rooms": [1]},
        {"rooms": [256], "places": []},
        {"rooms": [1], "places": [[1, 2]]},
        {"rooms": "1", "places": []},
    ):
        with pytest.raises(ValueError):
            resumed.load_state_dict(bad)
    assert resumed.rooms == {1, 4}  # a refused state changes nothing


@pytest.mark.extended  # 18 s of one core: CI runs it after the quick run
def test_montezuma_run_logs_the_places_it_reached(tmp_path):
    """A real run logs, each iteration, how many rooms and places its games have reached so far, and at each
    game's end how many places that game reached."""
    pytest.importorskip("envpool")
    from cleanrl_utils.tensorboard_reader import read_scalars

    args = ("--env-id", "MontezumaRevenge-v5", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256")
    run = run_script("ppo_rnd_envpool.py", *args, "--num-iterations-obs-norm-init", "1", cwd=tmp_path, timeout=240)
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    scalars = read_scalars(run_dir)
    places = [value for _, value in scalars["charts/visited_places"]]
    assert [step for step, _ in scalars["charts/visited_places"]] == [128, 256]  # one value per iteration
    assert places == sorted(places) and places[0] >= 2  # a run of 128 steps moves the player: more than one cell
    assert [value for _, value in scalars["charts/visited_rooms"]][-1] >= 1
    # seed 1's first game ends at step 240 (a random Montezuma game is short when the player falls)
    games = scalars["charts/episode_visited_places"]
    assert [step for step, _ in games] == [step for step, _ in scalars["charts/episodic_return"]] == [240]
    assert 2 <= games[0][1] <= places[-1]


@pytest.mark.extended  # ~40 s of one core: CI runs it after the quick run
def test_resumed_run_keeps_learning_and_places_and_plays_new_games(tmp_path):
    """envpool cannot save its games: a resumed run restores the agent, the predictor (and its fixed target), the
    optimiser, both normalisers, the discounted intrinsic sums and the rooms and places reached, skips the random
    play, and starts new games from other env seeds. 4 iterations of 4 envs x 32 steps, a checkpoint every 2,
    resumed twice from its first checkpoint (step 256), each time from a copy of the run folder."""
    pytest.importorskip("envpool")
    import shutil

    from cleanrl_utils.runtime import checkpoint as ckpt
    from cleanrl_utils.tensorboard_reader import read_scalars
    from tests.helpers import run_in_process

    args = ("--num-envs", "4", "--num-steps", "32", "--total-timesteps", "512", "--num-iterations-obs-norm-init", "1")
    first = run_in_process("ppo_rnd_envpool.py", *args, "--checkpoint-frequency", "2", cwd=tmp_path / "first", timeout_s=300)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = ckpt.read(first.run_dir / "checkpoints" / "checkpoint_256.pt")
    logs = []
    for copy in ("a", "b"):
        shutil.copytree(tmp_path / "first", tmp_path / copy)
        run_dir = tmp_path / copy / "runs" / first.run_dir.name
        resumed = run_in_process(
            "ppo_rnd_envpool.py", "--resume", str(run_dir / "checkpoints" / "checkpoint_256.pt"), cwd=tmp_path / copy,
            timeout_s=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "random steps" not in resumed.stdout  # the normaliser came from the checkpoint
        logs.append({tag: series for tag, series in read_scalars(run_dir).items() if tag != "charts/SPS"})
        # the optimiser went on from its state: 4 iterations x 4 epochs x 4 minibatches of Adam steps
        state = ckpt.read(run_dir / "checkpoints" / "checkpoint_512.pt")
        assert {float(param["step"]) for param in state["optimizer"]["state"].values()} == {64.0}
        assert state["rms"][0][2] > saved["rms"][0][2]  # the frame statistics went on counting
        assert set(map(tuple, state["visited_places"]["places"])) >= set(map(tuple, saved["visited_places"]["places"]))
    assert logs[0] == logs[1], "resuming the same checkpoint twice gives the same run"
    uninterrupted = {tag: series for tag, series in read_scalars(first.run_dir).items() if tag != "charts/SPS"}
    assert {tag: [(s, v) for s, v in series if s <= 256] for tag, series in logs[0].items()} == {
        tag: [(s, v) for s, v in series if s <= 256] for tag, series in uninterrupted.items()
    }, "what was logged up to the checkpoint stays"
    assert [s for s, _ in logs[0]["losses/fwd_loss"]] == [128, 256, 384, 512], "it trained to the end"
    # new games: the values it acts on differ from the uninterrupted run's after the checkpoint
    assert logs[0]["losses/value_loss"][2:] != uninterrupted["losses/value_loss"][2:]
    # the places reached carry over: never fewer than at the checkpoint
    at_checkpoint = dict(uninterrupted["charts/visited_places"])[256]
    assert all(value >= at_checkpoint for step, value in logs[0]["charts/visited_places"] if step > 256)
