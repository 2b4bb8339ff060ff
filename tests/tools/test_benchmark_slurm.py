"""Slurm mode of `python -m cleanrl_utils.benchmark`: the job-array script it writes, and a real submission.

The first tests check the rendered script without Slurm (a fake `srun` runs it task by task,
a fake `sbatch` stands in for the submission). The last ones start a single-node Slurm
(munged, slurmctld and slurmd, on free ports, with every file in temporary folders) and
run a benchmark on it for real; they are skipped where Slurm is not installed or not root.
"""

import contextlib
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cleanrl_utils.benchmark import SlurmArray, add_exports, build_runs, cpus_per_gpu, render_slurm_script
from cleanrl_utils.tensorboard_reader import read_scalars
from tests.helpers import REPO, missing_system_package, run_benchmark, script_env

GPU_TEMPLATE = REPO / "benchmark" / "slurm" / "cleanrl_1gpu.slurm_template"
CPU_TEMPLATE = REPO / "benchmark" / "slurm" / "cleanrl_cpu.slurm_template"
GPU_FLAGS = {"--slurm-gpus-per-task": 1, "--slurm-total-cpus": 10, "--slurm-ntasks": 1, "--slurm-nodes": None}
NO_FLAGS = dict.fromkeys(GPU_FLAGS)
# Env ids a shell would split, expand or execute if they were pasted in unquoted.
AWKWARD_ENV_IDS = ["two words", "it's", "$(touch pwned)", "a;b|c", "{{seeds}}"]
# Prints the arguments it got and the WANDB_TAGS it saw, as one JSON line.
PRINT_ARGS = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ.get('WANDB_TAGS')]))"


def write_executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(0o755)
    return path


def with_fake_program(tmp_path: Path, name: str, script: str) -> dict[str, str]:
    """An environment whose PATH finds the shell `script` first as the program `name` (a stand-in for Slurm's)."""
    bin_dir = tmp_path / "fake-bin"
    write_executable(bin_dir / name, script)
    return script_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def run_with_cpu_template(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The runner with `args` for Slurm's CPU template, without the auto tag."""
    return run_benchmark(*args, "--slurm-template-path", str(CPU_TEMPLATE), "--no-auto-tag", cwd=tmp_path, env=env)


def slurm_scripts(cwd: Path) -> list[Path]:
    return sorted((cwd / "slurm").glob("*.slurm"))


def sbatch_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


# --- rendering ----------------------------------------------------------------------------


def render(template: Path, env_ids: list[str], seeds: list[int], workers: int, flags: dict, command=("python", "t.py")):
    return render_slurm_script(template.read_text(), template.name, SlurmArray(env_ids, seeds, list(command), workers), flags)


def test_the_gpu_template_is_filled_in():
    script = render(GPU_TEMPLATE, ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"], [1, 2], workers=3, flags=GPU_FLAGS)
    assert "{{" not in script and "}}" not in script
    assert sbatch_lines(script) == [
        "#SBATCH --job-name=cleanrl",
        "#SBATCH --array=0-5%3",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --cpus-per-gpu=10",
        "#SBATCH --ntasks=1",
        "#SBATCH --output=slurm/logs/%A_%a.out",
        "#SBATCH --error=slurm/logs/%A_%a.err",
    ]
    assert "env_ids=(CartPole-v1 Acrobot-v1 MountainCar-v0)\n" in script
    assert "seeds=(1 2)\n" in script
    assert "env_id=${env_ids[$SLURM_ARRAY_TASK_ID / 2]}\n" in script
    assert "seed=${seeds[$SLURM_ARRAY_TASK_ID % 2]}\n" in script
    assert 'srun python t.py --env-id "$env_id" --seed "$seed"\n' in script


@pytest.mark.parametrize(
    ("total_cpus", "gpus_per_task", "ntasks", "expected"),
    [(10, 1, 1, 10), (10, 3, 1, 4), (10, 2, 2, 3), (8, 2, 2, 2), (1, 4, 1, 1), (12, 1, 4, 3)],
)
def test_cpus_per_gpu_shares_the_cpus_among_all_gpus_rounding_up(total_cpus, gpus_per_task, ntasks, expected):
    assert cpus_per_gpu(total_cpus, gpus_per_task, ntasks) == expected
    flags = {**GPU_FLAGS, "--slurm-total-cpus": total_cpus, "--slurm-gpus-per-task": gpus_per_task, "--slurm-ntasks": ntasks}
    script = render(GPU_TEMPLATE, ["A-v1"], [1], workers=1, flags=flags)
    assert f"#SBATCH --cpus-per-gpu={expected}" in sbatch_lines(script)


def test_the_nodes_line_appears_only_when_nodes_are_given():
    without = render(CPU_TEMPLATE, ["A-v1"], [1], workers=1, flags=NO_FLAGS)
    assert not any("--nodes" in line for line in sbatch_lines(without))
    with_nodes = render(CPU_TEMPLATE, ["A-v1"], [1], workers=1, flags={**NO_FLAGS, "--slurm-nodes": 2})
    assert "#SBATCH --nodes=2" in sbatch_lines(with_nodes)


def test_exports_go_after_the_sbatch_lines_and_before_the_first_command():
    script = add_exports(render(CPU_TEMPLATE, ["A-v1"], [1], 1, NO_FLAGS), {"WANDB_TAGS": "a b,$(c)"})
    lines = script.splitlines()
    export = lines.index("export WANDB_TAGS='a b,$(c)'")
    assert export > max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    assert export < min(i for i, line in enumerate(lines) if line and not line.startswith("#") and i != export)


@pytest.fixture
def fake_srun(tmp_path: Path) -> dict[str, str]:
    """An environment whose `srun` just runs its arguments, so a rendered script can run without Slurm."""
    return with_fake_program(tmp_path, "srun", '#!/bin/sh\nexec "$@"\n')


def test_every_array_task_runs_its_env_and_seed_with_the_arguments_intact(tmp_path, fake_srun):
    command = [sys.executable, "-c", PRINT_ARGS, "--quote", "it's a {{command}}"]
    script = render(CPU_TEMPLATE, AWKWARD_ENV_IDS, [3, 4], workers=2, flags=NO_FLAGS, command=command)
    script = add_exports(script, {"WANDB_TAGS": "mine,v1 $(x)"})
    path = tmp_path / "job.slurm"
    path.write_text(script)

    seen = []
    for task in range(len(AWKWARD_ENV_IDS) * 2):
        proc = subprocess.run(
            ["bash", str(path)],
            cwd=tmp_path,
            env={**fake_srun, "SLURM_ARRAY_TASK_ID": str(task)},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        echo, printed = proc.stdout.splitlines()
        assert echo.startswith(f"array task {task}: ")
        seen.append(json.loads(printed))
    # task i runs what the local runner numbers i: one numbering of env x seed runs in both modes
    local = sorted(build_runs(["--quote", "it's a {{command}}"], AWKWARD_ENV_IDS, [3, 4]), key=lambda run: run.index)
    assert seen == [[run.argv, "mine,v1 $(x)"] for run in local]
    assert not (tmp_path / "pwned").exists()


# --- the command line, without Slurm ------------------------------------------------------


def test_workers_0_writes_the_script_and_submits_nothing(tmp_path):
    env = with_fake_program(tmp_path, "sbatch", f"#!/bin/sh\ntouch {tmp_path / 'sbatch-called'}\n")
    proc = run_with_cpu_template(
        tmp_path, "--env-ids", "CartPole-v1", "Acrobot-v1", "--command", "python cleanrl/ppo.py --no-cuda", "--num-seeds", "2",
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (path,) = slurm_scripts(tmp_path)
    assert proc.stdout == f"{path.relative_to(tmp_path)}\n"
    assert re.fullmatch(r"[0-9a-f-]{36}\.slurm", path.name)
    assert (tmp_path / "slurm" / "logs").is_dir()
    script = path.read_text()
    assert "#SBATCH --array=0-3" in sbatch_lines(script), "a dry run's array should carry no concurrency limit"
    assert "export PYTHONUNBUFFERED=1" in script and "WANDB_TAGS" not in script
    assert "not submitted (--workers 0)" in proc.stderr
    assert not (tmp_path / "sbatch-called").exists()


def test_submitting_reports_the_job_id_and_how_to_follow_it(tmp_path):
    args_file = tmp_path / "sbatch-args"
    env = with_fake_program(tmp_path, "sbatch", f'#!/bin/sh\necho "$@" > {args_file}\necho "4711;cluster"\n')
    proc = run_with_cpu_template(
        tmp_path, "--env-ids", "CartPole-v1", "--command", "program-only-on-the-cluster --x", "--num-seeds", "3",
        "--workers", "2", env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "4711\n"
    (path,) = slurm_scripts(tmp_path)
    assert args_file.read_text().split() == ["--parsable", str(path.relative_to(tmp_path))]
    assert "#SBATCH --array=0-2%2" in sbatch_lines(path.read_text())
    assert "as job 4711" in proc.stderr and "squeue -j 4711" in proc.stderr
    assert "slurm/logs/4711_<task>.out, slurm/logs/4711_<task>.err" in proc.stderr


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for git_args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first"], ["tag", "v9.9"]):
        subprocess.run(["git", *git_args], cwd=repo, env=git_env, check=True, capture_output=True)
    return repo


def test_the_auto_tag_is_exported_by_the_script(git_repo):
    proc = run_benchmark(
        "--env-ids", "A-v1", "--command", "python x.py", "--num-seeds", "1",
        "--slurm-template-path", str(CPU_TEMPLATE),
        cwd=git_repo, env=script_env(WANDB_TAGS="mine"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (path,) = slurm_scripts(git_repo)
    assert "export WANDB_TAGS=mine,v9.9\n" in path.read_text()


def test_a_flag_the_template_does_not_use_is_reported(tmp_path):
    proc = run_benchmark(
        "--env-ids", "A-v1", "--command", "python x.py", "--no-auto-tag",
        "--slurm-template-path", str(CPU_TEMPLATE), "--slurm-gpus-per-task", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: " in proc.stderr and "does not use --slurm-gpus-per-task" in proc.stderr


def bad_input(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run the benchmark expecting one `benchmark: error:` line and exit code 2; returns that line."""
    proc = run_benchmark("--env-ids", "A-v1", "--command", "python x.py", "--no-auto-tag", *args, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchmark: error: "), proc.stderr
    return lines[0]


def test_a_missing_template_is_an_error(tmp_path):
    assert "cannot find the Slurm template 'nope.slurm_template'" in bad_input(
        tmp_path, "--slurm-template-path", "nope.slurm_template"
    )
    assert not (tmp_path / "slurm").exists()


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("#SBATCH --array={{array}}\nsrun {{command}} {{gpus}}\n", "unknown placeholders {{gpus}}"),
        ("#SBATCH --array={{ array }}\nsrun {{command}}\n", "unknown placeholders {{ array }}"),
        ("#SBATCH --ntasks=1\nsrun {{command}}\n", "lacks {{array}}"),
    ],
)
def test_a_template_that_cannot_be_filled_is_an_error(tmp_path, template, message):
    path = tmp_path / "bad.slurm_template"
    path.write_text(template)
    assert message in bad_input(tmp_path, "--slurm-template-path", str(path))
    assert not (tmp_path / "slurm").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            [],
            "uses {{cpus_per_gpu}}, {{gpus_per_task}}, {{ntasks}}: give --slurm-total-cpus, --slurm-gpus-per-task, --slurm-ntasks",
        ),
        (["--slurm-gpus-per-task", "1", "--slurm-ntasks", "1"], "uses {{cpus_per_gpu}}: give --slurm-total-cpus"),
        (["--slurm-total-cpus", "8", "--slurm-ntasks", "1"], "give --slurm-gpus-per-task"),
        (
            ["--slurm-gpus-per-task", "0", "--slurm-total-cpus", "8", "--slurm-ntasks", "1"],
            "--slurm-gpus-per-task must be positive",
        ),
    ],
)
def test_the_gpu_template_needs_its_numbers(tmp_path, flags, message):
    assert message in bad_input(tmp_path, "--slurm-template-path", str(GPU_TEMPLATE), *flags)


def test_slurm_flags_need_a_template(tmp_path):
    assert "--slurm-ntasks is a Slurm option: it needs --slurm-template-path" in bad_input(tmp_path, "--slurm-ntasks", "1")


def test_log_dir_is_for_local_runs_only(tmp_path):
    line = bad_input(tmp_path, "--slurm-template-path", str(CPU_TEMPLATE), "--log-dir", "logs")
    assert "--log-dir is for local runs" in line


def test_without_sbatch_nothing_is_written(tmp_path):
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    line = bad_input(
        tmp_path, "--slurm-template-path", str(CPU_TEMPLATE), "--workers", "1", env=script_env(PATH=str(empty_bin))
    )
    assert "cannot find sbatch on PATH" in line
    assert not (tmp_path / "slurm").exists()


def test_sbatch_refusing_the_job_shows_why(tmp_path):
    env = with_fake_program(
        tmp_path, "sbatch", "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid partition' >&2\nexit 1\n"
    )
    line = bad_input(tmp_path, "--slurm-template-path", str(CPU_TEMPLATE), "--workers", "1", env=env)
    assert (
        "sbatch refused slurm/" in line
        and "(exit code 1): sbatch: error: Batch job submission failed: Invalid partition" in line
    )


# --- a real single-node Slurm -------------------------------------------------------------

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo", "squeue", "scontrol", "scancel")
START_TIMEOUT = 30.0
JOB_TIMEOUT = 240.0
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


def find_program(name: str) -> str | None:
    # The daemons live in /usr/sbin, which is not on every PATH.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class SlurmCluster:
    """A single-node Slurm started by the fixture: its config, folders and daemons."""

    folder: Path
    conf: Path
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    def env(self, **extra: str) -> dict[str, str]:
        return script_env(SLURM_CONF=str(self.conf), OMP_NUM_THREADS="1", **extra)

    def run(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=30)

    def logs(self) -> str:
        """The end of every daemon's log, for failure messages."""
        # *.out is what a daemon printed itself (e.g. why it could not start), *.log its configured log file.
        paths = sorted(path for path in self.folder.iterdir() if path.suffix in (".log", ".out") and path.stat().st_size)
        return "\n".join(f"--- {path.name} ---\n{log_tail(path)}" for path in paths)

    def start(self, name: str, command: list[str], **popen_args) -> None:
        log = (self.folder / f"{name}.out").open("a")
        with log:
            self.daemons[name] = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,
                **popen_args,
            )

    def check_daemons(self) -> None:
        for name, process in self.daemons.items():
            if process.poll() is not None:
                pytest.fail(f"{name} exited with code {process.returncode} while starting Slurm\n{self.logs()}")

    def stop(self) -> None:
        # Cancel leftover jobs first, so no slurmstepd outlives the daemons.
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.run("scancel", "--user", pwd.getpwuid(os.getuid()).pw_name)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and self.run("squeue", "--noheader").stdout.strip():
                    time.sleep(0.5)
        for name in reversed(list(self.daemons)):
            process = self.daemons[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def wait_for_idle_node(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        state = ""
        while time.monotonic() < deadline:
            self.check_daemons()
            state = self.run("sinfo", "--noheader", "--format=%t").stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        pytest.fail(f"the Slurm node did not become idle within {START_TIMEOUT:.0f} s (sinfo says {state!r})\n{self.logs()}")

    def array_tasks(self, job_id: str) -> dict[int, dict[str, str]]:
        """scontrol's record of each array task of the job (pending tasks share one record, left out)."""
        proc = self.run("scontrol", "--oneliner", "show", "job", job_id)
        tasks = {}
        for line in proc.stdout.splitlines():
            record = dict(item.split("=", 1) for item in line.split() if "=" in item)
            if record.get("ArrayTaskId", "").isdigit():
                tasks[int(record["ArrayTaskId"])] = record
        return tasks

    def wait_for_array(self, job_id: str, size: int, timeout: float = JOB_TIMEOUT) -> dict[int, dict[str, str]]:
        """Wait until every task of the array has ended; returns their scontrol records."""
        deadline = time.monotonic() + timeout
        while True:
            tasks = self.array_tasks(job_id)
            if len(tasks) == size and all(task["JobState"] in FINAL_STATES for task in tasks.values()):
                return tasks
            if time.monotonic() > deadline:
                states = {index: task["JobState"] for index, task in tasks.items()}
                pytest.fail(f"job {job_id} did not finish within {timeout:.0f} s: {states}\n{self.logs()}")
            time.sleep(0.25)


def write_munge_key(path: Path) -> None:
    mungekey = find_program("mungekey")
    if mungekey:
        subprocess.run([mungekey, "--create", f"--keyfile={path}"], check=True, capture_output=True)
    else:
        path.write_bytes(os.urandom(1024))


def start_munged(cluster: SlurmCluster, munge_dir: Path) -> Path:
    """Our own munged, with its own key and socket, so a system munged (if any) is neither needed nor disturbed."""
    munge = pwd.getpwnam("munge")
    # munged runs as user munge and insists that its folder and key be its own and not open to others.
    os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
    munge_dir.chmod(0o755)
    key = munge_dir / "munge.key"
    write_munge_key(key)
    os.chown(key, munge.pw_uid, munge.pw_gid)
    key.chmod(0o600)
    socket_path = munge_dir / "munge.socket"
    cluster.start(
        "munged",
        [
            find_program("munged"), "--foreground", f"--socket={socket_path}", f"--key-file={key}",
            f"--pid-file={munge_dir / 'munged.pid'}", f"--seed-file={munge_dir / 'munged.seed'}",
        ],
        user=munge.pw_uid,
        group=munge.pw_gid,
    )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT
    while not socket_path.exists():
        cluster.check_daemons()
        if time.monotonic() > deadline:
            pytest.fail(f"munged did not create {socket_path} within {START_TIMEOUT:.0f} s\n{cluster.logs()}")
        time.sleep(0.1)
    return socket_path


def slurm_conf(folder: Path, munge_socket: Path) -> str:
    """A minimal single-node cluster: no accounting, no cgroups, everything on loopback and in `folder`."""
    # slurmd finds its node by host name; the addresses are given so that name need not resolve.
    host = socket.gethostname()
    return textwrap.dedent(f"""\
        ClusterName=cleanrltest
        SlurmctldHost={host}(127.0.0.1)
        SlurmUser=root
        SlurmctldPort={free_port()}
        SlurmdPort={free_port()}
        AuthType=auth/munge
        AuthInfo=socket={munge_socket}
        StateSaveLocation={folder / "state"}
        SlurmdSpoolDir={folder / "spool"}
        SlurmctldPidFile={folder / "slurmctld.pid"}
        SlurmdPidFile={folder / "slurmd.pid"}
        SlurmctldLogFile={folder / "slurmctld.log"}
        SlurmdLogFile={folder / "slurmd.log"}
        ProctrackType=proctrack/linuxproc
        TaskPlugin=task/none
        SelectType=select/cons_tres
        SelectTypeParameters=CR_CPU
        MpiDefault=none
        SwitchType=switch/none
        AccountingStorageType=accounting_storage/none
        JobAcctGatherType=jobacct_gather/none
        JobCompType=jobcomp/none
        ReturnToService=2
        MailProg=/bin/true
        SchedulerParameters=batch_sched_delay=0
        NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
        PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
        """)


def slurm_unavailable() -> str | None:
    """Why a real Slurm cannot be started here, or None when it can."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if find_program(name) is None]
    if missing:
        return f"Slurm is not installed (missing {', '.join(missing)}): install the Debian packages slurm-wlm and munge"
    if os.geteuid() != 0:
        return "starting slurmd and munged (as user munge) needs root"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "there is no user munge (the Debian package munge creates it)"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[SlurmCluster]:
    reason = slurm_unavailable()
    if reason:
        missing_system_package(reason)
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    cluster = SlurmCluster(folder, folder / "slurm.conf")
    # munged's folder must be reachable by user munge, which pytest's private temporary folders are not.
    munge_dir = Path(tempfile.mkdtemp(prefix="cleanrl-test-munge-"))
    try:
        munge_socket = start_munged(cluster, munge_dir)
        cluster.conf.write_text(slurm_conf(folder, munge_socket))
        cluster.start("slurmctld", [find_program("slurmctld"), "-D", "-i"])
        cluster.start("slurmd", [find_program("slurmd"), "-D"])
        cluster.wait_for_idle_node()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(munge_dir, ignore_errors=True)


def submit(cluster: SlurmCluster, cwd: Path, env_ids: list[str], command: str, num_seeds: int, workers: int, **env: str):
    """Submit a benchmark with the CPU template; returns the job id and the script."""
    proc = run_benchmark(
        "--env-ids", *env_ids,
        "--command", command,
        "--num-seeds", str(num_seeds),
        "--workers", str(workers),
        "--slurm-template-path", str(CPU_TEMPLATE),
        cwd=cwd,
        env=cluster.env(**env),
    )  # fmt: skip
    assert proc.returncode == 0, f"{proc.stderr}\n{cluster.logs()}"
    (script,) = slurm_scripts(cwd)
    return proc.stdout.strip(), script.read_text()


def task_logs(cwd: Path, job_id: str, task: int) -> str:
    out, err = (cwd / "slurm" / "logs" / f"{job_id}_{task}.{suffix}" for suffix in ("out", "err"))
    return f"--- stdout ---\n{log_tail(out)}\n--- stderr ---\n{log_tail(err)}"


def assert_all_completed(cluster: SlurmCluster, cwd: Path, job_id: str, tasks: dict[int, dict[str, str]]) -> None:
    for index, task in sorted(tasks.items()):
        ok = task["JobState"] == "COMPLETED" and task["ExitCode"] == "0:0"
        assert ok, (
            f"array task {index}: {task['JobState']} {task['ExitCode']}\n{task_logs(cwd, job_id, index)}\n{cluster.logs()}"
        )


@pytest.mark.extended  # 31 s of one core: CI runs it after the quick run
def test_a_ppo_benchmark_runs_as_a_slurm_job_array(slurm, tmp_path):
    env_ids, seeds = ["CartPole-v1", "Acrobot-v1"], [1, 2]
    command = shlex.join([sys.executable, str(REPO / "cleanrl" / "ppo.py"), "--no-cuda", "--total-timesteps", "2048"])
    job_id, script = submit(slurm, tmp_path, env_ids, command, num_seeds=2, workers=2)
    assert job_id.isdigit()
    assert "#SBATCH --array=0-3%2" in sbatch_lines(script)

    tasks = slurm.wait_for_array(job_id, size=4)
    assert sorted(tasks) == [0, 1, 2, 3]
    assert_all_completed(slurm, tmp_path, job_id, tasks)
    # Task i runs environment i // 2 with seed i % 2.
    for index in range(4):
        first_line = (tmp_path / "slurm" / "logs" / f"{job_id}_{index}.out").read_text().splitlines()[0]
        assert first_line == f"array task {index}: env_id={env_ids[index // 2]} seed={seeds[index % 2]}"

    run_dirs = sorted((tmp_path / "runs").iterdir())
    pairs = sorted((name.split("__")[0], int(name.split("__")[2])) for name in (path.name for path in run_dirs))
    assert pairs == sorted((env_id, seed) for env_id in env_ids for seed in seeds)
    for run_dir in run_dirs:
        returns = read_scalars(run_dir).get("charts/episodic_return")
        assert returns, f"{run_dir.name} logged no episodic returns"


def test_awkward_env_ids_and_the_auto_tag_reach_the_runs_through_slurm(slurm, git_repo):
    command = shlex.join([sys.executable, "-c", PRINT_ARGS])
    job_id, _ = submit(slurm, git_repo, AWKWARD_ENV_IDS, command, num_seeds=1, workers=3, WANDB_TAGS="mine")

    tasks = slurm.wait_for_array(job_id, size=len(AWKWARD_ENV_IDS), timeout=60)
    assert_all_completed(slurm, git_repo, job_id, tasks)
    for index, env_id in enumerate(AWKWARD_ENV_IDS):
        printed = (git_repo / "slurm" / "logs" / f"{job_id}_{index}.out").read_text().splitlines()[-1]
        assert json.loads(printed) == [["--env-id", env_id, "--seed", "1"], "mine,v9.9"]
    assert not (git_repo / "pwned").exists()
