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
from cleanrl_utils.evals.ppo_trxl_eval import memory_policy
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
