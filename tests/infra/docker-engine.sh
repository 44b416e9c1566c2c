#!/usr/bin/env bash
# Real Docker engine + offline test images for pytest-hetero's Docker-backend tests.
#
#   tests/infra/docker-engine.sh ensure   # make `docker info` work (install docker.io, start dockerd;
#                                         # storage overlay2 where it works, else vfs)
#   tests/infra/docker-engine.sh images   # ensure + build/import the test images (cached)
#   tests/infra/docker-engine.sh stop     # stop the dockerd that *we* started (no-op otherwise)
#
# Progress goes to stderr. `images` prints one machine-readable line per image on stdout:
#   hetero-image <name> <image-id>
#
# No container registry is needed: images are built from Debian packages (debootstrap,
# busybox-static) and PyPI wheels, then `docker import`ed. See tests/infra/README-docker.md.
#
# Environment knobs (all optional):
#   HETERO_CACHE            cache root (default: $HOME/.cache/pytest-hetero); tarballs in $HETERO_CACHE/images
#   HETERO_DOCKER_STATE     state dir for dockerd log/pid (default: /tmp/hetero-docker)
#   HETERO_DOCKER_WAIT      seconds to wait for dockerd to answer (default: 60)
#   HETERO_DOCKER_LOCK      lock file serialising concurrent runs, e.g. pytest-xdist workers
#                           (default: /tmp/hetero-docker.lock); HETERO_DOCKER_LOCK_WAIT seconds (default 1500)
#   HETERO_DOCKERD_FLAGS    extra dockerd flags, appended verbatim (word-split)
#   HETERO_DOCKER_STORAGE_DRIVER  overlay2 | vfs | auto (default auto: overlay2 when an overlay mount
#                           works on the data root's filesystem, else vfs)
#   HETERO_DEBIAN_MIRROR    Debian mirror for debootstrap (default: the one this machine's apt uses for the
#                           suite, read from /etc/apt by tests/infra/apt-mirror.sh)
#   HETERO_ORT_VERSION      onnxruntime wheel pinned into the py311-onnx image (default: 1.23.2)
set -euo pipefail

STATE_DIR=${HETERO_DOCKER_STATE:-/tmp/hetero-docker}
CACHE_ROOT=${HETERO_CACHE:-${HOME:-/root}/.cache/pytest-hetero}
IMAGE_CACHE=$CACHE_ROOT/images
WAIT_S=${HETERO_DOCKER_WAIT:-60}
SUITE=bookworm
DEBIAN_MIRROR=${HETERO_DEBIAN_MIRROR:-}   # resolved from apt's configuration when an image is built
ORT_VERSION=${HETERO_ORT_VERSION:-1.23.2}
KEY_LABEL=org.pytest-hetero.image-key

STORAGE_DRIVER=${HETERO_DOCKER_STORAGE_DRIVER:-auto}
DATA_ROOT=/var/lib/docker

ONNX_IMAGE=pytest-hetero/py311-onnx:1
SHELL_IMAGE=pytest-hetero/shell-only:1

export DEBIAN_FRONTEND=noninteractive PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
T0=$SECONDS

LOCK_FILE=${HETERO_DOCKER_LOCK:-/tmp/hetero-docker.lock}
LOCK_WAIT_S=${HETERO_DOCKER_LOCK_WAIT:-1500}
LOCKED=0

log() { printf '[docker-engine +%ss] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

engine_up() { docker info >/dev/null 2>&1; }

take_lock() {
    # Serialise the slow paths (install/start dockerd, build/import images) across concurrent
    # invocations; the fast "already there" checks run unlocked. Released when this script exits.
    [ "$LOCKED" -eq 1 ] && return 0
    exec 9>>"$LOCK_FILE" || die "cannot open lock file $LOCK_FILE"
    chmod 0666 "$LOCK_FILE" 2>/dev/null || true
    if ! flock -n 9; then
        log "waiting for another docker-engine.sh run (lock $LOCK_FILE, up to ${LOCK_WAIT_S}s)"
        flock -w "$LOCK_WAIT_S" 9 || die "lock $LOCK_FILE still held after ${LOCK_WAIT_S}s"
    fi
    LOCKED=1
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "$1 needs root (running as uid $(id -u)); start a Docker engine yourself or rerun as root"
}

APT_UPDATED=0
apt_install() {
    # apt_install PKG... : install missing Debian packages, non-interactively.
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    need_root "installing ${missing[*]}"
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        APT_UPDATED=1
    fi
    log "apt-get install ${missing[*]} (log: $STATE_DIR/apt.log)"
    mkdir -p "$STATE_DIR"
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$STATE_DIR/apt.log" 2>&1; then
        tail -n 30 "$STATE_DIR/apt.log" >&2
        die "apt-get install ${missing[*]} failed"
    fi
}

dockerd_pid() {
    # Prints the pid of the dockerd this script started ($STATE_DIR/started-by-us), if alive.
    # (dockerd's own --pidfile is $STATE_DIR/dockerd.pid; we must not pre-create that one,
    # dockerd refuses to start when it exists and names a live process.)
    local pid
    [ -f "$STATE_DIR/started-by-us" ] || return 1
    pid=$(cat "$STATE_DIR/started-by-us" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    printf '%s\n' "$pid"
}

overlay_works() {
    # Can we mount overlayfs with its upper/work dirs on the data root's filesystem?
    # (Fails e.g. when /var/lib/docker itself lives on overlayfs inside another container.)
    local d rc=1
    mkdir -p "$DATA_ROOT"
    d=$(mktemp -d "$DATA_ROOT/.hetero-overlay-probe.XXXXXX") || return 1
    mkdir -p "$d/lower" "$d/upper" "$d/work" "$d/merged"
    if mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" 2>/dev/null; then
        rc=0
        umount "$d/merged" || true
    fi
    rm -rf "$d"
    return "$rc"
}

storage_driver() {
    case $STORAGE_DRIVER in
    auto)
        # overlay2 shares the image's files between containers; vfs copies the whole rootfs
        # per container (~4.5 s per `docker run` of the 215 MB onnx image here, vs ~0.5 s).
        if overlay_works; then echo overlay2; else echo vfs; fi
        ;;
    *) echo "$STORAGE_DRIVER" ;;
    esac
}

dockerd_flags() {
    local driver
    driver=$(storage_driver)
    local flags=("--storage-driver=$driver" "--data-root=$DATA_ROOT" "--pidfile=$STATE_DIR/dockerd.pid"
        --host=unix:///var/run/docker.sock)
    # Networking needs working iptables (nf_tables works in this sandbox). Where it does not,
    # run without the docker0 bridge: containers then only get loopback (--network none semantics).
    if ! iptables -t nat -L -n >/dev/null 2>&1; then
        log "iptables unusable here -> dockerd --iptables=false --bridge=none (containers get no network)"
        flags+=(--iptables=false --bridge=none)
    fi
    # shellcheck disable=SC2206 # intentional word splitting of user-provided flags
    [ -n "${HETERO_DOCKERD_FLAGS:-}" ] && flags+=(${HETERO_DOCKERD_FLAGS})
    printf '%s\n' "${flags[@]}"
}

cmd_ensure() {
    if engine_up; then
        log "engine already answers ($(docker version -f '{{.Server.Version}}' 2>/dev/null || echo '?')); nothing to do"
        return 0
    fi
    need_root "starting dockerd"
    take_lock
    if engine_up; then
        log "engine came up while we waited for the lock; nothing to do"
        return 0
    fi
    local tool
    for tool in dockerd containerd runc iptables; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            apt_install docker.io containerd runc iptables
            break
        fi
    done
    mkdir -p "$STATE_DIR"

    local pid
    if pid=$(dockerd_pid); then
        log "dockerd (pid $pid) already started by us, waiting for it"
    else
        local flags
        mapfile -t flags < <(dockerd_flags)
        log "starting dockerd ${flags[*]} (log: $STATE_DIR/dockerd.log)"
        # A stale pidfile (dockerd killed hard) names a dead pid; dockerd tolerates that,
        # but remove it anyway so the log stays clean.
        rm -f "$STATE_DIR/dockerd.pid"
        # setsid + nohup: dockerd must outlive this script and the caller's process group.
        # 9>&-: dockerd must not inherit (and forever hold) our lock.
        setsid nohup dockerd "${flags[@]}" >>"$STATE_DIR/dockerd.log" 2>&1 </dev/null 9>&- &
        pid=$!
        printf '%s\n' "$pid" >"$STATE_DIR/started-by-us"
    fi

    local deadline=$((SECONDS + WAIT_S))
    until engine_up; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$STATE_DIR/dockerd.log" >&2 || true
            rm -f "$STATE_DIR/started-by-us"
            die "dockerd (pid $pid) exited before answering; log above ($STATE_DIR/dockerd.log)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 30 "$STATE_DIR/dockerd.log" >&2 || true
            die "dockerd (pid $pid) did not answer 'docker info' within ${WAIT_S}s; log above ($STATE_DIR/dockerd.log)"
        fi
        sleep 0.5
    done
    log "engine up: dockerd pid $pid, server $(docker version -f '{{.Server.Version}}' 2>/dev/null || echo '?')"
}

cmd_stop() {
    local pid
    if [ ! -f "$STATE_DIR/started-by-us" ]; then
        log "no dockerd started by this script (no $STATE_DIR/started-by-us); leaving any engine alone"
        return 0
    fi
    if ! pid=$(dockerd_pid); then
        log "dockerd we started is no longer running"
        rm -f "$STATE_DIR/started-by-us"
        return 0
    fi
    log "stopping dockerd pid $pid"
    kill -TERM "$pid"
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && die "dockerd pid $pid still alive 30s after SIGTERM"
        sleep 0.5
    done
    rm -f "$STATE_DIR/started-by-us"
    log "dockerd stopped"
}

# ---------------------------------------------------------------------------------------
# Image recipes. Each build_<x> DIR fills DIR with a root filesystem. The cache key is a
# hash of the recipe's own source text plus its pinned versions, so editing a recipe
# invalidates its cached tarball and the image in the engine (label $KEY_LABEL).
# ---------------------------------------------------------------------------------------

debian_mirror() {
    # Outside the recipe, so the mirror does not change its cache key: the same packages from any mirror.
    [ -n "$DEBIAN_MIRROR" ] && return 0
    DEBIAN_MIRROR=$(bash "$(dirname "${BASH_SOURCE[0]}")/apt-mirror.sh" / "$SUITE") \
        || die "no Debian mirror for $SUITE in this machine's apt configuration: set HETERO_DEBIAN_MIRROR"
}

build_py311_onnx() {
    local dir=$1
    apt_install debootstrap
    python3 -m pip --version >/dev/null 2>&1 || die "host python3 -m pip is needed to fetch wheels"
    log "debootstrap --variant=minbase --include=python3,python3-numpy $SUITE ($DEBIAN_MIRROR)"
    debootstrap --variant=minbase --include=python3,python3-numpy "$SUITE" "$dir" "$DEBIAN_MIRROR" \
        >"$dir.debootstrap.log" 2>&1 || { tail -n 30 "$dir.debootstrap.log" >&2; die "debootstrap failed"; }
    rm -f "$dir.debootstrap.log"
    # onnxruntime's only runtime import dependency is numpy (>=1.21.6); bookworm ships 1.24.2,
    # which works with the wheel (built against the numpy-2 ABI, backward compatible).
    # --no-deps keeps the image small: coloredlogs/flatbuffers/protobuf/sympy/packaging are
    # only used by ORT's tools/transformers, not by InferenceSession.
    log "pip install onnxruntime==$ORT_VERSION (cp311 manylinux wheel) into the rootfs"
    python3 -m pip install -q --no-deps --no-compile --target "$dir/usr/local/lib/python3.11/dist-packages" \
        --python-version 3.11 --implementation cp --platform manylinux_2_28_x86_64 \
        --only-binary=:all: "onnxruntime==$ORT_VERSION" >&2 || die "pip install onnxruntime failed"
    # Trim: apt caches/lists, docs, man pages, logs, locales.
    rm -rf "$dir"/var/cache/apt/* "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
        "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* \
        "$dir"/var/log/* "$dir"/usr/local/lib/python3.11/dist-packages/bin
    find "$dir/usr/local/lib/python3.11/dist-packages" -name '__pycache__' -prune -exec rm -rf {} +
}
ONNX_PINS="suite=$SUITE ort=$ORT_VERSION numpy=debian-bookworm-python3-numpy"

build_shell_only() {
    local dir=$1 tmp a
    tmp=$(mktemp -d)
    # Take /bin/busybox from Debian's busybox-static .deb without installing it on the host.
    log "apt-get download busybox-static"
    if ! (cd "$tmp" && apt-get download -qq busybox-static >&2 2>/dev/null); then
        need_root "apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        (cd "$tmp" && apt-get download -qq busybox-static >&2) || die "apt-get download busybox-static failed"
    fi
    dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/x"
    mkdir -p "$dir"/bin "$dir"/etc "$dir"/tmp "$dir"/root "$dir"/proc "$dir"/sys "$dir"/dev
    chmod 1777 "$dir/tmp"
    chmod 700 "$dir/root"
    install -m 0755 "$tmp/x/bin/busybox" "$dir/bin/busybox"
    for a in $("$dir/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -s busybox "$dir/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
    rm -rf "$tmp"
    [ ! -e "$dir/bin/python3" ] || die "shell-only image must not contain python3"
}
SHELL_PINS="suite=$SUITE busybox-static"

remove_tree() {
    # Delete a build tree safely: debootstrap mounts proc/sys (and may bind /dev) inside the target
    # and can leave them mounted when it fails; unmount those first and never cross filesystems.
    local d=$1 m
    while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done < <(awk -v d="$d/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
    rm -rf --one-file-system "$d"
}

BUILD_DIR=
on_exit() {
    if [ -n "$BUILD_DIR" ] && [ -d "$BUILD_DIR" ]; then
        log "removing unfinished build $BUILD_DIR"
        remove_tree "$BUILD_DIR" || true
    fi
}
trap on_exit EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

image_key() {
    # image_key FUNC PINS -> 12 hex chars
    { declare -f "$1"; printf '%s\n' "$2"; } | sha256sum | cut -c1-12
}

verify_image() {
    local name=$1 out
    case $name in
    "$ONNX_IMAGE")
        out=$(docker run --rm --network none "$name" python3 -c \
            'import numpy, onnxruntime as o; print(numpy.__version__, o.__version__, o.get_available_providers())' 2>&1) \
            || { printf '%s\n' "$out" >&2; return 1; }
        log "verify $name: numpy/onnxruntime/providers = $out"
        [[ $out == *CPUExecutionProvider* ]] || return 1
        ;;
    "$SHELL_IMAGE")
        out=$(docker run --rm --network none "$name" /bin/sh -c 'echo sh-ok; python3 -c 1 2>/dev/null; echo "python3 rc=$?"' 2>&1) \
            || { printf '%s\n' "$out" >&2; return 1; }
        log "verify $name: $(echo "$out" | tr '\n' ' ')"
        [[ $out == *sh-ok*"python3 rc=127"* ]] || return 1
        ;;
    esac
}

ensure_image() {
    # ensure_image NAME BUILDER PINS
    local name=$1 builder=$2 pins=$3 key short tar have rootfs t
    key=$(image_key "$builder" "$pins")
    short=${name#pytest-hetero/}
    short=${short%%:*}
    tar=$IMAGE_CACHE/$short-$key.tar

    have=$(docker image inspect -f "{{ index .Config.Labels \"$KEY_LABEL\" }}" "$name" 2>/dev/null || true)
    if [ "$have" = "$key" ]; then
        log "$name (key $key) already in the engine; nothing to do"
        return 0
    fi
    if [ "$LOCKED" -eq 0 ]; then
        take_lock
        ensure_image "$@" # re-check: a concurrent run may have imported it meanwhile
        return
    fi
    [ -n "$have" ] && log "$name in the engine has key '$have', want $key: replacing"

    if [ -s "$tar" ]; then
        log "using cached rootfs $tar"
    else
        need_root "building $name (debootstrap/chroot ownership)"
        mkdir -p "$IMAGE_CACHE"
        # We hold the lock: build dirs left by an interrupted run are garbage.
        for rootfs in "$IMAGE_CACHE"/.build-"$short".*; do
            [ -d "$rootfs" ] && remove_tree "$rootfs"
        done
        rootfs=$(mktemp -d "$IMAGE_CACHE/.build-$short.XXXXXX")
        BUILD_DIR=$rootfs
        t=$SECONDS
        # Host tools (kept out of the recipes so they do not change the cache keys).
        if [ "$builder" = build_py311_onnx ] && ! python3 -m pip --version >/dev/null 2>&1; then
            apt_install python3-pip
        fi
        log "building $name rootfs in $rootfs"
        [ "$builder" = build_py311_onnx ] && debian_mirror
        "$builder" "$rootfs/root"
        tar --numeric-owner -C "$rootfs/root" -cf "$rootfs/rootfs.tar" .
        mv -f "$rootfs/rootfs.tar" "$tar"
        remove_tree "$rootfs"
        BUILD_DIR=
        # Drop tarballs of older keys for this image.
        find "$IMAGE_CACHE" -maxdepth 1 -name "$short-*.tar" ! -name "$short-$key.tar" -delete
        log "built $tar ($(du -h "$tar" | cut -f1)) in $((SECONDS - t))s"
    fi

    t=$SECONDS
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/sh"]' \
        --change "LABEL $KEY_LABEL=$key" \
        --message "pytest-hetero test image $name ($pins)" \
        "$tar" "$name" >/dev/null || die "docker import $tar failed"
    log "imported $name in $((SECONDS - t))s"
    if ! verify_image "$name"; then
        docker image rm -f "$name" >/dev/null 2>&1 || true
        rm -f "$tar"
        die "$name failed verification; removed image and cached tarball"
    fi
}

cmd_images() {
    cmd_ensure
    ensure_image "$ONNX_IMAGE" build_py311_onnx "$ONNX_PINS"
    ensure_image "$SHELL_IMAGE" build_shell_only "$SHELL_PINS"
    # Dangling layers of replaced images are left to `docker image prune`.
    local name
    for name in "$ONNX_IMAGE" "$SHELL_IMAGE"; do
        printf 'hetero-image %s %s\n' "$name" "$(docker image inspect -f '{{.Id}}' "$name")"
    done
    log "images ready in $((SECONDS - T0))s"
}

case ${1:-} in
ensure) cmd_ensure ;;
images) cmd_images ;;
stop) cmd_stop ;;
*)
    echo "usage: $0 {ensure|images|stop}" >&2
    exit 2
    ;;
esac
