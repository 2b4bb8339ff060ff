"""How much faster dqn.py could run on CartPole without changing what it computes.

    python -m benchmark.studies.dqn_speed_ceiling [--steps 50000] [--rounds 3] [--out benchmark/results/dqn_speed_ceiling.md]

Each round runs `cleanrl/dqn.py` on one thread twice, one after the other: as it is, and with learning
starting only 200 steps before the end (20 updates, so that it logs its SPS). The difference is the time
of its learning updates;
the rest is acting (env step, replay insert, the greedy forward, the loop). Then it times, in this
process, the two pieces of work the loop repeats: the greedy action of one observation (the file's
`QNetwork`, and the same arithmetic in NumPy, about the cheapest a Python loop can make it); an
update's time is the learning time over the number of updates.

From these it writes the ceilings: the speed-up if the greedy action cost what NumPy's costs, or
nothing at all, and the rate of arithmetic of an update. A speed-up bar above these ceilings needs a
change of what the file does (several envs per step, a smaller network), not a faster way to do it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmark.harness import measured_at, one_thread_sps, positive_int, this_command
from cleanrl.dqn import Args, QNetwork, linear_schedule
from cleanrl_utils.runtime import atomic

REPO = Path(__file__).resolve().parents[2]

ENV_ID = "CartPole-v1"
ACTING_ONLY_TAIL = 200  # the acting-only run learns in its last steps: dqn.py logs its SPS from its updates


def run_sps(steps: int, learning_starts: int) -> float:
    """The last `charts/SPS` of one dqn.py run on one thread."""
    return one_thread_sps(
        "dqn", ["--env-id", ENV_ID, "--seed", "1", "--total-timesteps", str(steps), "--learning-starts", str(learning_starts)]
    )


def seconds_per_call(call, repeats: int = 3000) -> float:
    """Median over five batches of the mean time of one call."""
    call()
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        batches.append((time.perf_counter() - start) / repeats)
    return statistics.median(batches)


def time_greedy_action() -> dict[str, float]:
    """Seconds of one greedy action of the file's QNetwork (torch, one thread) and of the same arithmetic in NumPy."""
    import gymnasium as gym

    torch.set_num_threads(1)
    env = gym.make(ENV_ID)
    q_network = QNetwork(env)
    obs, _ = env.reset(seed=1)

    def greedy_torch() -> int:
        with torch.inference_mode():
            return q_network(torch.as_tensor(obs, dtype=torch.float32)).argmax().item()

    layers = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in q_network.network if hasattr(m, "weight")]

    def greedy_numpy() -> int:
        h = obs
        for i, (w, b) in enumerate(layers):
            h = w @ h + b
            h = np.maximum(h, 0) if i < len(layers) - 1 else h
        return int(h.argmax())

    forward_macs = sum(w.size for w, _ in layers)  # multiply-adds of one observation's forward
    return {
        "greedy_torch": seconds_per_call(greedy_torch),
        "greedy_numpy": seconds_per_call(greedy_numpy),
        "update_flop": 2 * forward_macs * Args.batch_size * 4,  # target and online forwards, backward (about two)
    }


def report(steps: int, full: list[float], acting: list[float], pieces: dict[str, float], args: Args) -> str:
    duration = args.exploration_fraction * steps
    greedy_steps = sum(1 - linear_schedule(args.start_e, args.end_e, duration, t) for t in range(steps))
    updates = len(range(args.learning_starts + 1, steps, args.train_frequency))
    seconds_full, seconds_acting = steps / statistics.median(full), steps / statistics.median(acting)
    learning = seconds_full - seconds_acting  # less the acting-only run's 20 updates: a few hundredths of a second
    greedy = greedy_steps * pieces["greedy_torch"]
    saved_by_numpy = greedy_steps * (pieces["greedy_torch"] - pieces["greedy_numpy"])
    rows = [
        ("dqn.py SPS, as it is (each round)", f"{statistics.median(full):.0f} ({', '.join(f'{v:.0f}' for v in full)})"),
        (
            "dqn.py SPS, learning only in the last 200 steps",
            f"{statistics.median(acting):.0f} ({', '.join(f'{v:.0f}' for v in acting)})",
        ),
        ("learning updates", f"{updates}: {learning:.2f} s of {seconds_full:.2f} s ({learning / seconds_full:.0%})"),
        (
            "one update (learning time ÷ updates)",
            f"{learning / updates * 1e6:.0f} µs, {pieces['update_flop'] * updates / learning / 1e9:.1f} GFLOP/s",
        ),
        ("greedy actions (expected count under the ε schedule)", f"{greedy_steps:.0f}"),
        ("one greedy action: torch / NumPy", f"{pieces['greedy_torch'] * 1e6:.1f} µs / {pieces['greedy_numpy'] * 1e6:.1f} µs"),
        ("greedy actions' share of the run", f"{greedy / seconds_full:.0%}"),
        ("ceiling with a NumPy greedy action", f"{seconds_full / (seconds_full - saved_by_numpy):.2f}×"),
        ("ceiling with a free greedy action", f"{seconds_full / (seconds_full - greedy):.2f}×"),
    ]
    lines = [f"# dqn.py on {ENV_ID}: where its time goes, and its ceilings", "", measured_at(this_command()), ""]
    lines += [f"{steps} steps, learning from step {args.learning_starts}, one update every {args.train_frequency} steps;"]
    lines += [f"torch {torch.__version__}, {os.cpu_count()} CPUs, one thread.", "", "| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive_int, default=50_000, help="each run's budget")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds of the two runs; medians are reported")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark" / "results" / "dqn_speed_ceiling.md")
    options = parser.parse_args()
    args = Args()
    if options.steps < args.learning_starts + 1000:
        parser.error(
            f"--steps must be at least {args.learning_starts + 1000} (dqn.py learns from step {args.learning_starts})"
        )
    full, acting = [], []
    for round_ in range(options.rounds):
        full.append(run_sps(options.steps, args.learning_starts))
        acting.append(run_sps(options.steps, options.steps - ACTING_ONLY_TAIL))
        print(f"round {round_ + 1}: {full[-1]:.0f} SPS as it is, {acting[-1]:.0f} without learning", flush=True)
    text = report(options.steps, full, acting, time_greedy_action(), args)
    atomic.write_text(options.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
