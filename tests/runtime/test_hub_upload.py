"""--upload-model and cleanrl_utils.runtime.huggingface, against a fake Hub on a local port (tests/fixtures/fake_hub.py)."""

import ast
import importlib.metadata
import statistics
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from huggingface_hub import HfApi, ModelCard

from cleanrl_utils.runtime.experiment import extra_for
from cleanrl_utils.runtime.huggingface import UploadError, push_to_hub
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.fixtures import teachers
from tests.fixtures.fake_hub import FakeHub
from tests.helpers import REPO, egl_missing, missing_system_package, run_script, script_env


@dataclass(frozen=True)
class Upload:
    env_id: str
    args: tuple[str, ...]  # a short run of the script on env_id
    algo_name: str  # the model-index name on the card
    entity: str = ""  # "" pushes to the token's user, else to this organisation


HOPPER = ("--env-id", "Hopper-v4")
OFF_POLICY = ("--total-timesteps", "300", "--learning-starts", "100", "--batch-size", "32", "--buffer-size", "1000")
ATARI_REPLAY = ("--buffer-size", "1000", "--learning-starts", "100", "--total-timesteps", "200")
# ppo_atari_envpool_xla_jax_scan.py's smoke-run shapes (tests/contract/test_script_contract.py): compiled once per session
XLA_JAX = ("--num-envs", "2", "--num-steps", "32", "--update-epochs", "2", "--num-minibatches", "2", "--no-anneal-lr")
# every script with --save-model: each pushes its own model, card, video, logs, file and pins
UPLOADS = {
    "ppo.py": Upload("CartPole-v1", ("--total-timesteps", "512", "--num-steps", "128"), "PPO"),
    "pqn.py": Upload("CartPole-v1", ("--total-timesteps", "512", "--num-steps", "128"), "PQN"),
    "dqn.py": Upload("CartPole-v1", ("--total-timesteps", "300", "--learning-starts", "100"), "DQN", "some-org"),
    "c51.py": Upload("CartPole-v1", ("--total-timesteps", "300", "--learning-starts", "100"), "C51", "some-org"),
    "ppo_continuous_action.py": Upload("Hopper-v4", (*HOPPER, "--total-timesteps", "512", "--num-steps", "256"), "PPO"),
    "rpo_continuous_action.py": Upload("Hopper-v4", (*HOPPER, "--total-timesteps", "512", "--num-steps", "256"), "RPO"),
    "ddpg_continuous_action.py": Upload("Hopper-v4", (*HOPPER, *OFF_POLICY), "DDPG"),
    "td3_continuous_action.py": Upload("Hopper-v4", (*HOPPER, *OFF_POLICY), "TD3", "some-org"),
    # uploaded for real, with its MuJoCo video: InvertedPendulum's untrained episodes end within ~10 steps, where
    # Hopper's evaluation rendered 300 frames (~0.1 s each in software) for the same checks
    "sac_continuous_action.py": Upload("InvertedPendulum-v4", ("--env-id", "InvertedPendulum-v4", *OFF_POLICY), "SAC"),
    "ppo_atari.py": Upload(
        "BreakoutNoFrameskip-v4", ("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "128"), "PPO"
    ),
    "dqn_atari.py": Upload("BreakoutNoFrameskip-v4", ATARI_REPLAY, "DQN", "some-org"),
    "c51_atari.py": Upload("BreakoutNoFrameskip-v4", ATARI_REPLAY, "C51"),
    "rainbow_atari.py": Upload("BreakoutNoFrameskip-v4", ATARI_REPLAY, "Rainbow", "some-org"),
    "sac_atari.py": Upload(
        "BreakoutNoFrameskip-v4",
        ("--env-id", "BreakoutNoFrameskip-v4", *ATARI_REPLAY),
        "SAC",
    ),
    "qdagger_dqn_atari_impalacnn.py": Upload(
        "BreakoutNoFrameskip-v4",
        (*teachers.short_teacher_phase(teachers.TEACHER_MODEL), "--learning-starts", "100", "--total-timesteps", "200"),
        "Qdagger",
        "some-org",
    ),
    "ppo_atari_lstm.py": Upload(
        "BreakoutNoFrameskip-v4",
        ("--num-envs", "2", "--num-minibatches", "2", "--num-steps", "64", "--total-timesteps", "128"),
        "PPO-LSTM",
    ),
    "ppo_atari_multigpu.py": Upload(
        "BreakoutNoFrameskip-v4", ("--local-num-envs", "2", "--num-steps", "64", "--total-timesteps", "128"), "PPO", "some-org"
    ),
    "ppo_pettingzoo_ma_atari.py": Upload(
        "pong_v3", ("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "128", "--max-cycles", "400"), "PPO"
    ),
    "dqn_jax.py": Upload("CartPole-v1", ("--total-timesteps", "300", "--learning-starts", "100"), "DQN"),
    "c51_jax.py": Upload("CartPole-v1", ("--total-timesteps", "300", "--learning-starts", "100"), "C51", "some-org"),
    "ddpg_continuous_action_jax.py": Upload("Hopper-v4", (*HOPPER, *OFF_POLICY), "DDPG", "some-org"),
    "td3_continuous_action_jax.py": Upload("Hopper-v4", (*HOPPER, *OFF_POLICY), "TD3"),
    "sac_continuous_action_jax.py": Upload("Hopper-v4", (*HOPPER, *OFF_POLICY), "SAC", "some-org"),
    # evaluated at epsilon 0.5: an untrained greedy network idles after each lost life until a random FIRE. Batches
    # of 8, as in its smoke run (tests/contract/test_script_contract.py): the same shapes, so the test session's JAX
    # compilation cache gives whichever of the two runs second the programs the first compiled
    "dqn_atari_jax.py": Upload(
        "BreakoutNoFrameskip-v4",
        (*ATARI_REPLAY, "--end-e", "0.5", "--batch-size", "8"),
        "DQN",
        "some-org",
    ),
    "c51_atari_jax.py": Upload("BreakoutNoFrameskip-v4", ATARI_REPLAY, "C51"),
    "qdagger_dqn_atari_jax_impalacnn.py": Upload(
        "BreakoutNoFrameskip-v4",
        (*teachers.short_teacher_phase(teachers.JAX_TEACHER_MODEL), "--learning-starts", "150", "--total-timesteps", "200"),
        "Qdagger",
        "some-org",
    ),
    "ppo_atari_envpool_xla_jax_scan.py": Upload(
        "Breakout-v5",
        (*XLA_JAX, "--total-timesteps", "64"),
        "PPO",
        "some-org",
    ),
}


@pytest.fixture
def hub():
    hub = FakeHub().start()
    yield hub
    hub.stop()


def hub_env(hub: FakeHub, tmp_path: Path, token: str | None = None) -> dict[str, str]:
    env = script_env(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf_home"), HF_TOKEN=token or hub.token)
    if token == "":
        del env["HF_TOKEN"]
    return env


# Uploading is one code path for every script (cleanrl_utils.runtime.experiment's log_evaluation_and_upload calls
# push_to_hub), so a real upload runs for one script of each kind: a torch vector env, a torch single
# env into an organisation, a MuJoCo video, a JAX Atari script, an envpool script without a training
# video. Every script's own part, the algorithm name on the card, is checked from its source below.
# The quick run uploads from ppo.py; the other four kinds (12-24 s each) are `extended`, which CI runs after it.
UPLOAD_CALLS = {"log_evaluation_and_upload", "push_to_hub"}
EXTENDED_UPLOADS = ("dqn.py", "sac_continuous_action.py", "dqn_atari_jax.py", "ppo_atari_envpool_xla_jax_scan.py")
UPLOADED_FOR_REAL = ["ppo.py", *(pytest.param(name, marks=pytest.mark.extended) for name in EXTENDED_UPLOADS)]


@pytest.mark.parametrize("script", sorted(UPLOADS))
def test_every_script_puts_its_algorithm_name_on_the_card(script):
    tree = ast.parse((REPO / "cleanrl" / script).read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in UPLOAD_CALLS
    ]
    arguments = [value for call in calls for value in (*call.args, *(keyword.value for keyword in call.keywords))]
    names = {value.value for value in arguments if isinstance(value, ast.Constant) and isinstance(value.value, str)}
    assert UPLOADS[script].algo_name in names, f"{script} uploads without the name {UPLOADS[script].algo_name!r}"


@pytest.mark.parametrize("script", UPLOADED_FOR_REAL)
def test_upload_model_pushes_one_complete_commit(script, hub, tmp_path):
    upload = UPLOADS[script]
    if extra_for(upload.env_id) == "mujoco" and (reason := egl_missing()):  # filmed without a display
        missing_system_package(reason)
    exp_name = script.removesuffix(".py")
    entity_args = ("--hf-entity", upload.entity) if upload.entity else ()
    args = (*upload.args, "--save-model", "--upload-model", "--capture-video", *entity_args)
    run = run_script(script, *args, cwd=tmp_path, env=hub_env(hub, tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]

    repo_id = f"{upload.entity or hub.user}/{upload.env_id}-{exp_name}-seed1"
    assert f"model pushed to {hub.url}/{repo_id}" in run.stdout
    assert len(hub.commits[repo_id]) == 1, "everything goes in one commit"
    files = hub.repos[repo_id]
    events = sorted(name for name in files if name.startswith("events.out.tfevents."))
    assert set(files) == {f"{exp_name}.cleanrl_model", "README.md", "replay.mp4", script, "requirements.txt", *events}
    assert len(events) == 1

    # the files are the run's own
    assert files[f"{exp_name}.cleanrl_model"] == (run.run_dir / f"{exp_name}.cleanrl_model").read_bytes()
    assert files[script] == (REPO / "cleanrl" / script).read_bytes()
    newest_video = max(run.videos("-eval"), key=lambda p: p.stat().st_mtime_ns)
    assert files["replay.mp4"] == newest_video.read_bytes() and files["replay.mp4"][4:8] == b"ftyp"
    pins = files["requirements.txt"].decode().splitlines()
    for package in ("torch", "gymnasium", "huggingface_hub"):
        dist = importlib.metadata.distribution(package)
        assert f"{dist.metadata['Name']}=={dist.version}" in pins

    # the pushed event file holds the evaluation, and the card's metadata reports it as the Hub expects
    (tmp_path / "pushed").mkdir()
    (tmp_path / "pushed" / events[0]).write_bytes(files[events[0]])
    evaluation = [value for _, value in read_scalars(tmp_path / "pushed")["eval/episodic_return"]]
    assert len(evaluation) == 10
    card = ModelCard(files["README.md"].decode())
    assert card.data.library_name == "cleanrl"
    assert {upload.env_id, "reinforcement-learning", "deep-reinforcement-learning", "custom-implementation"} <= set(
        card.data.tags
    )
    (result,) = card.data.eval_results
    assert (result.task_type, result.dataset_type, result.dataset_name) == (
        "reinforcement-learning",
        upload.env_id,
        upload.env_id,
    )
    assert result.metric_type == "mean_reward"
    assert result.metric_value == f"{statistics.fmean(evaluation):.2f} +/- {statistics.pstdev(evaluation):.2f}"
    assert yaml.safe_load(files["README.md"].decode().split("---")[1])["model-index"][0]["name"] == upload.algo_name
    body = card.text
    owner = repo_id.split("/")[0]
    assert f"python -m cleanrl_utils.enjoy --exp-name {exp_name} --env-id {upload.env_id} --hf-entity {owner} --seed 1" in body
    assert f"python {script} {' '.join(args)}" in body
    assert f"| env_id | {upload.env_id} |" in body and "pip install -r requirements.txt" in body


def test_upload_model_needs_a_token_before_training(hub, tmp_path):
    run = run_script("dqn.py", "--save-model", "--upload-model", cwd=tmp_path, env=hub_env(hub, tmp_path, token=""))
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        == "dqn.py: error: --upload-model needs a Hugging Face token: log in with `hf auth login` or set HF_TOKEN"
    )
    assert not (tmp_path / "runs").exists() and hub.requests == []


def test_failed_upload_is_one_line_and_keeps_the_model(hub, tmp_path):
    hub.failures["commit"] = [403]  # not transient: no retry
    run = run_script(
        "dqn.py", *UPLOADS["dqn.py"].args, "--save-model", "--upload-model", cwd=tmp_path, env=hub_env(hub, tmp_path)
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    assert lines[0].startswith("dqn.py: error: upload to the Hub repo tester/CartPole-v1-dqn-seed1 failed: ")
    assert "403" in lines[0] and f"the model stays in runs/{run.run_dir.name}" in lines[0]
    assert (run.run_dir / "dqn.cleanrl_model").is_file()
    assert [request for request in hub.requests if request[1].endswith("/commit/main")] == [
        ("POST", "/api/models/tester/CartPole-v1-dqn-seed1/commit/main")
    ]


@pytest.fixture
def finished_run(tmp_path) -> tuple[SimpleNamespace, Path, Path]:
    """A run folder with a model and an event file, and an eval video folder, as a script leaves them."""
    run_dir, video_dir = tmp_path / "runs" / "r", tmp_path / "videos" / "r-eval"
    run_dir.mkdir(parents=True)
    video_dir.mkdir(parents=True)
    (run_dir / "dqn.cleanrl_model").write_bytes(b"weights")
    (run_dir / "events.out.tfevents.1.host.1.0").write_bytes(b"first run")
    (video_dir / "rl-video-episode-0.mp4").write_bytes(b"....ftyp video")
    args = SimpleNamespace(env_id="CartPole-v1", exp_name="dqn", seed=1, hf_entity="", learning_rate=0.1)
    return args, run_dir, video_dir


def push(hub: FakeHub, finished_run, **kwargs) -> str:
    args, run_dir, video_dir = finished_run
    api = HfApi(endpoint=hub.url, token=kwargs.pop("token", hub.token))
    return push_to_hub(args, [1.0, 3.0], "DQN", run_dir, video_dir, REPO / "cleanrl" / "dqn.py", api=api, **kwargs)


def test_transient_errors_are_retried_with_backoff(hub, finished_run, capsys):
    hub.failures.update(whoami=[503], create=[502], commit=[503, 500])
    url = push(hub, finished_run, backoff_s=0.01)
    assert url == f"{hub.url}/tester/CartPole-v1-dqn-seed1"
    assert len(hub.commits["tester/CartPole-v1-dqn-seed1"]) == 1
    retries = [line for line in capsys.readouterr().err.splitlines() if line.startswith("huggingface: ")]
    assert [line.split(" failed")[0] for line in retries] == [
        "huggingface: " + what for what in ("whoami", "create repo", "commit", "commit")
    ]
    assert "retry 2/5 in 0.02 s" in retries[-1]
    card = hub.repos["tester/CartPole-v1-dqn-seed1"]["README.md"].decode()
    assert "value: 2.00 +/- 1.00" in card


def test_errors_that_persist_end_in_upload_error(hub, finished_run):
    hub.failures["commit"] = [503] * 5
    with pytest.raises(UploadError, match=r"upload to the Hub repo tester/CartPole-v1-dqn-seed1 failed: .*503"):
        push(hub, finished_run, retries=2, backoff_s=0.01)
    assert sum(path.endswith("/commit/main") for _, path in hub.requests) == 3


def test_lost_connection_is_retried_then_reported(finished_run, capsys):
    hub = FakeHub().start()
    hub.stop()  # nothing listens on its port any more
    with pytest.raises(UploadError, match="upload to the Hub repo CartPole-v1-dqn-seed1 failed"):
        push(hub, finished_run, retries=1, backoff_s=0.01)
    assert "huggingface: whoami failed" in capsys.readouterr().err


def test_a_bad_token_is_not_retried(hub, finished_run):
    with pytest.raises(UploadError, match=r"\(HTTP 401\): Invalid user token"):
        push(hub, finished_run, token="hf_wrong")
    assert hub.requests == [("GET", "/api/whoami-v2")]


def test_hf_entity_skips_whoami(hub, finished_run):
    finished_run[0].hf_entity = "some-org"
    push(hub, finished_run)
    assert ("GET", "/api/whoami-v2") not in hub.requests
    assert "some-org/CartPole-v1-dqn-seed1" in hub.repos


def test_a_new_upload_replaces_the_old_logs_and_video(hub, finished_run):
    args, run_dir, video_dir = finished_run
    push(hub, finished_run)
    (run_dir / "events.out.tfevents.1.host.1.0").unlink()
    (run_dir / "events.out.tfevents.2.host.2.0").write_bytes(b"second run")
    for video in video_dir.iterdir():
        video.unlink()
    hub.repos["tester/CartPole-v1-dqn-seed1"]["notes.md"] = b"added by hand on the Hub"
    push(hub, finished_run)
    second = hub.commits["tester/CartPole-v1-dqn-seed1"][-1]
    assert sorted(second.deleted) == ["events.out.tfevents.1.host.1.0", "replay.mp4"]
    files = hub.repos["tester/CartPole-v1-dqn-seed1"]
    assert "events.out.tfevents.2.host.2.0" in files and "notes.md" in files and "replay.mp4" not in files


def test_nothing_is_sent_without_a_model(hub, finished_run):
    (finished_run[1] / "dqn.cleanrl_model").unlink()
    with pytest.raises(UploadError, match="no model to upload"):
        push(hub, finished_run)
    assert hub.requests == []
