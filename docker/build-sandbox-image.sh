#!/usr/bin/env bash
# Builds the executor's sandbox image without an image registry, in one idempotent command:
#   1. debootstrap a minimal Debian (variant minbase, plus python3) from the machine's own apt mirror,
#      trimmed of documentation, locales and package caches, and cache the tarball outside the repository;
#   2. `docker import` it as the base image;
#   3. build docker/sandbox.Dockerfile on top of it.
# The image is tagged azr-sandbox:<content hash of azr.executor> (see azr/executor/backends/docker_image.py)
# and is not rebuilt when that tag already exists. Needs root, a running dockerd and debootstrap.
#
# Environment: AZR_CACHE_DIR (default /var/cache/azr), AZR_DEBIAN_SUITE (default bookworm),
# AZR_DEBIAN_MIRROR (default: the first Debian mirror in the apt sources), AZR_FORCE_REBUILD=1, and
# AZR_SANDBOX_BASE to build on a registry image (e.g. python:3.11-slim-bookworm) instead of debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[sandbox-image] %s\n' "$*" >&2; }

cache_dir="${AZR_CACHE_DIR:-/var/cache/azr}"
suite="${AZR_DEBIAN_SUITE:-bookworm}"
rootfs_version=2 # raise when build_rootfs_tarball changes what the base holds (renames the cache and tag)
base_ref="azr-sandbox-base:${suite}-r${rootfs_version}"
image_ref="$(python3 -m azr.executor.backends.docker_image)"

# shellcheck source=docker/debian-mirror.sh
source docker/debian-mirror.sh

build_rootfs_tarball() {
    local tarball="$1" mirror root
    mirror="${AZR_DEBIAN_MIRROR:-$(debian_mirror)}"
    root="$(mktemp -d "${cache_dir}/rootfs.XXXXXX")"
    # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
    trap "rm -rf '$root'" EXIT
    log "debootstrap ${suite} (minbase + python3) from ${mirror}"
    debootstrap --variant=minbase --include=python3 "$suite" "$root" "$mirror" >"${cache_dir}/debootstrap.log" 2>&1 \
        || { log "debootstrap failed; see ${cache_dir}/debootstrap.log"; exit 1; }
    # What a sandbox never needs: package caches and indexes, documentation, locales, character-set
    # converters, Perl, apt, and the parts of the Python library for tests, docs and installers. Fewer
    # interpreters and tools in the image also means fewer tools for a job that gets to exec something.
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
        "$root"/usr/lib/*-linux-gnu/gconv "$root"/usr/lib/*-linux-gnu/perl-base \
        "$root"/usr/share/perl* "$root"/usr/bin/perl* "$root"/usr/bin/apt* "$root"/usr/lib/apt \
        "$root"/usr/lib/python3.*/test "$root"/usr/lib/python3.*/pydoc_data \
        "$root"/usr/lib/python3.*/ensurepip "$root"/usr/lib/python3.*/lib2to3 "$root"/usr/lib/python3.*/idlelib
    tar --numeric-owner -C "$root" -cf "${tarball}.partial" .
    mv "${tarball}.partial" "$tarball"
    rm -rf "$root"
    trap - EXIT
}

main() {
    if ! docker info >/dev/null 2>&1; then
        log "cannot reach the Docker engine; start dockerd (scripts/host-setup.sh does) and retry"
        exit 1
    fi
    if [[ "${AZR_FORCE_REBUILD:-0}" != 1 ]] && docker image inspect "$image_ref" >/dev/null 2>&1; then
        log "${image_ref} is up to date"
        return
    fi
    mkdir -p "$cache_dir"
    if [[ -n "${AZR_SANDBOX_BASE:-}" ]]; then
        base_ref="$AZR_SANDBOX_BASE"
    elif ! docker image inspect "$base_ref" >/dev/null 2>&1; then
        local tarball="${cache_dir}/${suite}-minbase-python3-r${rootfs_version}.tar"
        [[ -s "$tarball" ]] || build_rootfs_tarball "$tarball"
        log "importing ${tarball} as ${base_ref}"
        docker import --change 'CMD ["/usr/bin/python3"]' "$tarball" "$base_ref" >/dev/null
    fi
    # The build context holds only what the image carries (never the virtualenv or the rest of the tree).
    local context
    context="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$context'" EXIT
    mkdir -p "$context/azr"
    cp azr/__init__.py "$context/azr/"
    cp -r azr/executor "$context/azr/"
    log "building ${image_ref} on ${base_ref}"
    DOCKER_BUILDKIT=0 docker build --network none \
        --build-arg "BASE_IMAGE=${base_ref}" --build-arg "AZR_SANDBOX_TAG=${image_ref#*:}" \
        -f docker/sandbox.Dockerfile -t "$image_ref" "$context" >"${cache_dir}/build.log" 2>&1 \
        || { cat "${cache_dir}/build.log" >&2; log "build failed"; exit 1; }
    rm -rf "$context"
    trap - EXIT
    log "built ${image_ref} ($(docker image inspect -f '{{.Size}}' "$image_ref") bytes)"
}

main "$@"
