# shellcheck shell=bash
# ./convoy image: the container image of deploy/docker/Dockerfile (docs/deploy.md, "The container image").
# Sourced by ./convoy (which defines log, ROOT, RELEASE, KNOWN_RELEASES, JOBS and CLANG_VERSION); defines
# functions only.

# ./convoy image [--tag=NAME] [--engine=podman|docker] [--release=R] [engine build args]
#   Builds deploy/docker/Dockerfile into NAME (default convoy-rl:cpu) with podman (or docker, where podman is
#   missing), its build and runtime stages on debian:R and debian:R-slim (R: bookworm by default). Where the
#   engine has no such image, one is made: debootstrap --variant=minbase from this machine's own apt sources
#   (as root; the tarball kept under $CONVOY_IMAGE_CACHE, default /var/cache/convoy/image), imported under
#   both names. With podman this machine's ccache is mounted into the build; docker builds with BuildKit (the
#   Dockerfile's cache mount keeps the compiler's cache in the daemon's build cache), through the daemon
#   $DOCKER_HOST names. Other arguments go to the engine's build (--build-arg LIBTORCH_URL=... for the gpu
#   image, docs/deploy.md).
cmd_image() {
  local tag=convoy-rl:cpu engine="" release=bookworm args=()
  for a in "$@"; do
    case "$a" in
      --tag=*) tag="${a#--tag=}" ;;
      --engine=*) engine="${a#--engine=}" ;;
      --release=*) release="${a#--release=}" ;;
      *) args+=("$a") ;;
    esac
  done
  if [ -z "$engine" ]; then
    for engine in podman docker ""; do [ -n "$engine" ] && command -v "$engine" >/dev/null && break; done
    [ -n "$engine" ] || { log "neither podman nor docker is installed (Debian: apt-get install podman)"; exit 1; }
  fi
  case "$engine" in
    podman | docker) command -v "$engine" >/dev/null || { log "no $engine on this machine"; exit 1; } ;;
    *) log "unknown engine '$engine' (podman or docker)"; exit 2 ;;
  esac
  [[ " ${KNOWN_RELEASES[*]} " == *" $release "* ]] ||
    { log "no image for release '$release': the package table knows ${KNOWN_RELEASES[*]}"; exit 2; }
  local cache="${CONVOY_IMAGE_CACHE:-/var/cache/convoy/image}" base
  for base in "debian:$release" "debian:$release-slim"; do
    "$engine" image inspect "$base" >/dev/null 2>&1 && continue
    if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap >/dev/null; then
      log "$engine has no image $base, and making one needs root and debootstrap: pull or import one, then"
      log "run this again"
      exit 1
    fi
    local status=0
    make_minbase_tar "$release" "$cache/minbase-$release.tar" || status=$?
    case "$status" in
      0) ;;
      3) log "this machine's apt sources name no Debian $RELEASE archive to make $release's base from"; exit 1 ;;
      *) log "debootstrap of $release failed (its log's end above)"; exit 1 ;;
    esac
    log "importing $cache/minbase-$release.tar as $base"
    "$engine" import "$cache/minbase-$release.tar" "$base" >/dev/null
  done
  local build=(build -f "$ROOT/deploy/docker/Dockerfile" -t "$tag" --network=host
    --build-arg "DEBIAN_IMAGE=debian:$release" --build-arg "RUNTIME_IMAGE=debian:$release-slim")
  if [ "$engine" = podman ]; then
    build+=(--pull=never)
    # The build's compiler reads and fills this machine's ccache (relative paths: the same objects as here).
    local ccache_dir
    if command -v ccache >/dev/null && ccache_dir="$(ccache -k cache_dir 2>/dev/null)" && [ -n "$ccache_dir" ]; then
      mkdir -p "$ccache_dir"
      build+=(--volume "$ccache_dir:/ccache")
    fi
  else
    # The Dockerfile's RUN --mount (the compiler's cache) needs BuildKit: a classic client (Docker 20.10, Debian
    # 12's docker.io) asks the daemon's own for it; a client from Docker 23 on only through its buildx plugin,
    # without which its `docker build` is the legacy builder, which cannot read that file.
    local client
    client="$(docker --version | sed -n 's/^Docker version \([0-9]*\).*/\1/p')"
    if [ "${client:-0}" -ge 23 ] && ! docker buildx version >/dev/null 2>&1; then
      log "$(command -v docker) ($(docker --version)) has no buildx plugin, so no BuildKit to build with (Debian:"
      log "apt-get install docker-buildx; or put Debian 12's docker.io client, /usr/bin/docker, first on PATH)"
      exit 1
    fi
    export DOCKER_BUILDKIT=1
    # A docker build mounts no host directory: this machine's ccache is copied into the Dockerfile's cache mount
    # instead, by a build of its own whose context is that ccache (BuildKit sends only what changed since the
    # last copy), so that the image's compile finds what this machine compiled, as podman's does.
    local ccache_dir
    if command -v ccache >/dev/null && ccache_dir="$(ccache -k cache_dir 2>/dev/null)" && [ -d "$ccache_dir" ]; then
      log "docker: copying this machine's ccache ($ccache_dir) into the build's cache mount"
      docker build -q -f - --network=none -o type=tar,dest=/dev/null "$ccache_dir" >/dev/null <<EOF ||
FROM debian:$release-slim AS copy
RUN --mount=type=cache,id=convoy-ccache,target=/var/cache/ccache,sharing=locked --mount=type=bind,target=/host \\
    cp -a -u /host/. /var/cache/ccache/ && touch /copied
FROM scratch
COPY --from=copy /copied /
EOF
        log "docker: copying the ccache failed; the build compiles without it"
    fi
  fi
  log "$engine build of $tag (debian:$release; the binaries only)"
  local start=$SECONDS
  "$engine" "${build[@]}" "${args[@]}" "$ROOT"
  local bytes
  bytes="$("$engine" image inspect --format '{{.Size}}' "$tag")"
  log "built $tag in $((SECONDS - start)) s: $((bytes / 1000000)) MB"
  echo "RESULT image_build_seconds=$((SECONDS - start)) image_megabytes=$((bytes / 1000000))"
}
