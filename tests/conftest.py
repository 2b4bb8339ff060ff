import os

# Rendering and W&B must never need a display or the network during tests.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("MUJOCO_GL", "egl")
