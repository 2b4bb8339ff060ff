"""Play a saved model: one from the Hugging Face Hub, or a local `.cleanrl_model` file.

    python -m cleanrl_utils.enjoy --exp-name dqn --env-id CartPole-v1
    python -m cleanrl_utils.enjoy --exp-name dqn --env-id CartPole-v1 --model-path runs/<run>/dqn.cleanrl_model

downloads `{exp_name}.cleanrl_model` from the Hub repo `{hf_entity}/{env_id}-{exp_name}-seed{seed}`
(or `--hf-repository`) into the local Hub cache, unless `--model-path` names a file, then plays
`--eval-episodes` episodes with the algorithm's evaluator and prints each return and their
mean +/- std. With `HF_HUB_OFFLINE=1` the model comes from the cache alone. `--capture-video`
writes the episodes' videos to `videos/{run_name}/`. Failures end with one line on stderr and exit
code 2.
"""

import os
import random
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

# torch, Gymnasium, NumPy and the Hub's client take seconds to import: `enjoy` imports them once the flags have
# passed their checks, so that a bad flag is refused at once
from cleanrl_utils.runtime.command_line import parse_args
from cleanrl_utils.zoo import ZOO, entry, saves_flax


@dataclass
class Args:
    exp_name: str
    """the algorithm file whose model to play (its name without .py: ppo, dqn, c51, pqn...)"""
    env_id: str = "CartPole-v1"
    """Gymnasium id of the environment the model was trained on"""
    seed: int = 1
    """the training seed in the Hub repo name; it also seeds the evaluation"""
    hf_entity: str = "cleanrl"
    """the Hub user or org of the repo"""
    hf_repository: str = ""
    """the full Hub repo id, instead of {hf-entity}/{env-id}-{exp-name}-seed{seed}"""
    model_path: str = ""
    """a local model file to play instead of downloading one"""
    eval_episodes: int = 10
    """the number of episodes to play"""
    capture_video: bool = False
    """whether to write videos of the episodes (to `videos/{run_name}`)"""
    cuda: bool = False
    """run the model on the GPU"""


HUB_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")  # user/name, as the Hub allows
REPO_HINT = "check --hf-entity, --env-id and --seed, or name it with --hf-repository"


class EnjoyError(Exception):
    """Something to tell the user in one line."""


def one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split())
    return (text[:limit] + "...") if len(text) > limit else text or type(error).__name__


def check_model_file(model_path: str | Path, flax_model: bool) -> None:
    """Raise unless `model_path` reads back as a model file: Flax msgpack bytes, or a torch.save file of tensors and
    plain values; a file of another kind (TorchScript, a pickle...) is refused by its bytes, unread."""
    from cleanrl_utils.runtime.model_files import read_flax, read_torch

    if flax_model:
        read_flax(model_path)
    else:
        read_torch(model_path)


def check_args(args: Args) -> None:
    """EnjoyError for flags that name nothing to play: an exp name of no zoo entry, no episodes, no such model file.
    Checked before any slow import."""
    if args.exp_name not in ZOO:
        raise EnjoyError(f"no model zoo entry for exp name {args.exp_name!r}; known: {', '.join(sorted(ZOO))}")
    if ":" in args.env_id:  # Gymnasium imports the module of a "module:Env" id: enjoy plays registered ids only
        raise EnjoyError(f"--env-id {args.env_id!r} names a module to import (module:Env); give a registered env id")
    if args.hf_repository and (not HUB_REPO_ID.fullmatch(args.hf_repository) or ".." in args.hf_repository):
        raise EnjoyError(f"--hf-repository must be a Hub repo id (user/name), got {args.hf_repository!r}")
    if args.eval_episodes <= 0:
        raise EnjoyError(f"--eval-episodes must be positive, got {args.eval_episodes}")
    if args.model_path and not os.path.isfile(args.model_path):
        raise EnjoyError(f"no model file at {args.model_path}")


def enjoy(args: Args) -> list[float]:
    """Play the model that `args` names; return the episodes' returns."""
    check_args(args)
    import gymnasium as gym
    import numpy as np
    import torch

    from cleanrl_utils.runtime.experiment import extra_for, mujoco_problem, not_installed
    from cleanrl_utils.runtime.huggingface import DownloadError, download, repo_name

    extra = extra_for(args.env_id)  # MuJoCo's setting checked first: importing the Playground file would check it too
    mujoco_env = extra in ("mujoco", "dm_control") or args.exp_name == "ppo_continuous_action_playground"
    if mujoco_env and (problem := mujoco_problem(args.capture_video, extra == "dm_control")):
        raise EnjoyError(problem)
    zoo_entry = entry(args.exp_name)  # imports the algorithm file and its evaluator
    if args.model_path:
        model_path, source = args.model_path, args.model_path
    else:
        repo_id = args.hf_repository or f"{args.hf_entity}/{repo_name(args.env_id, args.exp_name, args.seed)}"
        try:
            model_path = download(repo_id, f"{args.exp_name}.cleanrl_model", REPO_HINT, "is --exp-name right?")
        except DownloadError as e:
            raise EnjoyError(str(e)) from None
        source = f"the Hub repo {repo_id}"
    try:
        check_model_file(model_path, saves_flax(args.exp_name))
    except Exception as e:
        raise EnjoyError(f"{model_path} is not a model file saved by an algorithm script: {one_line(e)}") from None

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    run_name = f"{args.env_id}__{args.exp_name}__enjoy__{int(time.time())}"
    print(f"playing {args.exp_name} from {source} in {args.env_id} for {args.eval_episodes} episodes")
    with warnings.catch_warnings(record=True) as held:  # shown once it has played, so that a failure is one line
        try:
            returns = zoo_entry.evaluate(
                model_path,
                zoo_entry.make_env,
                args.env_id,
                eval_episodes=args.eval_episodes,
                run_name=run_name,
                Model=zoo_entry.Model,
                device=device,
                capture_video=args.capture_video,
                seed=args.seed,
                **zoo_entry.eval_kwargs,
            )
        except gym.error.DependencyNotInstalled as e:
            raise EnjoyError(not_installed(args.env_id, e)) from None
        except (gym.error.Error, ModuleNotFoundError) as e:
            raise EnjoyError(f"cannot make env {args.env_id!r}: {e}") from None
        except (RuntimeError, ValueError, KeyError, AttributeError) as e:  # weights of another network or env
            raise EnjoyError(f"the model from {source} does not fit {args.exp_name} in {args.env_id}: {one_line(e)}") from None
    for warning in held:
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    mean, std = statistics.fmean(returns), statistics.pstdev(returns)
    print(f"mean return over {len(returns)} episodes: {mean:.2f} +/- {std:.2f}")
    if args.capture_video:
        print(f"videos in videos/{run_name}")
    return returns


def main(argv: list[str] | None = None) -> None:
    args = parse_args(Args, argv, prog="python -m cleanrl_utils.enjoy")
    try:
        enjoy(args)
    except EnjoyError as e:
        print(f"enjoy: error: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
