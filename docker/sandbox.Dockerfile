# The executor's sandbox image: Python 3 and the `azr.executor` package (standard library only), run by an
# unprivileged user whose only process is the sandbox supervisor. The container is started read-only,
# without network and with every capability dropped (see azr/executor/backends/docker.py); nothing in the
# image needs to be writable.
#
# Build it with docker/build-sandbox-image.sh: offline it debootstraps the base and builds this file on it;
# with a registry, AZR_SANDBOX_BASE=python:3.11-slim-bookworm builds on the official image instead. The
# script's build context holds only azr/__init__.py and azr/executor/.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# The package is made importable through a .pth file in the interpreter's own site directory (read under
# `-s`, which drops only the user site), whichever base image (Debian's python3 or the official one) is used.
COPY azr/__init__.py /opt/azr/azr/__init__.py
COPY azr/executor /opt/azr/azr/executor
RUN set -eu; \
    find /opt/azr -name '__pycache__' -prune -exec rm -rf {} +; \
    python3 -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"]).mkdir(parents=True, exist_ok=True); (pathlib.Path(sysconfig.get_paths()["purelib"]) / "azr_sandbox.pth").write_text("/opt/azr\n")'; \
    python3 -m compileall -q /opt/azr; \
    groupadd --gid 10001 sandbox; \
    useradd --no-log-init --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sandbox; \
    python3 -s -P -c 'import azr.executor.sandbox.supervisor'

ARG AZR_SANDBOX_TAG=dev
LABEL org.azr.sandbox.tag="${AZR_SANDBOX_TAG}"
ENV LANG=C.UTF-8
USER 10001:10001
WORKDIR /tmp
# Not -I or -E: they make Python ignore PYTHONHASHSEED, which the backend sets per hash-seed slot. The
# supervisor is meant to be the container's PID 1 (started without --init): it then kills and reaps every
# process a job leaves behind, and a job cannot signal it.
ENTRYPOINT ["python3", "-s", "-P", "-B", "-m", "azr.executor.sandbox.supervisor"]
