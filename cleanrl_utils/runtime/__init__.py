"""What an algorithm file imports while it trains; the offline tools live one level up, in cleanrl_utils/."""

import os
import sys

# pygame draws --capture-video's frames off screen; on Linux with no display, SDL's default drivers print
# "XDG_RUNTIME_DIR is invalid or not set" on stderr first. Its dummy driver draws the same frames silently.
if sys.platform.startswith("linux") and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
