"""Watch a saved `ppo_trxl.py` model play: a local model file, or one from a Hugging Face Hub repo.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/ppo-trxl/#enjoypy (docs/rl-algorithms/ppo-trxl.md)
"""

import os
import sys
from dataclasses import dataclass

from cleanrl_utils.runtime.command_line import check_command_line, parse_args


@dataclass
class Args:
    name: str = "ppo_trxl.cleanrl_model"
    """the model file: a local path, or with --hub the file's name in the Hub repo --repo-id"""
    hub: bool = False
    """download the model file from the Hugging Face Hub"""
    repo_id: str = ""
    """the Hub repo holding the model file (with --hub), e.g. `user/ProofofMemory-v0-ppo_trxl-seed1`"""
    episodes: int = 1
    """how many episodes to play"""
    render: bool = True
    """show the game (render mode "human"); --no-render plays without a window"""
    seed: int = 0
    """seed of the env's reset"""
    cuda: bool = True
    """use a CUDA GPU when one is available"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # ppo_trxl.py lies beside this file
from ppo_trxl import Agent, make_env


def fail(message: str):
    print(f"{os.path.basename(__file__)}: error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    args = parse_args(Args)  # bad values: one line, exit code 2
    try:
        from cleanrl_utils.runtime.evals.common import read_model_file
        from cleanrl_utils.runtime.evals.special import load_agent, memory_policy
    except ImportError:
        fail("enjoy.py uses cleanrl_utils: install this project first (pip install -e .)")
    if args.episodes <= 0:
        fail(f"--episodes must be positive, got {args.episodes}")
    path = args.name
    if args.hub:
        if not args.repo_id:
            fail("--hub needs --repo-id, the Hub repo that holds --name")
        from cleanrl_utils.runtime.huggingface import DownloadError, download

        try:
            path = download(args.repo_id, args.name, "check --repo-id", "check --name")
        except DownloadError as e:
            fail(str(e))
    if not os.path.isfile(path):
        fail(f"no model file {path!r}")
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    not_it = "is not a model file saved by ppo_trxl.py (a dict of model_weights, args and max_episode_steps)"
    try:  # tensors and plain values only (weights_only): a file holding code is refused, never run
        env_id = read_model_file(path, "cpu", ("model_weights", "args", "max_episode_steps"), not_it)["args"]["env_id"]
    except Exception as e:  # not a torch file, or another script's model: torch's errors have no common base
        fail(str(e) if isinstance(e, ValueError) else f"{path} {not_it}: {type(e).__name__}: {str(e)[:200]}")

    render_mode = "human" if args.render else None
    try:
        envs = gym.vector.SyncVectorEnv(
            [make_env(env_id, 0, False, "", render_mode=render_mode)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
        act = memory_policy(load_agent(path, Agent, envs, device), device)
    except (gym.error.Error, RuntimeError, KeyError, TypeError) as e:  # its env, or weights that do not fit its args
        fail(f"cannot play {path} in {env_id}: {type(e).__name__}: {str(e)[:200]}")
    obs, _ = envs.reset(seed=args.seed)
    done, played = np.ones(1, dtype=bool), 0
    while played < args.episodes:
        obs, _, terminations, truncations, infos = envs.step(act(obs, done))
        done = terminations | truncations
        if done[0]:
            episode = infos["final_info"]["episode"]
            print(f"episode {played}: return={float(episode['r'][0])}, length={int(episode['l'][0])}")
            played += 1
    envs.close()
