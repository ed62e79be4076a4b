#!/usr/bin/env bash
# Host services the test suite needs: Redis, and (when the Docker backend is wanted) dockerd and the
# sandbox image. Idempotent; run as root on Debian. Nothing here names a package registry's host: apt uses
# the machine's own sources.
#
# AZR_SKIP_DOCKER=1 skips the Docker part (machines without Docker; the docker tests then skip), and
# AZR_REQUIRE_DOCKER=1 (set by CI) makes any failure of it fatal. Otherwise a Docker failure is reported
# and the rest of the setup still runs.
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

docker_ready() { docker info >/dev/null 2>&1; }

# A dockerd killed with its machine's session leaves its pid files behind. On the next boot the pid in
# them may belong to another process, and dockerd then refuses to start ("pid file found"), or waits on a
# containerd that is not there. Called only when no dockerd is running: the files are then stale.
clear_stale_pid_files() {
    local f
    for f in /var/run/docker.pid /var/run/docker/containerd/containerd.pid; do
        [[ -e "$f" ]] || continue
        log "removing stale ${f} (no dockerd is running)"
        rm -f "$f"
    done
}

start_dockerd() {
    need_pkg docker.io debootstrap || return 1
    docker_ready && return
    # Without systemd (containers, CI runners) dockerd is started here, in the background, with a log.
    local log_file=/var/log/azr/dockerd.log
    local timeout_s=120
    mkdir -p /var/log/azr
    if pgrep -x dockerd >/dev/null; then
        log "dockerd is running but not answering yet; waiting for it"
    else
        clear_stale_pid_files
        log "starting dockerd (log: ${log_file})"
        nohup dockerd >>"$log_file" 2>&1 </dev/null &
    fi
    # A daemon that cleans up after an unclean stop can take a while; one that exited will not come back.
    for _ in $(seq $((timeout_s * 5))); do
        docker_ready && return
        pgrep -x dockerd >/dev/null || break
        sleep 0.2
    done
    docker_ready && return
    if pgrep -x dockerd >/dev/null; then
        log "dockerd did not come up within ${timeout_s} s; the end of ${log_file}:"
    else
        log "dockerd exited; the end of ${log_file}:"
    fi
    grep -v 'module=grpc' "$log_file" | tail -n 20 | sed 's/^/[dockerd] /' >&2
    return 1
}

setup_docker() {
    start_dockerd && bash docker/build-sandbox-image.sh
}

# `host-setup.sh run`: only what the main job (`azr selfplay`) needs; without an argument, all the tests need.
mode="${1:-test}"
need_pkg util-linux mount bubblewrap redis-server
if [[ "$mode" == run ]]; then
    exit 0
fi
# The dashboard's browser tests: Debian's headless Chromium and its WebDriver (never a downloaded browser).
need_pkg chromium chromium-driver fonts-dejavu-core
start_redis
if [[ "${AZR_SKIP_DOCKER:-0}" == 1 ]]; then
    log "AZR_SKIP_DOCKER=1: skipping dockerd and the sandbox image"
elif [[ "${AZR_REQUIRE_DOCKER:-0}" == 1 ]]; then
    setup_docker
elif ! setup_docker; then
    log "Docker setup failed: the docker backend and its tests will be skipped (AZR_REQUIRE_DOCKER=1 makes this fatal)"
fi
