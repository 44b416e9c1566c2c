#!/usr/bin/env bash
# Print the Debian archive this machine's apt already uses for SUITE, read from its own configuration, so
# the test images come from the same mirror as apt-get (a site mirror works; nothing here names a host).
#
#   tests/infra/apt-mirror.sh [ROOT] [SUITE]     # ROOT: where etc/apt lives (default /), SUITE default bookworm
#
# Reads, in apt's order, ROOT/etc/apt/sources.list and ROOT/etc/apt/sources.list.d/*.list (one-line
# format: `deb [options] URI SUITE COMPONENT…`) and ROOT/etc/apt/sources.list.d/*.sources (deb822:
# Types/URIs/Suites/Components stanzas, `Enabled: no` skipped). Other file names are ignored, as apt
# ignores them. The first `deb` entry whose suites include SUITE exactly (not SUITE-security or
# SUITE-updates) and whose components include `main` wins; its URI is printed without a trailing slash.
# Exit 1 with a message on stderr when there is none.
set -euo pipefail

ROOT=${1:-/}
SUITE=${2:-bookworm}
APT=${ROOT%/}/etc/apt

files=()
[ -f "$APT/sources.list" ] && files+=("$APT/sources.list")
for f in "$APT"/sources.list.d/*.list "$APT"/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
done

for f in "${files[@]}"; do
    uri=$(awk -v suite="$SUITE" -v deb822="$([[ $f == *.sources ]] && echo 1 || echo 0)" '
        function has(list, word,   n, parts, i) { n = split(list, parts, /[ \t]+/)
            for (i = 1; i <= n; i++) if (parts[i] == word) return 1; return 0 }
        function flush() {
            if (types != "" && enabled != "no" && has(types, "deb") && has(suites, suite) && has(comps, "main")) {
                split(uris, u, /[ \t]+/); print u[1]; found = 1; exit }
            types = uris = suites = comps = ""; enabled = "" }
        deb822 == 0 {
            sub(/#.*/, ""); if ($1 != "deb") next
            line = $0; sub(/^[ \t]*deb[ \t]+/, "", line)
            if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
            n = split(line, w, /[ \t]+/); rest = ""
            for (i = 3; i <= n; i++) rest = rest " " w[i]
            if (w[2] == suite && has(rest, "main")) { print w[1]; found = 1; exit }
            next }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        { key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val); sub(/[ \t]+$/, "", val)
          if (key == "types:") types = val; else if (key == "uris:") uris = val
          else if (key == "suites:") suites = val; else if (key == "components:") comps = val
          else if (key == "enabled:") enabled = tolower(val) }
        END { if (!found && deb822 == 1) flush() }
    ' "$f")
    if [ -n "$uri" ]; then
        printf '%s\n' "${uri%/}"
        exit 0
    fi
done
echo "apt-mirror.sh: no 'deb' entry for suite $SUITE with component main in $APT/sources.list{,.d/*.list,.d/*.sources};" \
     "set HETERO_DEBIAN_MIRROR to the Debian archive to use" >&2
exit 1
