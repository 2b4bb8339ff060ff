"""Push a trained model to the Hugging Face Hub, with everything needed to trust it and run it again.

One commit to `{hf_entity}/{env_id}-{exp_name}-seed{seed}` holds: the model file, a model card
(`README.md`: Hub metadata with the evaluated mean +/- std return, the command that trained it,
its hyperparameters and how to play it), the last evaluation video as `replay.mp4`, the run's
TensorBoard event files, the algorithm file and the exact versions of the installed packages
(`requirements.txt`). Event files and videos of an earlier upload to the same repo are replaced.

Requests that fail for a passing reason (a 5xx or 429 answer, a dropped connection) are retried
with exponential backoff; any other failure raises `UploadError` with a one-line reason.
"""

import importlib
import importlib.metadata
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token, metadata_eval_result
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REPLACED_SUFFIXES = (".mp4",)  # with event files: what a new upload of the same repo replaces
DOCS_URL = "https://cleanrl-next.readthedocs.io"

T = TypeVar("T")


class UploadError(RuntimeError):
    """An upload that cannot work as asked, or that kept failing after its retries."""


class DownloadError(RuntimeError):
    """A file that cannot be had from the Hub, with the reason in one line."""


def download(repo_id: str, filename: str, repo_hint: str, file_hint: str) -> str:
    """The local path of `filename` of the Hub repo `repo_id`, fetched into (or, offline, read from) the Hub cache.

    `repo_hint` and `file_hint` tell the caller's user what to check when the repo or the file is not there.
    """
    import os

    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError
    from huggingface_hub.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # its retry warnings would make the error below more than one line
    try:
        return hf_hub_download(repo_id, filename)
    except RepositoryNotFoundError:
        reason = f"Hub repo {repo_id} not found (or private without a token): {repo_hint}"
    except LocalEntryNotFoundError:  # before EntryNotFoundError: it is one of them
        offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
        cause = "HF_HUB_OFFLINE is set and it is not in the local Hub cache" if offline else "the Hub cannot be reached"
        reason = f"cannot get {filename} of {repo_id}: {cause}"
    except EntryNotFoundError:
        reason = f"Hub repo {repo_id} has no file {filename}: {file_hint}"
    except HFValidationError:
        reason = f"{repo_id} is neither a model file nor a Hub repo id (user/name)"
    except HfHubHTTPError as e:
        reason = f"cannot get {filename} of {repo_id}: {_describe(e)}"
    raise DownloadError(reason)


def repo_name(env_id: str, exp_name: str, seed: int) -> str:
    """The repo name (without the user or org) a run's model goes to, and `enjoy` looks for."""
    return f"{env_id}-{exp_name}-seed{seed}"


def require_token() -> None:
    """Fail before training, not after it, when no Hub token is configured."""
    if get_token() is None:
        raise UploadError("--upload-model needs a Hugging Face token: log in with `hf auth login` or set HF_TOKEN")


def _connection_errors() -> tuple[type[BaseException], ...]:
    """Exception types of a dropped or timed-out connection, for whichever HTTP client huggingface_hub uses."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, names in (
        ("httpx2", ("TransportError",)),
        ("httpx", ("TransportError",)),
        ("requests", ("ConnectionError", "Timeout")),
    ):
        try:
            client = importlib.import_module(module)
        except ImportError:
            continue
        errors += [getattr(client, name) for name in names if hasattr(client, name)]
    return tuple(errors)


def is_transient(error: BaseException) -> bool:
    """True for failures that another try may not meet: server errors, rate limits, lost connections."""
    if isinstance(error, HfHubHTTPError):
        response = getattr(error, "response", None)
        return response is not None and response.status_code in TRANSIENT_STATUS
    if isinstance(error, OfflineModeIsEnabled):
        return False
    return isinstance(error, _connection_errors())


def _describe(error: BaseException) -> str:
    """The error's type, HTTP status when it has one, and first line, for a one-line message."""
    text = str(error).strip().splitlines()
    response = getattr(error, "response", None) if isinstance(error, HfHubHTTPError) else None
    status = f" (HTTP {response.status_code})" if response is not None else ""
    return f"{type(error).__name__}{status}: {text[0][:300] if text else ''}"


def with_retries(what: str, call: Callable[[], T], retries: int, backoff_s: float) -> T:
    """`call()`, tried again up to `retries` times on transient errors, waiting backoff_s, 2 * backoff_s, ..."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as error:
            if attempt == retries or not is_transient(error):
                raise
            delay = backoff_s * 2**attempt
            print(
                f"huggingface: {what} failed ({_describe(error)}); retry {attempt + 1}/{retries} in {delay:g} s",
                file=sys.stderr,
            )
            time.sleep(delay)
    raise AssertionError("unreachable")


def dependency_pins() -> str:
    """`name==version` of every installed distribution (what `pip freeze` lists), for requirements.txt."""
    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() != "cleanrl":  # the algorithm file itself comes with the upload
            pins.setdefault(name.lower(), f"{name}=={dist.version}")
    header = f"# Installed packages of the training run: Python {platform.python_version()} on {platform.system()}"
    return "\n".join([header, *(pins[key] for key in sorted(pins))]) + "\n"


def _git_commit(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def model_card(
    hyperparameters: dict[str, Any], episodic_returns: Sequence[float], algo_name: str, repo_id: str, script_name: str
) -> str:
    """The README.md of the model repo: Hub metadata, then what the agent is and how to run or retrain it."""
    env_id, exp_name = hyperparameters["env_id"], hyperparameters["exp_name"]
    mean = statistics.fmean(episodic_returns)
    std = statistics.pstdev(episodic_returns)
    metadata = {
        "library_name": "cleanrl",
        "tags": [env_id, "deep-reinforcement-learning", "reinforcement-learning", "custom-implementation"],
        **metadata_eval_result(
            model_pretty_name=algo_name,
            task_pretty_name="reinforcement-learning",
            task_id="reinforcement-learning",
            metrics_pretty_name="mean_reward",
            metrics_id="mean_reward",
            metrics_value=f"{mean:.2f} +/- {std:.2f}",
            dataset_pretty_name=env_id,
            dataset_id=env_id,
        ),
    }
    entity, _ = repo_id.split("/", 1)
    command = shlex.join(["python", script_name, *sys.argv[1:]])
    resumed = (
        "\nThe run was resumed from a checkpoint: the command above is the one that resumed it, and the table below"
        " holds the arguments the whole run used.\n"
        if hyperparameters.get("resume")
        else ""
    )
    table = "\n".join(f"| {key} | {value} |" for key, value in hyperparameters.items())
    return f"""---
{yaml.safe_dump(metadata, sort_keys=False)}---

# {algo_name} agent playing {env_id}

A {algo_name} agent for `{env_id}`, trained with the single-file implementation `{script_name}` (uploaded
here as it ran). Evaluated over {len(episodic_returns)} episodes after training: mean return
**{mean:.2f} +/- {std:.2f}**. `replay.mp4` shows an evaluation episode when the run
captured video; the TensorBoard event files hold the training curves.

## Play it

With the project installed ({DOCS_URL}/get-started/installation/):

```bash
python -m cleanrl_utils.enjoy --exp-name {exp_name} --env-id {env_id} --hf-entity {entity} --seed {hyperparameters["seed"]}
```

## Train it again

Install the project (the last line of `requirements.txt` names the git commit the run used, when known),
pin the exact package versions of the training run with `requirements.txt`, and run this repo's
`{script_name}` with the command that trained it:

```bash
pip install -r requirements.txt
{command}
```
{resumed}
## Hyperparameters

| param | value |
|-|-|
{table}
"""


def _newest_video(video_dir: str | Path) -> Path | None:
    videos = sorted(Path(video_dir).glob("*.mp4"), key=lambda p: p.stat().st_mtime_ns) if video_dir else []
    return videos[-1] if videos else None


def push_to_hub(
    args: Any,
    episodic_returns: Sequence[float],
    algo_name: str,
    run_dir: str | Path,
    video_dir: str | Path = "",
    script_path: str | Path | None = None,
    *,
    api: HfApi | None = None,
    retries: int = 5,
    backoff_s: float = 2.0,
) -> str:
    """Upload a finished run to `{args.hf_entity}/{env_id}-{exp_name}-seed{seed}` in one commit; return its URL.

    `args` is the script's parsed arguments (`env_id`, `exp_name`, `seed`, `hf_entity` and the rest go to the
    card); an empty `hf_entity` means the user the token belongs to. `run_dir` holds the model file
    `{exp_name}.cleanrl_model` and the event files; the newest mp4 of `video_dir` becomes `replay.mp4`.
    """
    hyperparameters = dict(vars(args))
    run_dir = Path(run_dir)
    model = run_dir / f"{hyperparameters['exp_name']}.cleanrl_model"
    if not model.is_file():
        raise UploadError(f"no model to upload at {model}")
    if not episodic_returns:
        raise UploadError("no evaluation returns for the model card")
    script = Path(script_path or sys.argv[0])
    files: dict[str, bytes | Path] = {model.name: model, script.name: script, "requirements.txt": dependency_pins().encode()}
    files.update({events.name: events for events in sorted(run_dir.glob("events.out.tfevents.*"))})
    if video := _newest_video(video_dir):
        files["replay.mp4"] = video
    if commit := _git_commit(script.resolve().parent):
        files["requirements.txt"] += f"# cleanrl source: git commit {commit}\n".encode()

    api = api or HfApi()
    name = repo_name(hyperparameters["env_id"], hyperparameters["exp_name"], hyperparameters["seed"])
    repo_id = name
    try:
        entity = hyperparameters.get("hf_entity") or with_retries("whoami", lambda: api.whoami()["name"], retries, backoff_s)
        repo_id = f"{entity}/{name}"
        files["README.md"] = model_card(hyperparameters, episodic_returns, algo_name, repo_id, script.name).encode()
        with_retries("create repo", lambda: api.create_repo(repo_id, exist_ok=True), retries, backoff_s)
        existing = with_retries("list repo files", lambda: api.list_repo_files(repo_id), retries, backoff_s)
        stale = [p for p in existing if p not in files and (".tfevents." in p or p.endswith(REPLACED_SUFFIXES))]

        def commit():
            # fresh operations each try: a failed commit leaves its operation objects half-used
            operations = [
                CommitOperationAdd(path, content if isinstance(content, bytes) else str(content))
                for path, content in files.items()
            ]
            operations += [CommitOperationDelete(path) for path in stale]
            env_id = hyperparameters["env_id"]
            return api.create_commit(repo_id, operations, commit_message=f"Upload {algo_name} agent for {env_id}")

        with_retries("commit", commit, retries, backoff_s)
    except UploadError:
        raise
    except Exception as error:
        raise UploadError(
            f"upload to the Hub repo {repo_id} failed: {_describe(error)}; the model stays in {run_dir}"
        ) from error
    url = f"{api.endpoint}/{repo_id}"
    print(f"model pushed to {url}")
    return url
