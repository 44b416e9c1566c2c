#!/bin/sh
# chromium.sh ensure — make sure a headless Chromium is installed; print its path.
# On a fresh Debian machine (root) it installs Debian's `chromium` package (apt-get update first).
# Exit 0 with the browser path on stdout, non-zero with a reason on stderr.
set -eu

find_browser() {
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    done
    return 1
}

case "${1:-ensure}" in
ensure)
    if path=$(find_browser); then echo "$path"; exit 0; fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "chromium.sh: no chromium and cannot install it (need root and apt-get)" >&2; exit 1
    fi
    echo "chromium.sh: installing Debian's chromium package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium >&2
    if path=$(find_browser); then echo "$path"; exit 0; fi
    echo "chromium.sh: chromium installed but not found on PATH" >&2; exit 1
    ;;
path)
    find_browser || { echo "chromium.sh: no chromium on PATH" >&2; exit 1; }
    ;;
*)
    echo "usage: chromium.sh ensure|path" >&2; exit 2
    ;;
esac
