#!/bin/sh
# Entry point of the CleanRL image: run the given command under a virtual X display.
#
# Containers have no screen, but `--capture-video`, pygame's renderer and MuJoCo's GLFW
# backend want one; xvfb-run starts a private Xvfb server for the lifetime of the command
# and passes the command's exit status through. When DISPLAY is already set (a display
# was forwarded into the container) the command runs as is.
set -eu

if [ "$#" -eq 0 ]; then
    echo "entrypoint: no command given (e.g. python cleanrl/ppo.py --help)" >&2
    exit 2
fi

if [ -n "${DISPLAY:-}" ]; then
    exec "$@"
fi

if command -v xvfb-run >/dev/null 2>&1; then
    # --auto-servernum picks a free display number, so parallel containers sharing a
    # host network namespace do not clash; -nolisten tcp keeps the display private.
    exec xvfb-run --auto-servernum --server-args="-screen 0 1280x1024x24 -nolisten tcp" "$@"
fi

# Outside the image (e.g. a local test run) the command still runs, only without a display.
echo "entrypoint: xvfb-run not found; running without a virtual display" >&2
exec "$@"
