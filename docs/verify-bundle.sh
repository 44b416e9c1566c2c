#!/usr/bin/env bash
# Verify a pytest-hetero evidence bundle with standard tools only (jq, base64, openssl ≥ 3, sha256sum,
# GNU coreutils) — the same checks as `hetero verify BUNDLE --key PUB`, for the run signature.
#   usage: verify-bundle.sh BUNDLE PUBLIC_KEY.pem [SIGNATURE_INDEX]
# Exits non-zero at the first failing check.
set -euo pipefail
bundle=$1 pub=$2 index=${3:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. the envelope: DSSE v1, in-toto payload
env="$bundle/attestation.intoto.jsonl"
type=$(jq -r .payloadType "$env")
[ "$type" = "application/vnd.in-toto+json" ] || { echo "FAIL payloadType $type"; exit 1; }
jq -r .payload "$env" | base64 -d > "$work/payload.json"
cmp -s "$work/payload.json" "$bundle/statement.intoto.json" || { echo "FAIL statement.intoto.json differs from the payload"; exit 1; }

# 2. the signature over PAE(type, payload) = "DSSEv1 <len type> <type> <len payload> <payload>"
printf 'DSSEv1 %d %s %d ' "${#type}" "$type" "$(stat -c %s "$work/payload.json")" > "$work/pae.bin"
cat "$work/payload.json" >> "$work/pae.bin"
jq -r ".signatures[$index].sig" "$env" | base64 -d > "$work/sig.bin"
openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$work/pae.bin" -sigfile "$work/sig.bin"

# 3. the statement: in-toto v1, our predicate type, subjects match their files
jq -e '._type == "https://in-toto.io/Statement/v1"' "$work/payload.json" > /dev/null || { echo "FAIL _type"; exit 1; }
jq -e '.predicateType == "https://pytest-hetero.dev/attestation/evidence-bundle/v1"' "$work/payload.json" > /dev/null \
  || { echo "FAIL predicateType $(jq -r .predicateType "$work/payload.json")"; exit 1; }
jq -r '.subject[] | "\(.digest.sha256)  \(.name)"' "$work/payload.json" | (cd "$bundle" && sha256sum --quiet -c -)

# 4. every manifest entry, in byte order, and no unlisted file
jq -r '.files[] | "\(.sha256)  \(.path)"' "$bundle/manifest.json" | (cd "$bundle" && sha256sum --quiet -c -)
jq -r '.files[].path' "$bundle/manifest.json" > "$work/listed"
LC_ALL=C sort -cu "$work/listed" 2> /dev/null || { echo "FAIL manifest.json entries out of order or duplicated"; exit 1; }
(cd "$bundle" && find . -type f ! -path ./manifest.json ! -path ./statement.intoto.json \
   ! -path ./attestation.intoto.jsonl | sed 's|^\./||' | LC_ALL=C sort) > "$work/present"
diff "$work/listed" "$work/present" > /dev/null || { echo "FAIL files differ from manifest.json:"; diff "$work/listed" "$work/present" || true; exit 1; }
echo "OK $bundle"
