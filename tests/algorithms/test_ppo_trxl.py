"""ppo_trxl/ppo_trxl.py: the episodic memory window, the cached hidden states, MiniGrid, and enjoy.py.

The contract checks (ProofofMemory-v0 smoke run, tags, determinism, bad input...) are its row in
test_script_contract.py.
"""

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl.ppo_trxl import ppo_trxl
from cleanrl_utils.runtime.evals.special import memory_policy
from tests.helpers import run_script

SMALL = dict(
    trxl_num_layers=2,
    trxl_num_heads=2,
    trxl_dim=16,
    trxl_memory_length=4,
    trxl_positional_encoding="absolute",
    reconstruction_coef=0.0,
)


def small_agent(action_space: gym.Space | None = None, max_episode_steps=16, **overrides) -> ppo_trxl.Agent:
    torch.manual_seed(0)
    args = SimpleNamespace(**{**SMALL, **overrides})
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
    return ppo_trxl.Agent(args, observation_space, action_space or gym.spaces.Discrete(2), max_episode_steps)


def test_memory_window_grows_then_slides():
    agent = small_agent()  # memory length 4
    positions, mask = agent.window(torch.tensor([0, 2, 3, 7]))
    assert positions.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7]]
    assert mask.tolist() == [[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    # the memory length is clamped to the episode length
    assert small_agent(max_episode_steps=3).memory_length == 3
    assert small_agent(trxl_memory_length=1).window(torch.tensor([5]))[0].tolist() == [[5]]
    # --no-trxl-attend-self: the same window, without the step itself
    positions, mask = small_agent(trxl_attend_self=False).window(torch.tensor([0, 2, 3, 7]))
    assert positions.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7]]
    assert mask.tolist() == [[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]]


@pytest.mark.parametrize("encoding", ["absolute", "learned", "none"])
def test_a_step_attends_only_to_its_episode_window(encoding):
    """Episode steps outside [t - L + 1, t] of the step's own episode never change its output."""
    agent = small_agent(trxl_positional_encoding=encoding)
    memory = torch.randn(2, agent.memory_slots, 2, 16)  # two episodes' cached hidden states
    obs, t = torch.randn(1, 3), torch.tensor([6])  # step 6 of episode 0: window = steps 3..6

    def value(memory):
        with torch.no_grad():
            return agent.get_value(obs, memory[:1], t)

    before = value(memory)
    noise = 5 * torch.randn_like(memory)  # not a constant shift, which the memory's LayerNorm would remove
    changed = memory.clone()
    changed[1] += noise[1]  # another episode
    changed[0, 7:] += noise[0, 7:]  # later steps of the same episode
    changed[0, :3] += noise[0, :3]  # steps older than the window
    changed[0, 6] += noise[0, 6]  # the stale cache of the current step itself: replaced by the fresh state
    assert torch.allclose(value(changed), before)
    inside = memory.clone()
    inside[0, 4] += noise[0, 4]
    assert not torch.allclose(value(inside), before)


def test_without_attending_to_itself_a_step_sees_only_earlier_steps():
    """--no-trxl-attend-self: an episode's first step has nothing to attend to, so each block's attention adds
    only its output layer's bias; later steps differ from attending to themselves, and gradients stay finite."""
    agent = small_agent(trxl_attend_self=False, trxl_positional_encoding="none")
    obs = torch.randn(1, 3)
    memory = torch.randn(1, agent.memory_slots, 2, 16)
    h, _ = agent.trxl(obs, memory[:, :4], torch.tensor([0]))
    expected = agent.encoder(agent.normalize(obs))
    for block in agent.blocks:  # by hand: the block with zero attention weights
        x = expected + block.attention.out.bias
        expected = x + torch.relu(block.fc(block.norm_fc(x)))
    assert torch.allclose(h, expected, atol=1e-6)
    memory.requires_grad_(True)
    value = agent.get_value(obs, memory, torch.tensor([0])) + agent.get_value(obs, memory, torch.tensor([2]))
    value.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in agent.parameters() if p.grad is not None)
    with torch.no_grad():
        attending = small_agent(trxl_attend_self=True, trxl_positional_encoding="none")
        t = torch.tensor([2])
        assert not torch.allclose(agent.get_value(obs, memory, t), attending.get_value(obs, memory, t))
        # the earlier steps of the window are what it reads: changing step 1 changes the output, step 3 does not
        changed = memory.clone()
        changed[0, 3] += 5 * torch.randn_like(changed[0, 3])
        assert torch.allclose(agent.get_value(obs, changed, t), agent.get_value(obs, memory, t))
        changed[0, 1] += 5 * torch.randn_like(changed[0, 1])
        assert not torch.allclose(agent.get_value(obs, changed, t), agent.get_value(obs, memory, t))


def test_per_branch_ratios_are_clipped_one_by_one():
    """A hand-made batch of two samples with two action branches, clip range 0.2."""
    logratio = torch.log(torch.tensor([[1.5, 0.5], [1.1, 1.3]]))
    advantages = torch.tensor([1.0, -2.0])
    # per branch: sample 1: max(-1.5, -1.2) = -1.2 and max(-0.5, -0.8) = -0.5; sample 2: 2.2 and max(2.6, 2.4) = 2.6
    loss, _, ratio = ppo_trxl.clipped_surrogate(logratio, advantages, 0.2, per_branch=True)
    assert ratio.shape == (2, 2) and loss.item() == pytest.approx((-1.2 - 0.5 + 2.2 + 2.6) / 4)
    # joint: ratios 0.75 and 1.43: max(-0.75, -0.8) = -0.75 and max(2.86, 2.4) = 2.86
    loss, joint_logratio, ratio = ppo_trxl.clipped_surrogate(logratio, advantages, 0.2, per_branch=False)
    assert ratio.shape == (2, 1) and loss.item() == pytest.approx((-0.75 + 2.86) / 2)
    assert torch.allclose(joint_logratio[:, 0], logratio.sum(1))
    # with one branch (Discrete actions) the two are the same
    one = logratio[:, :1]
    per_branch, joint = (ppo_trxl.clipped_surrogate(one, advantages, 0.2, flag)[0] for flag in (True, False))
    assert per_branch == joint


def test_network_details():
    """Sinusoids of the steps counted back from the last, sines then cosines; the vector encoder's ReLU by its flag
    (model files without the setting keep it); reconstruction reads the layer after the TrXL."""
    agent = small_agent(max_episode_steps=16)
    p, i = 3, 2  # slot 3 holds step 16 - 1 - 3 = 12; frequency i of 8
    frequency = 10000.0 ** (-2 * i / 16)
    assert agent.positional_encoding[p, i].item() == pytest.approx(np.sin(12 * frequency), abs=1e-6)
    assert agent.positional_encoding[p, 8 + i].item() == pytest.approx(np.cos(12 * frequency), abs=1e-6)
    assert isinstance(small_agent(trxl_vector_relu=True).encoder[-1], torch.nn.ReLU)
    assert isinstance(small_agent().encoder[-1], torch.nn.ReLU)  # no such argument: a file saved with the ReLU
    assert isinstance(small_agent(trxl_vector_relu=False).encoder[-1], torch.nn.Linear)
    obs, memory, t = torch.randn(2, 3), torch.randn(2, 4, 2, 16), torch.tensor([1, 5])
    with torch.no_grad():
        *_, hidden = agent.evaluate_actions(obs, memory, t, torch.zeros(2, 1, dtype=torch.long))
        assert torch.allclose(hidden, agent.hidden(agent.trxl(obs, memory, t)[0]))


def test_cached_states_give_training_the_rollout_outputs():
    """Re-evaluating a rollout's steps from the cached memory gives back the values and log-probs it acted with."""
    agent = small_agent(action_space=gym.spaces.MultiDiscrete([3, 2]))
    memory = agent.new_memory(2, "cpu")
    observations, steps, acted = torch.randn(10, 2, 3), [], []
    with torch.no_grad():
        for t in range(10):
            episode_step = torch.tensor([t, t // 2])  # two envs at different depths of their episodes
            action, logprob, value = agent.act(observations[t], memory, episode_step)
            assert action.shape == (2, 2) and (action[:, 0] < 3).all() and (action[:, 1] < 2).all()
            steps.append(episode_step)
            acted.append((action, logprob, value))
        for t, (action, logprob, value) in enumerate(acted):
            positions, _ = agent.window(steps[t])
            window = memory[torch.arange(2)[:, None], positions]
            # env 1 overwrote its slots on its repeated steps: compare env 0, whose memory is the rollout's
            new_logprob, entropy, new_value, _ = agent.evaluate_actions(observations[t], window, steps[t], action)
            assert torch.allclose(new_value[0], value[0], atol=1e-5)
            assert torch.allclose(new_logprob[0], logprob[0], atol=1e-5)
            assert (entropy > 0).all()


def test_evaluator_policy_empties_the_memory_when_an_episode_ends():
    agent = small_agent()
    calls = []
    original = agent.act
    agent.act = lambda obs, memory, step: calls.append((memory.abs().sum().item(), int(step))) or original(obs, memory, step)
    act = memory_policy(agent, "cpu")
    obs, not_done, done = np.zeros((1, 3), dtype=np.float32), np.zeros(1, dtype=bool), np.ones(1, dtype=bool)
    for flag in (done, not_done, not_done, done, not_done):
        act(obs, flag)
    assert [step for _, step in calls] == [0, 1, 2, 0, 1]
    assert calls[0][0] == 0 and calls[3][0] == 0 and calls[2][0] > 0  # a new episode starts with an empty memory


def test_proof_of_memory_needs_the_cue():
    env = gym.make("ProofofMemory-v0")
    obs, _ = env.reset(seed=3)
    goal = 1 if obs[2] == 1 else -1
    assert sorted(obs[[0, 2]].tolist()) == [0.0, 1.0] and obs[1] == 0
    total, length = 0.0, 0
    while True:
        obs, reward, terminated, truncated, _ = env.step(int(goal == 1))
        total, length = total + reward, length + 1
        if length >= 2:
            assert obs[0] == obs[2] == 0  # the cue is gone once the agent may move
        if terminated or truncated:
            break
    assert terminated and length == 7 and total == pytest.approx(1.0)
    env.reset(seed=3)
    wrong = [env.step(int(goal != 1))[1] for _ in range(7)]
    assert sum(wrong) == pytest.approx(-1.6)
    assert env.spec.max_episode_steps == 16


@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_minigrid_memory_smoke_with_reconstruction(tmp_path):
    args = ("--env-id", "MiniGrid-MemoryS9-v0", "--num-envs", "2", "--num-steps", "96", "--total-timesteps", "192")
    args += ("--num-minibatches", "2", "--update-epochs", "1")
    tiny = ("--trxl-num-layers", "1", "--trxl-dim", "16", "--trxl-num-heads", "2", "--trxl-memory-length", "8")
    run = run_script("ppo_trxl/ppo_trxl.py", *args, *tiny, "--reconstruction-coef", "0.1", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = run.scalars()
    lengths = [n for _, n in scalars["charts/episodic_length"]]
    assert lengths and max(lengths) <= 96  # the 96-step time limit
    assert scalars["losses/reconstruction_loss"][0][1] > 0
    assert np.isfinite(scalars["losses/loss"][0][1])


@pytest.mark.extended  # 8 s of one core: CI runs it after the quick run
def test_enjoy_plays_a_saved_model(tmp_path):
    agent = small_agent()
    args = {**vars(SimpleNamespace(**SMALL)), "env_id": "ProofofMemory-v0"}
    path = tmp_path / "ppo_trxl.cleanrl_model"
    torch.save({"model_weights": agent.state_dict(), "args": args, "max_episode_steps": 16}, path)
    run = run_script("ppo_trxl/enjoy.py", "--name", str(path), "--episodes", "3", "--no-render", "--no-cuda", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    episodes = [line for line in run.stdout.splitlines() if line.startswith("episode ")]
    assert len(episodes) == 3 and all("return=" in line and "length=" in line for line in episodes)
    missing = run_script("ppo_trxl/enjoy.py", "--name", str(tmp_path / "nothing"), cwd=tmp_path, timeout=120)
    assert missing.returncode != 0 and missing.stderr.strip().startswith("enjoy.py: error: no model file")
