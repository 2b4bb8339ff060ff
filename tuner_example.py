"""Find one set of PPO hyperparameters that does well on both CartPole-v1 and Acrobot-v1.

    python tuner_example.py                      # the full search: 100 trials x 3 seeds x 2 envs
    python tuner_example.py --num-trials 2 --num-seeds 1 --total-timesteps 10000   # a quick look

Trials are stored in cleanrl_hpopt.db; watch them with `optuna-dashboard sqlite:///cleanrl_hpopt.db`.
Give a `--study-name` to resume a study, or to share it between several machines (with a
PostgreSQL storage, best given in the OPTUNA_STORAGE variable so that its password stays off the
command line). Ctrl-C or SIGTERM stops the tuning: the running trial is marked interrupted and
is run again by the next tuning. See docs/advanced/hyperparameter-tuning.md.
"""

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import tyro

from cleanrl_utils.runtime.command_line import parse_args

if TYPE_CHECKING:
    from cleanrl_utils.tuner import Tuner

PPO = Path(__file__).resolve().parent / "cleanrl" / "ppo.py"
# cleanrl_utils.tuner's STORAGE_ENV, named here too: the tuner imports Optuna and SQLAlchemy (seconds), and `main`
# reads the flags before it imports them, so that a bad flag is refused at once
STORAGE_ENV = "OPTUNA_STORAGE"


@dataclass
class Args:
    """Tune PPO's hyperparameters on CartPole-v1 and Acrobot-v1 together with Optuna."""

    num_trials: int = 100
    """trials the study should hold when this tuning ends"""
    num_seeds: int = 3
    """seeds each trial trains with, on every environment"""
    total_timesteps: int = 100000
    """training steps of every run"""
    storage: Annotated[
        str | None,
        tyro.conf.arg(metavar="URL", help_behavior_hint=f"(default: ${STORAGE_ENV}, else sqlite:///cleanrl_hpopt.db)"),
    ] = None
    """Optuna storage URL, e.g. postgresql://user@host/database to tune from several machines; a URL with a password
    is better given in the OPTUNA_STORAGE variable, which `ps` and shell history do not show"""
    study_name: Annotated[
        str | None, tyro.conf.arg(metavar="NAME", help_behavior_hint="(default: a new study, tuner_<unix time>)")
    ] = None
    """name of the study to create or resume"""


def fail(message: str, code: int = 2) -> None:
    print(f"tuner_example.py: error: {message}", file=sys.stderr)
    sys.exit(code)


def main() -> None:
    args = parse_args(Args, prog="python tuner_example.py")
    if args.num_trials < 1 or args.num_seeds < 1 or args.total_timesteps < 1:
        fail("--num-trials, --num-seeds and --total-timesteps must be positive")
    from cleanrl_utils.tuner import StorageError, Terminated

    try:
        tuner = make_tuner(args)
        tuner.tune(num_trials=args.num_trials, num_seeds=args.num_seeds)
    except (StorageError, ValueError) as error:
        fail(str(error))
    except KeyboardInterrupt as stop:  # the running trial is already marked interrupted
        signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
        fail(f"stopped by {signum.name}; the interrupted trial runs again when this study is tuned again", 128 + signum)


def make_tuner(args: Args) -> "Tuner":
    import optuna

    from cleanrl_utils.tuner import Tuner, storage_url

    return Tuner(
        script=str(PPO),
        metric="charts/episodic_return",
        metric_last_n_average_window=50,
        direction="maximize",
        aggregation_type="average",
        # Rough worst and best returns: they put both environments on a 0-1 scale.
        target_scores={
            "CartPole-v1": [0, 500],
            "Acrobot-v1": [-500, 0],
        },
        params_fn=lambda trial: {
            "learning-rate": trial.suggest_float("learning-rate", 0.0003, 0.003, log=True),
            "num-minibatches": trial.suggest_categorical("num-minibatches", [1, 2, 4]),
            "update-epochs": trial.suggest_categorical("update-epochs", [1, 2, 4, 8]),
            "num-steps": trial.suggest_categorical("num-steps", [5, 16, 32, 64, 128]),
            "vf-coef": trial.suggest_float("vf-coef", 0, 5),
            "max-grad-norm": trial.suggest_float("max-grad-norm", 0, 5),
            "total-timesteps": args.total_timesteps,
            "num-envs": 16,
        },
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5),
        sampler=optuna.samplers.TPESampler(),
        storage=storage_url(args.storage),
        study_name=args.study_name,
    )


if __name__ == "__main__":
    main()
