#!/bin/sh
# chromium.sh ensure — make sure a headless Chromium, pdftotext and a CJK font are installed; print
# the browser's path.
# On a fresh Debian machine (root) it installs Debian's `chromium`, `poppler-utils` (pdftotext,
# pdfinfo: the dossier tests read the printed PDF back) and `fonts-noto-cjk` (the Chinese dossier
# prints in Noto Sans CJK; without a CJK font Chromium prints empty boxes), `apt-get update` first.
# Exit 0 with the browser path on stdout, non-zero with a reason on stderr.
set -eu

find_browser() {
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    done
    return 1
}

have_cjk_font() {
    command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family 2>/dev/null | head -n 1)" ]
}

missing_packages() {
    find_browser >/dev/null 2>&1 || printf ' chromium'
    command -v pdftotext >/dev/null 2>&1 || printf ' poppler-utils'
    have_cjk_font || printf ' fonts-noto-cjk'
}

case "${1:-ensure}" in
ensure)
    missing=$(missing_packages)
    if [ -n "$missing" ]; then
        if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
            echo "chromium.sh: missing$missing and cannot install them (need root and apt-get)" >&2; exit 1
        fi
        echo "chromium.sh: installing Debian's$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        # shellcheck disable=SC2086 # the package list is meant to split
        apt-get install -y -qq --no-install-recommends $missing >&2
    fi
    missing=$(missing_packages)
    if [ -n "$missing" ]; then echo "chromium.sh: still missing after install:$missing" >&2; exit 1; fi
    find_browser
    ;;
path)
    find_browser || { echo "chromium.sh: no chromium on PATH" >&2; exit 1; }
    ;;
*)
    echo "usage: chromium.sh ensure|path" >&2; exit 2
    ;;
esac
