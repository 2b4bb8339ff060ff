"""What an algorithm file imports while it trains; the offline tools live one level up, in cleanrl_utils/."""

import os
import sys

# --capture-video draws pygame frames off screen: with no display, SDL's default drivers first print an XDG error
if sys.platform.startswith("linux") and not any(os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")):
    os.environ["SDL_VIDEODRIVER"] = "dummy"
