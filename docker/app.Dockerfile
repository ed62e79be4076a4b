# The application image: every Python service of the cluster (the Ray head and workers, the learner, the
# executor service, the REST API) and Redis, from one image. The project and its dependencies are installed
# into /opt/venv from a wheelhouse in the build context, so the build itself needs no network.
#
# Build it with docker/build-app-image.sh (`make images`): offline it debootstraps the base (Debian's
# python3, python3-venv and redis-server) and fills the wheelhouse with the host's own pip and its own
# configuration; with a registry, AZR_APP_BASE=python:3.11-slim-bookworm builds on the official image
# instead (Redis then comes from that image's apt sources, so that build needs the network).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The dependencies, in a stage of their own: the final image copies the virtualenv from it and never holds
# the wheelhouse. --no-index: every wheel comes from the wheelhouse, which the recipe filled with exactly
# the project's dependency closure (torch's CPU build pinned, DeepSpeed built against it).
FROM ${BASE_IMAGE} AS base
# On a registry base, the same Debian packages the offline base carries; a no-op on the debootstrapped one.
RUN set -eu; \
    if ! command -v redis-server >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3-venv redis-server ca-certificates libgomp1 >/dev/null; \
        rm -rf /var/lib/apt/lists/*; \
    fi

FROM base AS dependencies
COPY wheels /tmp/wheels
RUN set -eu; \
    python3 -m venv /opt/venv; \
    /opt/venv/bin/pip install --quiet --no-index --no-cache-dir --find-links /tmp/wheels /tmp/wheels/*.whl

FROM base
RUN set -eu; \
    groupadd --gid 10001 azr; \
    useradd --no-log-init --uid 10001 --gid 10001 --create-home --home-dir /home/azr --shell /usr/sbin/nologin azr; \
    mkdir -p /var/lib/azr /data; \
    chown azr:azr /var/lib/azr /data
# Two layers, so that a change of the code rebuilds only the second, small one.
COPY --from=dependencies /opt/venv /opt/venv

# Then the project itself, without touching its dependencies.
ARG AZR_EXTRAS=""
COPY src /tmp/src
RUN set -eu; \
    /opt/venv/bin/pip install --quiet --no-index --no-cache-dir --no-deps --no-build-isolation \
        "/tmp/src${AZR_EXTRAS:+[$AZR_EXTRAS]}"; \
    rm -rf /tmp/src; \
    /opt/venv/bin/python -m compileall -q /opt/venv/lib/python3.11/site-packages/azr; \
    /opt/venv/bin/pip check; \
    /opt/venv/bin/azr --help >/dev/null

ARG AZR_APP_TAG=dev
ARG AZR_SANDBOX_IMAGE=unknown
LABEL org.azr.app.tag="${AZR_APP_TAG}" org.azr.sandbox.image="${AZR_SANDBOX_IMAGE}"
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/azr
USER 10001:10001
WORKDIR /var/lib/azr
CMD ["azr", "--help"]
