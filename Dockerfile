# clawpen host as a container. It runs `clawpen serve` and starts each agent's
# sandbox as a sibling container through the mounted Docker socket.
#
# Nothing is compiled here: the build copies the two binaries `make build`
# left in bin/, which are all that .dockerignore lets reach the engine. From
# the project root:
#
#   make build image                  # binaries, local Debian base, agent image
#   docker build -t clawpen:latest .
#
# BASE defaults to clawpen-base:bookworm, the local base `make image` makes
# without a registry. With registry access any Debian-like image works whose
# glibc is not older than the build machine's (the host binary links SQLite
# with cgo):
#   docker build --build-arg BASE=debian:bookworm-slim -t clawpen:latest .
#
# Run: see docs/host-container.md and configs/compose.yaml. The engine binds
# the sandboxes' folders from the Docker host: mount the Docker host's
# directory holding data/ and groups/ (and any extra mounts) at CLAWPEN_ROOT,
# /app, and give its Docker-host path as CLAWPEN_HOST_ROOT.
ARG BASE=clawpen-base:bookworm
FROM ${BASE}

USER root
RUN set -eu; \
    if ! getent group 1000 >/dev/null; then groupadd -g 1000 clawpen; fi; \
    if ! getent passwd 1000 >/dev/null; then useradd -u 1000 -g 1000 -d /app -s /usr/sbin/nologin -M clawpen; fi; \
    mkdir -p /app/data /app/groups/main /app/groups/global; \
    chown -R 1000:1000 /app; chmod 0700 /app/data

# The host binary links SQLite with cgo (glibc); the agent is static.
COPY bin/clawpen bin/clawpen-agent /usr/local/bin/

ENV CLAWPEN_ROOT=/app \
    CLAWPEN_DATA_DIR=/app/data \
    CLAWPEN_GROUPS_DIR=/app/groups \
    CLAWPEN_SANDBOX=docker
WORKDIR /app
# uid 1000, the sandbox user of the Docker backend: the host needs no root.
# Give it the Docker socket's group with --group-add. No VOLUME: an anonymous
# volume over /app/data would hide the Docker host's data/ under the /app bind.
USER 1000:1000
ENTRYPOINT ["/usr/local/bin/clawpen"]
CMD ["serve"]
