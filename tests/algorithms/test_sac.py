"""sac_continuous_action.py: the squashed Gaussian's log-density, the action bounds, the temperature, the evaluator.

(The documented tags, determinism and bad input are in test_script_contract.py; resuming a killed run in
test_resume.py; here, the losses logged right after a resume.)
"""

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import sac_continuous_action as sac
from cleanrl_utils.runtime.evals.continuous import evaluate_sac
from tests.helpers import Run, returns_played_by_hand, run_in_process

# the runs are made in this process: an interpreter importing torch costs more than one of them
SCRIPT = "sac_continuous_action.py"
TINY = ("--total-timesteps", "400", "--learning-starts", "100", "--batch-size", "32", "--buffer-size", "1000")


def spaces(low, high, obs_dim=4) -> SimpleNamespace:
    """What the networks read of a vector env: its single-env spaces."""
    return SimpleNamespace(
        single_observation_space=gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
        single_action_space=gym.spaces.Box(np.array(low, np.float32), np.array(high, np.float32)),
    )


def constant_actor(envs, mean: float, log_std: float) -> sac.Actor:
    """An actor whose Gaussian, before squashing, is N(mean, exp(log_std)^2) in every state and dimension."""
    actor = sac.Actor(envs)
    with torch.no_grad():
        for layer in (actor.fc_mean, actor.fc_logstd):
            layer.weight.zero_()
        actor.fc_mean.bias.fill_(mean)
        # log_std = -5 + 3.5 (tanh(raw) + 1)  <=>  raw = atanh((log_std + 5) / 3.5 - 1)
        actor.fc_logstd.bias.fill_(float(np.arctanh((log_std + 5) / 3.5 - 1)))
    return actor


def test_log_prob_is_a_density_over_asymmetric_bounds(monkeypatch):
    """exp(log_prob) integrates to 1 over the action range [-1, 3]: the tanh and the scale corrections are right."""
    actor = constant_actor(spaces([-1.0], [3.0]), mean=0.4, log_std=-0.3)
    noise = torch.linspace(-9, 9, 40001).unsqueeze(1)  # every pre-squash value out to 9 standard deviations
    # the Gaussian's draws are this grid: u = mean + std * noise, as Normal.rsample would make it
    monkeypatch.setattr(torch.distributions.Normal, "rsample", lambda self, shape=(): self.loc + self.scale * noise)
    with torch.no_grad():
        action, log_prob, _ = actor.get_action(torch.zeros(len(noise), 4))
    a, density = action.double().squeeze(1).numpy(), log_prob.double().exp().squeeze(1).numpy()
    assert np.all(np.diff(a) >= 0) and a[0] >= -1 and a[-1] <= 3
    assert np.trapezoid(density, a) == pytest.approx(1.0, abs=2e-3)
    # without the change of variables (the Gaussian's own density) the area would be far from 1
    gaussian = np.exp(-0.5 * noise.squeeze(1).double().numpy() ** 2 + 0.3) / np.sqrt(2 * np.pi)
    assert abs(np.trapezoid(gaussian, a) - 1) > 0.3


def test_log_prob_matches_change_of_variables_with_a_numeric_jacobian():
    """log pi(a) = log N(u; mean, std) - sum_i log |d a_i / d u_i|, the derivative taken numerically in float64."""
    envs = spaces([-1.0, 10.0, -0.2], [3.0, 10.5, 0.0])
    torch.manual_seed(0)
    actor = sac.Actor(envs)
    obs = torch.randn(64, 4) * 3
    torch.manual_seed(1)
    with torch.no_grad():
        _, log_prob, _ = actor.get_action(obs)
        mean, log_std = actor(obs)
    torch.manual_seed(1)
    u = (mean + log_std.exp() * torch.randn_like(mean)).double()  # the same draw
    mean, std = mean.double(), log_std.double().exp()
    scale, bias = actor.action_scale.double(), actor.action_bias.double()

    def squash(x):
        return torch.tanh(x) * scale + bias

    h = 1e-6
    jacobian = (squash(u + h) - squash(u - h)) / (2 * h)  # diagonal: each action depends on its own u
    expected = torch.distributions.Normal(mean, std).log_prob(u).sum(1) - jacobian.log().sum(1)
    keep = (jacobian > 1e-8).all(1)  # where tanh saturates the numeric derivative underflows; skip those rows
    assert keep.sum() > 32
    assert log_prob.squeeze(1).double()[keep] == pytest.approx(expected[keep].numpy(), abs=1e-3)


def test_actions_stay_in_asymmetric_bounds_and_mean_maps_to_centre():
    envs = spaces([-1.0, 10.0], [3.0, 10.5])
    low, high = torch.tensor([-1.0, 10.0]), torch.tensor([3.0, 10.5])
    torch.manual_seed(0)
    actor = sac.Actor(envs)
    with torch.no_grad():
        for layer in (actor.fc1, actor.fc2, actor.fc_mean):
            layer.weight.mul_(20)  # huge pre-squash values: tanh saturates, bounds must still hold
        action, log_prob, mean_action = actor.get_action(torch.randn(500, 4) * 10)
    for a in (action, mean_action):
        assert torch.all(a >= low) and torch.all(a <= high)
    assert torch.isfinite(log_prob).all()
    assert (action[:, 0] < 1).any() and (action[:, 0] > 1).any(), "both halves of [-1, 3] are reached"
    centred = constant_actor(envs, mean=0.0, log_std=-1.0)
    with torch.no_grad():
        _, _, mean_action = centred.get_action(torch.zeros(1, 4))
    assert mean_action[0].tolist() == pytest.approx([1.0, 10.25])


def test_log_std_is_squashed_into_its_range():
    actor = sac.Actor(spaces([-1.0], [1.0]))
    with torch.no_grad():
        actor.fc_logstd.weight.normal_(0, 100)
        _, log_std = actor(torch.randn(1000, 4))
    assert log_std.min() >= sac.LOG_STD_MIN and log_std.max() <= sac.LOG_STD_MAX
    assert log_std.min() < -4.9 and log_std.max() > 1.9


@pytest.mark.parametrize(("entropy", "direction"), [(-6.0, +1), (0.0, -1)])
def test_temperature_rises_below_the_target_entropy_and_falls_above(entropy, direction):
    """Target entropy -3 (3 action dims): an entropy of -6 is too little (alpha up), 0 is plenty (alpha down)."""
    log_alpha = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([log_alpha], lr=0.01)
    log_pi = torch.full((256, 1), -entropy, requires_grad=True)  # entropy estimate: -mean(log_pi)
    for _ in range(5):
        optimizer.zero_grad()
        sac.temperature_loss(log_alpha, log_pi, target_entropy=-3.0).backward()
        optimizer.step()
    assert np.sign(log_alpha.item()) == direction
    assert log_pi.grad is None, "the temperature's loss must not push on the actor"


def alpha_series(run) -> list[float]:
    return [value for _, value in run.scalars()["losses/alpha"]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Run]:
    """The two short runs this module's tests read: on Pendulum, the temperature tuned, with --save-model; and on
    Hopper (whose fresh policies fall within a few dozen steps), 3 envs, alpha fixed at 0.2."""
    pendulum = ("--env-id", "Pendulum-v1", *TINY, "--save-model")
    three_envs = (*TINY, "--num-envs", "3", "--no-autotune", "--alpha", "0.2")
    runs = {
        "pendulum": run_in_process(SCRIPT, *pendulum, cwd=tmp_path_factory.mktemp("sac"), timeout_s=600),
        "three_envs": run_in_process(SCRIPT, *three_envs, cwd=tmp_path_factory.mktemp("sac_three_envs"), timeout_s=600),
    }
    for run in runs.values():
        assert run.returncode == 0, run.stderr[-3000:]
    return runs


@pytest.mark.extended  # 5 s of one core: CI runs it after the quick run
def test_autotune_moves_alpha_and_no_autotune_keeps_it(trained):
    tuned, fixed = trained["pendulum"], trained["three_envs"]
    # alpha starts at 1; Pendulum's fresh policy is far more random than the target entropy -1, so alpha falls
    tuned_alpha = alpha_series(tuned)
    assert len(tuned_alpha) >= 2 and 0 < tuned_alpha[-1] < tuned_alpha[0] < 1
    assert "losses/alpha_loss" in tuned.scalars()
    assert alpha_series(fixed) == pytest.approx([0.2] * len(alpha_series(fixed))) and alpha_series(fixed)
    assert "losses/alpha_loss" not in fixed.scalars()


def test_autotune_resample_rates_the_entropy_on_a_new_sample(tmp_path, monkeypatch):
    """--autotune-resample: after each actor step, one more sample of the batch, without gradients, for alpha's loss."""
    counts = {}

    def counting(rsample):
        def wrapped(self, *args, **kwargs):
            if self.loc.shape[0] == 32:  # a sampled batch (acting samples one observation)
                key = (counts["run"], torch.is_grad_enabled())
                counts[key] = counts.get(key, 0) + 1
            return rsample(self, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(torch.distributions.Normal, "rsample", counting(torch.distributions.Normal.rsample))
    runs = {}
    for name, flags in (("default", ()), ("resample", ("--autotune-resample",))):
        counts["run"] = name
        runs[name] = run_in_process(SCRIPT, "--env-id", "Pendulum-v1", *TINY, *flags, cwd=tmp_path / name, timeout_s=600)
        assert runs[name].returncode == 0, runs[name].stderr[-3000:]
    actor_steps = counts["default", True]  # with gradients: the actor's updates, the same in both runs
    assert actor_steps > 0 and counts["resample", True] == actor_steps
    # without gradients: the critics' targets, and with the flag one more per actor step
    assert counts["resample", False] - counts["default", False] == actor_steps
    assert alpha_series(runs["resample"]) != alpha_series(runs["default"])


def test_several_envs_count_environment_steps(trained):
    scalars = trained["three_envs"].scalars()
    episode_steps = [step for step, _ in scalars["charts/episodic_return"]]
    assert episode_steps and all(step % 3 == 0 for step in episode_steps) and max(episode_steps) < 400
    # losses once per 100 environment steps, after learning starts, up to the budget
    assert [step for step, _ in scalars["losses/qf_loss"]] == [102, 201, 300]


@pytest.mark.extended  # 7 s of one core: CI runs it after the quick run
def test_resumed_run_logs_the_same_losses_between_actor_updates(tmp_path):
    """A run resumed at a step where the actor is not updated logs the losses the uninterrupted run logs.

    The actor (and alpha) update every 3rd step, at steps divisible by 3; the checkpoint written after step 199
    is resumed at step 200, a log step: its row holds the actor and alpha losses of step 198, which only the
    checkpoint can give back.
    """
    from cleanrl_utils.runtime import checkpoint as ckpt

    args = ("--env-id", "Pendulum-v1", "--total-timesteps", "500", "--learning-starts", "100", "--batch-size", "32",
            "--buffer-size", "1000", "--policy-frequency", "3", "--checkpoint-frequency", "200")  # fmt: skip
    first = run_in_process(SCRIPT, *args, cwd=tmp_path, timeout_s=600)
    assert first.returncode == 0, first.stderr[-3000:]
    expected = {tag: rows for tag, rows in first.scalars().items() if tag.startswith("losses/")}
    assert [step for step, _ in expected["losses/actor_loss"]] == [200, 300, 400]  # no row at 100: learning starts after it
    assert set(expected) >= {"losses/actor_loss", "losses/alpha_loss"}
    oldest = ckpt.checkpoints(first.run_dir / ckpt.CHECKPOINT_DIR)[0]
    assert oldest.name == "checkpoint_200.pt"

    resumed = run_in_process(SCRIPT, "--resume", str(oldest), cwd=tmp_path, timeout_s=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # the run folder now shows the resumed run from step 200 on (the old events after the checkpoint purged)
    got = {tag: rows for tag, rows in first.scalars().items() if tag.startswith("losses/")}
    assert got.keys() == expected.keys()
    for tag in expected:
        assert got[tag] == expected[tag], f"{tag}: steps and values differ after resuming at step 200"


def test_discrete_actions_point_to_dqn(tmp_path):
    run = run_in_process(SCRIPT, "--env-id", "CartPole-v1", cwd=tmp_path)
    assert run.returncode == 2 and "see dqn.py" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_saved_model_holds_actor_and_critics(trained):
    run = trained["pendulum"]
    model_path = run.run_dir / "sac_continuous_action.cleanrl_model"
    saved = torch.load(model_path, weights_only=True)
    assert set(saved) == {"actor", "qf1", "qf2"}
    envs = gym.vector.SyncVectorEnv([sac.make_env("Pendulum-v1", 0, False, "unused")])
    sac.Actor(envs).load_state_dict(saved["actor"])
    sac.SoftQNetwork(envs).load_state_dict(saved["qf1"])
    assert len(run.scalars()["eval/episodic_return"]) == 10


def test_evaluation_plays_the_mean_action(trained):
    """The evaluator's episodes equal a hand-written loop over the raw env with tanh(mean) scaled to [-2, 2]."""
    model_path = trained["pendulum"].run_dir / "sac_continuous_action.cleanrl_model"
    returns = evaluate_sac(str(model_path), sac.make_env, "Pendulum-v1", 2, "unused", sac.Actor, capture_video=False, seed=3)
    envs = gym.vector.SyncVectorEnv([sac.make_env("Pendulum-v1", 0, False, "unused")])
    actor = sac.Actor(envs)
    actor.load_state_dict(torch.load(model_path, weights_only=True)["actor"])

    @torch.no_grad()
    def act(obs):
        mean, _ = actor(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0))
        return 2.0 * torch.tanh(mean)[0].numpy()

    assert returns == pytest.approx(returns_played_by_hand("Pendulum-v1", act, 2, seed=3), rel=1e-5)
    sampled = evaluate_sac(str(model_path), sac.make_env, "Pendulum-v1", 2, "unused", sac.Actor,
                       capture_video=False, seed=3, deterministic=False)  # fmt: skip
    assert sampled != returns
