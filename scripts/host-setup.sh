#!/usr/bin/env bash
# Host services the test suite needs: Redis, and (when the Docker backend is wanted) dockerd and the
# sandbox image. Idempotent; run as root on Debian. Nothing here names a package registry's host: apt uses
# the machine's own sources.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[host-setup] %s\n' "$*" >&2; }

apt_updated=0
need_pkg() {
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        if ((apt_updated == 0)); then
            apt-get update -qq
            apt_updated=1
        fi
        log "installing ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

start_redis() {
    need_pkg redis-server redis-tools
    if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
        return
    fi
    log "starting redis on 127.0.0.1:6379"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
    for _ in $(seq 50); do
        redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "redis did not start"; exit 1
}

need_pkg util-linux bubblewrap
start_redis
