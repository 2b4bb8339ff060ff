"""ppo_atari.py beyond the contract tests: whole-game logging from the vector env, v5 ids, evaluation."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl import ppo_atari
from cleanrl_utils.runtime.evals.atari import evaluate_ppo
from tests.helpers import save_untrained_model


def test_finished_games_are_whole_games_and_lost_lives_are_not():
    envs = ppo_atari.make_vector_env("BreakoutNoFrameskip-v4", 2, False, "unused")
    envs.action_space.seed(0)
    envs.reset(seed=0)
    games, lost_lives = [], 0
    for _ in range(300):
        _, _, terminations, truncations, infos = envs.step(envs.action_space.sample())
        if not (terminations | truncations).any():
            assert ppo_atari.finished_games(infos) == []
            continue
        finished = ppo_atari.finished_games(infos)
        final = infos["final_info"]
        for i, episodic_return, episodic_length in finished:
            # the game is over (no lives left) and the length counts all its emulator frames
            assert terminations[i] and final["lives"][i] == 0
            assert episodic_length == final["episode_frame_number"][i] and episodic_return >= 0
        games += finished
        ended = {i for i, _, _ in finished}
        lost_lives += sum(1 for i in np.flatnonzero(terminations | truncations) if i not in ended)
    envs.close()
    assert games and lost_lives >= 3 * len(games)  # Breakout has 5 lives: 4 lost before each game ends


def test_v5_ids_work_and_skip_frames_once():
    envs = ppo_atari.make_vector_env("ALE/Breakout-v5", 1, False, "unused")
    assert envs.envs[0].unwrapped._frameskip == 1  # MaxAndSkipEnv skips 4, not 4 x 4
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (1, 4, 84, 84) and obs.dtype == np.uint8
    envs.close()


def test_act_matches_evaluate_actions():
    """The rollout's log-probabilities and values (one CNN pass) are those the update recomputes."""
    envs = ppo_atari.make_vector_env("BreakoutNoFrameskip-v4", 2, False, "unused")
    agent = ppo_atari.Agent(envs)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        action, logprob, value = agent.act(obs)
        logprob2, entropy, value2 = agent.evaluate_actions(obs, action)
    assert torch.allclose(logprob, logprob2) and torch.allclose(value, value2)
    assert torch.allclose(value, agent.get_value(obs)) and (entropy > 0).all()
    envs.close()


@pytest.mark.extended  # 6 s of one core: CI runs it after the quick run
def test_evaluate_plays_whole_games(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    envs = ppo_atari.make_vector_env("BreakoutNoFrameskip-v4", 1, False, "unused")
    model_path = save_untrained_model(ppo_atari.Agent, envs, tmp_path / "ppo_atari.cleanrl_model")
    envs.close()
    returns = evaluate_ppo(
        model_path, ppo_atari.make_env, "BreakoutNoFrameskip-v4", 2, "ev", ppo_atari.Agent, capture_video=True
    )
    assert len(returns) == 2 and all(r >= 0 for r in returns)
    assert list((tmp_path / "videos" / "ev").glob("*.mp4"))


def test_env_factory_refuses_a_non_atari_env():
    """enjoy and the evaluator call the factory directly: a clear Gymnasium error, which enjoy reports in one line."""
    with pytest.raises(gym.error.Error, match="CartPole-v1 is not an Atari game"):
        ppo_atari.make_env("CartPole-v1", 0, False, "unused")()
