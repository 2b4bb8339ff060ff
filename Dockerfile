# syntax=docker/dockerfile:1
# CleanRL image: the project and its common extras, ready to run any script of the
# base install and of the atari, mujoco and box2d extras (plus envpool on linux/amd64).
#
#   docker buildx build --platform linux/amd64 -t cleanrl:latest --load .
#   docker run --rm cleanrl:latest python cleanrl/ppo.py --env-id CartPole-v1 --capture-video
#
# The image has not been built on the project's CI machines (they have no Docker
# engine); `hadolint Dockerfile` runs in the test suite.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: a virtual environment with the project installed -------------------
FROM ${PYTHON_IMAGE} AS builder

# A compiler and swig build the packages that have no wheel for the target platform
# (Box2D on linux/arm64); the final image does not carry them.
# Apt versions are not pinned: the Debian security archive replaces old versions, so a
# pin breaks the build within weeks; the base image tag fixes the Debian release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential swig \
    && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/venv \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv "${VIRTUAL_ENV}"
ENV PATH="${VIRTUAL_ENV}/bin:${PATH}"

# Extras installed on every platform; envpool only publishes linux/amd64 wheels.
ARG CLEANRL_EXTRAS=atari,mujoco,box2d
ARG CLEANRL_EXTRAS_AMD64=envpool
ARG TARGETARCH

WORKDIR /src
# Dependencies first, from pyproject.toml alone, with empty packages standing in for
# the code: editing a script then rebuilds only the last layers, not torch & co.
COPY pyproject.toml README.md LICENSE ./
RUN --mount=type=cache,target=/root/.cache/pip \
    mkdir cleanrl cleanrl_utils \
    && touch cleanrl/__init__.py cleanrl_utils/__init__.py \
    && extras="${CLEANRL_EXTRAS}" \
    && if [ "${TARGETARCH}" = "amd64" ] && [ -n "${CLEANRL_EXTRAS_AMD64}" ]; then extras="${extras},${CLEANRL_EXTRAS_AMD64}"; fi \
    && pip install "cleanrl[${extras}] @ file:///src"

# Now the real code: cleanrl and cleanrl_utils go into the environment's site-packages;
# the import check fails the build early rather than at the first job.
COPY . .
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install --no-deps --force-reinstall . \
    && python -c "import cleanrl_utils.benchmark, cleanrl_utils.runtime.experiment, gymnasium, torch"

# ---- runtime ------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

# xvfb + xauth: a virtual display for --capture-video (xvfb-run in the entrypoint);
# tini: PID 1 that forwards SIGTERM (docker stop, AWS Batch timeouts) to the run;
# libgl1/libegl1/libosmesa6: OpenGL for MuJoCo rendering (osmesa on CPUs, EGL on GPUs).
# (OpenCV is the headless wheel and Procgen's Qt 5 comes as a wheel: neither needs a system library.)
# Apt versions are not pinned, for the reason given in the builder stage.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        xvfb xauth tini \
        libgl1 libegl1 libosmesa6 \
    && rm -rf /var/lib/apt/lists/*

COPY --from=builder /opt/venv /opt/venv
COPY docker/entrypoint.sh /usr/local/bin/cleanrl-entrypoint

# Runs write runs/, videos/ and wandb/ into the working folder, so the unprivileged
# user owns it.
RUN useradd --create-home --uid 1000 --shell /bin/bash cleanrl \
    && install -d -o cleanrl -g cleanrl /cleanrl
WORKDIR /cleanrl
# The scripts by path (python cleanrl/ppo.py), the benchmark files and the docs.
COPY --chown=cleanrl:cleanrl . .

ENV VIRTUAL_ENV=/opt/venv \
    PATH="/opt/venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    MUJOCO_GL=osmesa \
    PYOPENGL_PLATFORM=osmesa \
    SDL_AUDIODRIVER=dummy \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics

# Numeric, so that orchestrators checking for a non-root user can resolve it.
USER 1000:1000
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "/usr/local/bin/cleanrl-entrypoint"]
CMD ["python", "cleanrl/ppo.py", "--help"]
