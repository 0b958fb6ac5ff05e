# clawpen host as a container. It runs `clawpen serve` and starts each agent's
# sandbox as a sibling container through the mounted Docker socket.
#
# Build (after `make build image`, which also makes the local Debian base):
#   docker build -t clawpen:latest .
# With a registry, build the binaries in a Go stage instead:
#   docker build --build-arg BASE=debian:bookworm-slim -t clawpen:latest .
#   (bin/ must still hold the binaries; see README "Host as a container").
#
# Run: see docs/host-container.md and configs/compose.yaml. The sandboxes'
# bind sources must be paths on the Docker host: mount the host directory
# that holds data/ and groups/ at CLAWPEN_ROOT (/app) and give its Docker-host
# path as CLAWPEN_HOST_ROOT.
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
# Give it the Docker socket's group with --group-add.
USER 1000:1000
VOLUME ["/app/data", "/app/groups"]
ENTRYPOINT ["/usr/local/bin/clawpen"]
CMD ["serve"]
