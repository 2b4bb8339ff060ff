"""Run a training command in the project's Docker image, once per seed: locally or on AWS Batch.

    python -m cleanrl_utils.submit_exp --docker-tag cleanrl:latest \\
        --command "python cleanrl/ppo.py --env-id CartPole-v1 --track" --num-seed 3

Without `--provider` it prints one `docker run` line per seed (the W&B key shown as `***`).
`--build` / `--push` first build the image from the Dockerfile in the current folder with
`docker buildx`. With `--provider aws` it registers an AWS Batch job definition for the
image, submits one job per seed (`<command> --seed S`) to `--job-queue` and deregisters the
definition again (jobs already submitted are not affected).

The W&B key comes from `--wandb-key`, else the WANDB_API_KEY environment variable, else the
`api.wandb.ai` entry of ~/.netrc (what `wandb login` writes). It is never printed. On AWS it
never enters a job definition or a job either (those stay readable to anyone who may describe
them, deregistered or not): the jobs get it from AWS Secrets Manager (or an SSM parameter), as a
secret that ECS reads with `--execution-role-arn` when the container starts. Exit codes: 0 on
success, 1 when docker or AWS failed, 2 on bad input or missing credentials.
"""

import netrc
import os
import re
import secrets
import shlex
import shutil
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

import tyro

from cleanrl_utils.runtime.command_line import parse_args

MASK = "***"
DEFAULT_WANDB_HOST = "api.wandb.ai"
# botocore's "standard" retry mode retries throttling and transient server errors.
API_RETRY_ATTEMPTS = 5
# AWS Batch limits: job timeouts start at 60 s, a job may be attempted 1 to 10 times.
MIN_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 2**31 - 1  # AWS Batch's attemptDurationSeconds is a 32-bit integer
MAX_JOB_ATTEMPTS = 10
MAX_NAME_LENGTH = 128
# names AWS takes: a job queue's name (else its ARN), a Secrets Manager secret's name
JOB_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}|arn:aws[a-z-]*:batch:\S+")
SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
DEFAULT_SECRET_NAME = "cleanrl/wandb-api-key"


@dataclass
class Args:
    """Run `<command> --seed S` for seeds 1..N in the Docker image: print `docker run` lines or submit AWS Batch jobs."""

    command: str = "python cleanrl/ppo.py"
    """command run inside the container, quoted; `--seed S` is appended"""
    docker_tag: str = "cleanrl:latest"
    """image to run (and to build with --build)"""
    num_seed: int = 1
    """number of seeds: runs get seeds 1 ... num-seed"""
    wandb_key: str = ""
    """W&B API key; empty: the WANDB_API_KEY environment variable, else ~/.netrc"""
    build: Annotated[bool, tyro.conf.arg(aliases=("-b",))] = False
    """build the image from ./Dockerfile with docker buildx first"""
    push: Annotated[bool, tyro.conf.arg(aliases=("-p",))] = False
    """push the image to its registry (builds it too)"""
    archs: str = "linux/amd64"
    """platforms to build for, comma-separated (e.g. linux/amd64,linux/arm64)"""
    provider: Literal["aws"] | None = None
    """where to run: aws submits AWS Batch jobs; unset prints docker run lines"""
    job_queue: str = "cleanrl"
    """AWS Batch job queue"""
    job_definition_name: Annotated[
        str | None, tyro.conf.arg(metavar="NAME", help_behavior_hint="(default: cleanrl-<script name>)")
    ] = None
    """name of the AWS Batch job definition"""
    num_vcpu: int = 1
    """vCPUs per job"""
    num_memory: int = 2000
    """memory per job, in MiB"""
    num_gpu: int = 0
    """GPUs per job"""
    num_hours: float = 16.0
    """time limit of one job attempt, in hours"""
    aws_num_retries: int = 1
    """attempts AWS Batch makes per job (1 to 10); a failed attempt is retried, as a W&B run of its own"""
    resumes_from_checkpoints: bool = False
    """the command resumes from checkpoints kept on storage that outlives an attempt: every attempt of a job then
    continues one W&B run (without it, each attempt trains from step 0 and is a W&B run of its own)"""
    wandb_secret: Annotated[str, tyro.conf.arg(metavar="ARN")] = ""
    """AWS: ARN of a Secrets Manager secret or SSM parameter holding the W&B key; empty: the key found here is
    stored in Secrets Manager as --wandb-secret-name"""
    wandb_secret_name: str = DEFAULT_SECRET_NAME
    """AWS: name of the Secrets Manager secret the W&B key found here is stored in (created, or its value updated)"""
    execution_role_arn: Annotated[str, tyro.conf.arg(metavar="ARN")] = ""
    """AWS: IAM role with which ECS reads the W&B secret when a job starts (needed when the command has --track)"""


class BadInput(Exception):
    """A problem the user can fix, reported as one `submit_exp: error:` line and exit code 2."""


class SubmitFailed(Exception):
    """docker or AWS failed after the input was accepted: one `submit_exp: error:` line and exit code 1."""


def validate(args: Args) -> None:
    if not args.command.strip():
        raise BadInput("--command is empty")
    try:
        shlex.split(args.command)
    except ValueError as error:
        raise BadInput(f"cannot split --command {args.command!r}: {error}") from None
    if not args.docker_tag.strip():
        raise BadInput("--docker-tag is empty")
    if any(c.isspace() for c in args.docker_tag):
        raise BadInput(f"--docker-tag cannot contain spaces, got {args.docker_tag!r}")
    for flag, value in (("--num-seed", args.num_seed), ("--num-vcpu", args.num_vcpu), ("--num-memory", args.num_memory)):
        if value <= 0:
            raise BadInput(f"{flag} must be positive, got {value}")
    if args.num_gpu < 0:
        raise BadInput(f"--num-gpu must be 0 or more, got {args.num_gpu}")
    if not MIN_TIMEOUT_SECONDS <= args.num_hours * 3600 <= MAX_TIMEOUT_SECONDS:  # also false for nan
        raise BadInput(
            f"--num-hours must give {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS} seconds (AWS Batch's limits), got {args.num_hours}"
        )
    if not 1 <= args.aws_num_retries <= MAX_JOB_ATTEMPTS:
        raise BadInput(f"--aws-num-retries must be between 1 and {MAX_JOB_ATTEMPTS}, got {args.aws_num_retries}")
    if not platforms(args.archs):
        raise BadInput("--archs names no platform")
    if not JOB_QUEUE_NAME.fullmatch(args.job_queue):
        raise BadInput(f"--job-queue must be a job queue's name (letters, digits, - and _) or ARN, got {args.job_queue!r}")
    if not SECRET_NAME.fullmatch(args.wandb_secret_name):
        raise BadInput(f"--wandb-secret-name must be 1 to 512 of A-Z a-z 0-9 / _ + = . @ -, got {args.wandb_secret_name!r}")
    for flag, arn in (("--wandb-secret", args.wandb_secret), ("--execution-role-arn", args.execution_role_arn)):
        if arn and not re.fullmatch(r"arn:aws[a-z-]*:[a-z0-9-]+:\S+", arn):
            raise BadInput(f"{flag} must be an ARN (arn:aws:...), got {arn!r}")


def platforms(archs: str) -> list[str]:
    return [arch.strip() for arch in archs.split(",") if arch.strip()]


# ---- the W&B key ----------------------------------------------------------------------


def wandb_host() -> str:
    """Host whose ~/.netrc entry holds the key: that of WANDB_BASE_URL when set (W&B server users)."""
    base_url = os.environ.get("WANDB_BASE_URL", "")
    return urlparse(base_url).hostname or DEFAULT_WANDB_HOST


def netrc_key() -> str | None:
    """The W&B key stored in the netrc file (NETRC, else ~/.netrc), or None."""
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    if not path.is_file():
        return None
    try:
        entry = netrc.netrc(str(path)).authenticators(wandb_host())
    except (netrc.NetrcParseError, OSError) as error:
        # The parser's own message may quote a token of the file; only say where it failed.
        line = getattr(error, "lineno", None)
        raise BadInput(f"cannot read {path}" + (f" (line {line})" if line else "")) from None
    return entry[2] if entry and entry[2] else None


def find_wandb_key(flag_value: str) -> str | None:
    return flag_value or os.environ.get("WANDB_API_KEY") or netrc_key()


def uses_wandb(command: str) -> bool:
    return "--track" in shlex.split(command)


def aws_passes_key(args: Args) -> bool:
    """Whether the AWS jobs get the W&B key: when the command tracks, or a secret is named for it."""
    return uses_wandb(args.command) or bool(args.wandb_secret)


def redact(text: str, secret: str | None) -> str:
    """Text with the secret replaced by the mask: for messages from libraries we do not control."""
    return text.replace(secret, MASK) if secret else text


# ---- commands -------------------------------------------------------------------------


def seed_command(command: str, seed: int) -> str:
    return f"{command} --seed {seed}"


def docker_run_line(docker_tag: str, command: str, core: int, has_key: bool) -> str:
    """A `docker run` line for one seed; the key is masked since the line is printed."""
    env_args = ["-e", f"WANDB_API_KEY={MASK}"] if has_key else []
    argv = ["docker", "run", "-d", f"--cpuset-cpus={core}", *env_args, docker_tag, "/bin/bash", "-c", command]
    return shlex.join(argv)


def docker_run_lines(args: Args, has_key: bool) -> list[str]:
    """One line per seed, the containers pinned to this machine's cores in turn."""
    cores = os.cpu_count() or 1
    return [
        docker_run_line(args.docker_tag, seed_command(args.command, seed), (seed - 1) % cores, has_key) for seed in seeds(args)
    ]


def seeds(args: Args) -> list[int]:
    return list(range(1, args.num_seed + 1))


# ---- building the image ---------------------------------------------------------------


def buildx_argv(args: Args) -> list[str]:
    argv = ["docker", "buildx", "build", "--platform", ",".join(platforms(args.archs)), "-t", args.docker_tag]
    if args.push:
        argv.append("--push")
    elif len(platforms(args.archs)) == 1:
        # Load the image into the local image store so that `docker run` finds it; buildx
        # cannot load an image of several platforms, those only stay in its build cache.
        argv.append("--load")
    return [*argv, "."]


def build_image(args: Args) -> None:
    if shutil.which("docker") is None:
        raise BadInput("cannot find the docker client on PATH: install Docker with buildx, or drop --build/--push")
    argv = buildx_argv(args)
    print(f"building: {shlex.join(argv)}", file=sys.stderr)
    try:
        proc = subprocess.run(argv)
    except OSError as error:
        raise SubmitFailed(f"cannot start docker: {error}") from None
    if proc.returncode != 0:
        raise SubmitFailed(f"docker buildx build failed with exit code {proc.returncode}")


# ---- AWS Batch ------------------------------------------------------------------------


def batch_name(text: str) -> str:
    """A valid AWS Batch name: letters, digits, hyphens and underscores, at most 128 characters."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")
    return name[:MAX_NAME_LENGTH] or "cleanrl"


def script_stem(command: str) -> str:
    """Stem of the first `*.py` word of the command (`ppo` for `python cleanrl/ppo.py`)."""
    return next((Path(word).stem for word in shlex.split(command) if word.endswith(".py")), "job")


def env_id_of(command: str) -> str | None:
    words = shlex.split(command)
    for index, word in enumerate(words):
        if word in ("--env-id", "--env_id") and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(("--env-id=", "--env_id=")):
            return word.split("=", 1)[1]
    return None


def job_name(command: str, seed: int) -> str:
    parts = [script_stem(command), env_id_of(command), f"seed{seed}"]
    return batch_name("-".join(part for part in parts if part))


def new_wandb_run_id() -> str:
    """A fresh W&B run id (8 lowercase letters and digits, like wandb's own)."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def job_definition_request(args: Args, key_secret_arn: str | None) -> dict[str, Any]:
    """The job definition: image, resources, retries; the W&B key only as a reference to its secret."""
    resources = [{"type": "VCPU", "value": str(args.num_vcpu)}, {"type": "MEMORY", "value": str(args.num_memory)}]
    if args.num_gpu > 0:
        resources.append({"type": "GPU", "value": str(args.num_gpu)})
    container: dict[str, Any] = {
        "image": args.docker_tag,
        "command": ["/bin/bash", "-c", args.command],
        "resourceRequirements": resources,
        # Resuming attempts continue their job's W&B run (WANDB_RUN_ID set per job); see `job_command`.
        "environment": [{"name": "WANDB_RESUME", "value": "allow"}] if args.resumes_from_checkpoints else [],
    }
    if key_secret_arn:
        # ECS reads the value when the container starts: the definition holds only where it is.
        container["secrets"] = [{"name": "WANDB_API_KEY", "valueFrom": key_secret_arn}]
        container["executionRoleArn"] = args.execution_role_arn
    return {
        "jobDefinitionName": batch_name(args.job_definition_name or f"cleanrl-{script_stem(args.command)}"),
        "type": "container",
        "containerProperties": container,
        "retryStrategy": {"attempts": args.aws_num_retries},
        "timeout": {"attemptDurationSeconds": int(args.num_hours * 3600)},
    }


def job_command(args: Args, seed: int, run_id: str) -> str:
    """The job's shell command: the seed's command, with the W&B run id of the attempt running it.

    A retried attempt starts in a fresh container from step 0, so it is a run of its own
    (`<id>-attempt<N>`, N from AWS_BATCH_JOB_ATTEMPT) rather than steps interleaved with the failed
    attempt's; only a command that resumes from persistent checkpoints continues the job's run.
    """
    command = seed_command(args.command, seed)
    if args.resumes_from_checkpoints:
        return command
    return f'export WANDB_RUN_ID="{run_id}-attempt${{AWS_BATCH_JOB_ATTEMPT:-1}}"; {command}'


def job_request(args: Args, definition_arn: str, seed: int) -> dict[str, Any]:
    run_id = new_wandb_run_id()
    environment = [{"name": "WANDB_RUN_ID", "value": run_id}] if args.resumes_from_checkpoints else []
    return {
        "jobName": job_name(args.command, seed),
        "jobQueue": args.job_queue,
        "jobDefinition": definition_arn,
        "containerOverrides": {"command": ["/bin/bash", "-c", job_command(args, seed, run_id)], "environment": environment},
    }


def aws_session() -> Any:
    try:
        import boto3
    except ImportError:
        raise BadInput('--provider aws needs boto3: pip install -e ".[cloud]"') from None
    return boto3.session.Session()


def aws_client(session: Any, service: str) -> Any:
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    config = Config(retries={"max_attempts": API_RETRY_ATTEMPTS, "mode": "standard"})
    try:
        return session.client(service, config=config)
    except NoRegionError:
        raise BadInput("no AWS region: set AWS_DEFAULT_REGION or a region in ~/.aws/config (aws configure)") from None


def store_key_secret(client: Any, name: str, wandb_key: str) -> str:
    """Put the key into the Secrets Manager secret `name` (created, or given a new value); returns its ARN."""
    try:
        created = client.create_secret(Name=name, SecretString=wandb_key, Description="W&B API key for cleanrl jobs")
        print(f"stored the W&B key in the new secret {created['ARN']}")
        return created["ARN"]
    except client.exceptions.ResourceExistsException:
        updated = client.put_secret_value(SecretId=name, SecretString=wandb_key)
        print(f"stored the W&B key in the secret {updated['ARN']}")
        return updated["ARN"]


def check_job_queue(client: Any, job_queue: str) -> None:
    queues = client.describe_job_queues(jobQueues=[job_queue])["jobQueues"]
    if not queues:
        raise BadInput(f"AWS Batch has no job queue {job_queue!r} in region {client.meta.region_name}")
    if queues[0].get("state") != "ENABLED":
        raise BadInput(f"AWS Batch job queue {job_queue!r} is not enabled")


def submit_jobs(session: Any, args: Args, wandb_key: str | None) -> None:
    """Register the job definition, submit one job per seed, then deregister the definition."""
    client = aws_client(session, "batch")
    check_job_queue(client, args.job_queue)
    key_secret_arn = None
    if aws_passes_key(args):
        key_secret_arn = args.wandb_secret or store_key_secret(
            aws_client(session, "secretsmanager"), args.wandb_secret_name, wandb_key or ""
        )
    definition = client.register_job_definition(**job_definition_request(args, key_secret_arn))
    arn = definition["jobDefinitionArn"]
    print(f"registered job definition {arn}")
    try:
        for seed in seeds(args):
            job = client.submit_job(**job_request(args, arn, seed))
            print(f"submitted seed {seed}: job {job['jobName']} ({job['jobId']}) to queue {args.job_queue}")
    finally:
        # Only active definitions are listed by default; jobs already submitted keep running.
        client.deregister_job_definition(jobDefinition=arn)


def submit_to_aws(args: Args, wandb_key: str | None) -> None:
    """Submit the jobs, turning boto3's errors into BadInput (credentials) or SubmitFailed."""
    if aws_passes_key(args) and not args.execution_role_arn:
        raise BadInput(
            "the jobs read the W&B key from AWS Secrets Manager, which needs --execution-role-arn"
            " (an IAM role ECS may assume, allowed to read the secret)"
        )
    session = aws_session()
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        submit_jobs(session, args, wandb_key)
    except NoCredentialsError:
        raise BadInput(
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run aws configure"
        ) from None
    except ClientError as error:
        details = error.response.get("Error", {})
        operation = error.operation_name
        message = f"AWS refused {operation}: {details.get('Code', '?')}: {details.get('Message', '')}"
        raise SubmitFailed(redact(message, wandb_key)) from None
    except BotoCoreError as error:
        raise SubmitFailed(redact(f"AWS request failed: {error}", wandb_key)) from None


# ---- main -----------------------------------------------------------------------------


def run(args: Args) -> None:
    validate(args)
    wandb_key = find_wandb_key(args.wandb_key)
    key_from_aws = args.provider == "aws" and args.wandb_secret
    if uses_wandb(args.command) and not wandb_key and not key_from_aws:
        raise BadInput("the command has --track but no W&B key was found (--wandb-key, WANDB_API_KEY or ~/.netrc)")
    if args.build or args.push:
        build_image(args)
    if args.provider == "aws":
        submit_to_aws(args, wandb_key)
    else:
        print("\n".join(docker_run_lines(args, has_key=wandb_key is not None)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(Args, argv, prog="python -m cleanrl_utils.submit_exp")
    try:
        run(args)
    except BadInput as error:
        print(f"submit_exp: error: {error}", file=sys.stderr)
        return 2
    except SubmitFailed as error:
        print(f"submit_exp: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
