#!/usr/bin/env bash
# ppo.py on CartPole-v1, published defaults, 500k steps, seeds 1-3 (see run_seeds.sh for the knobs).
exec "$(dirname "$0")/run_seeds.sh" ppo CartPole-v1
