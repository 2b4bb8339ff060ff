"""A stand-in training script for the tuner tests: logs a known metric to TensorBoard in a blink.

It takes the flags every algorithm script takes (`--env-id`, `--seed`, `--exp-name`) and writes
`runs/{env_id}__{exp_name}__{seed}__{unix time}` like them. The final values of
`charts/episodic_return` are all `x * (seed + 1) + OFFSETS[env_id]`, so tests can work out each
score by hand. It frames the TensorBoard events itself instead of importing torch or
tensorboard's writer, which would take most of each run's time.
"""

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

OFFSETS = {"EnvA-v0": 0.0, "EnvB-v0": 10.0, "EnvC-v0": 40.0}
METRIC = "charts/episodic_return"
# Logged before the final values: a tuner averaging more than the last FINAL_COUNT values sees them.
EARLY_VALUE, EARLY_COUNT = 1000.0, 10
FINAL_COUNT = 50


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """The checksum TFRecord files carry: CRC-32C, rotated and offset."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_record(file, event: Event) -> None:
    data = event.SerializeToString()
    length = struct.pack("<Q", len(data))
    file.write(length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data)))


def write_events(run_dir: str, tag: str, values: list[float]) -> None:
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}")
    with open(path, "wb") as file:
        write_record(file, Event(wall_time=time.time(), file_version="brain.Event:2"))
        for step, value in enumerate(values):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            write_record(file, Event(wall_time=time.time(), step=step, summary=summary))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--exp-name", default="fake")
    parser.add_argument("--x", type=float, default=1.0)
    parser.add_argument("--crash", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--log-metric", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--pid-file", help="start a child that ignores SIGTERM; write [own pid, child pid] here")
    args = parser.parse_args()
    if args.env_id not in OFFSETS:
        print(f"error: unknown env id {args.env_id!r}", file=sys.stderr)
        return 2
    print(f"fake training of {args.env_id} with x={args.x}, seed={args.seed}")
    if args.pid_file:  # a helper process of the run (a data loader, an env worker) that only SIGKILL ends
        ignore_sigterm = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
        child = subprocess.Popen([sys.executable, "-c", ignore_sigterm])
        with open(args.pid_file + ".tmp", "w") as f:
            json.dump([os.getpid(), child.pid], f)
        os.replace(args.pid_file + ".tmp", args.pid_file)
    time.sleep(args.sleep)
    if args.crash:
        print("RuntimeError: the fake run crashed on purpose", file=sys.stderr)
        return 3
    score = args.x * (args.seed + 1) + OFFSETS[args.env_id]
    run_dir = f"runs/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    tag = METRIC if args.log_metric else "charts/something_else"
    write_events(run_dir, tag, [EARLY_VALUE] * EARLY_COUNT + [score] * FINAL_COUNT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
