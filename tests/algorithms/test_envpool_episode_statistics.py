"""The envpool scripts' episode statistics are whole games', and restart after every game end.

envpool resets a finished sub-environment on the step after the end (that step's observation is the
new game's first, its `elapsed_step` is 0). Each envpool script keeps its own running returns and
lengths in a small `EpisodeStatistics` class:

    stats = EpisodeStatistics(num_envs)
    indices, returns, lengths = stats.update(rewards, terminations, truncations, infos)

which returns the sub-environments whose game ended at this step with that game's return (the raw,
unclipped score) and length. Here the class is fed a real envpool env, cut short by a small
`max_episode_steps`, beside a plain bookkeeping of the same steps: both must agree at every step,
through time-limit cuts (the known bug: the counters run on after a truncation) and through Atari
life losses (only the last life ends a game).
"""

import importlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from cleanrl_utils.runtime import procgen_runtime
from tests.helpers import libgl_missing, missing_system_package

envpool = pytest.importorskip("envpool")


@dataclass(frozen=True)
class Case:
    script: str  # module under cleanrl/
    env_id: str
    make_kwargs: dict = field(default_factory=dict)  # the script's own envpool.make settings
    lives: bool = True  # Atari: a terminated life is not the end of the game


ATARI = {"episodic_life": True, "reward_clip": True}
CASES = [
    Case("ppo_atari_envpool", "Breakout-v5", ATARI),
    Case("pqn_atari_envpool", "Breakout-v5", ATARI),
    Case("pqn_atari_envpool_lstm", "Breakout-v5", {**ATARI, "stack_num": 1}),
    Case("ppo_rnd_envpool", "MontezumaRevenge-v5", {**ATARI, "repeat_action_probability": 0.25}),
    # Procgen (envpool 1.2.5) does not cut an episode at max_episode_steps: it labels as truncated the game
    # ends that come at or after it (each game's own time limit, e.g. 1000 steps for starpilot, is a real
    # cut, labelled truncated with the registered default that the scripts keep). So with 40 the test sees
    # truncation-labelled ends after 40+ steps, which still checks the counters restart after a truncation.
    Case("ppo_procgen", "StarpilotEasy-v0", {"num_levels": 0, "start_level": 0}, lives=False),
    Case("ppg_procgen", "StarpilotEasy-v0", {"num_levels": 0, "start_level": 0}, lives=False),
]


def expected_game_ends(rewards_seen, lengths_seen, terminations, truncations, infos, lives: bool):
    """The games that ended at this step, from nothing but the env's own signals."""
    game_over = truncations | (terminations & (infos["lives"] == 0) if lives else terminations)
    return np.flatnonzero(game_over), rewards_seen[game_over], lengths_seen[game_over]


LIMITS = {"time-limit cuts": 40, "game overs": 2000}
# The quick run checks the Procgen files and ppo_atari_envpool's game overs; the other Atari cases (6-8 s each of
# one core, Breakout and Montezuma games) are `extended`: CI runs them after the quick run
QUICK = {("ppo_atari_envpool", "game overs"), *((s, limit) for s in ("ppo_procgen", "ppg_procgen") for limit in LIMITS)}
PARAMS = [
    pytest.param(case, steps, id=f"{case.script}-{limit}", marks=[] if (case.script, limit) in QUICK else pytest.mark.extended)
    for case in CASES
    for limit, steps in LIMITS.items()
]


@pytest.mark.parametrize(("case", "max_episode_steps"), PARAMS)
def test_statistics_follow_whole_games(case, max_episode_steps):
    module = importlib.import_module(f"cleanrl.{case.script}")
    num_envs = 4
    if case.env_id.startswith("Starpilot"):
        if reason := libgl_missing():
            missing_system_package(reason)
        procgen_runtime.load()  # the Qt 5 that envpool's Procgen links (the Atari games need none)
    envs = envpool.make(
        case.env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=3,
        max_episode_steps=max_episode_steps,
        **case.make_kwargs,
    )
    stats = module.EpisodeStatistics(num_envs)
    rng = np.random.default_rng(0)
    _, infos = envs.reset()
    raw_return = np.zeros(num_envs)
    length = np.zeros(num_envs, dtype=np.int64)
    cuts = game_overs = 0
    for _ in range(800):
        actions = rng.integers(0, envs.action_space.n, num_envs)
        _, rewards, terminations, truncations, infos = envs.step(actions)
        # a step with elapsed_step 0 is the autoreset into a new game: it belongs to no game yet
        restarted = infos["elapsed_step"] == 0
        raw_return = np.where(restarted, 0.0, raw_return + infos.get("reward", rewards))
        length = np.where(restarted, 0, length + 1)
        want = expected_game_ends(raw_return, length, terminations, truncations, infos, case.lives)
        got = stats.update(rewards, terminations, truncations, infos)
        np.testing.assert_array_equal(np.asarray(got[0]), want[0])
        np.testing.assert_allclose(np.asarray(got[1], dtype=np.float64), want[1])
        np.testing.assert_array_equal(np.asarray(got[2]), want[2])
        cuts += int(truncations.sum())
        game_overs += len(want[0]) - int(truncations.sum())
    envs.close()
    # the run went through what it is meant to test
    if max_episode_steps == 40:
        assert cuts >= 2 * num_envs
    else:
        assert game_overs >= num_envs and cuts == 0
