#!/usr/bin/env bash
# Verify a pytest-hetero evidence bundle with standard tools only (jq, base64, openssl ≥ 3, sha256sum,
# GNU coreutils and findutils).
#
#   verify-bundle.sh BUNDLE GATE_PUB.pem [SIGNATURE_INDEX]
#       the run's attestation (line 1 of attestation.intoto.jsonl): its predicate type says it is the run's,
#       the gate key's signature, every subject and every manifest entry; then validation.intoto.jsonl (each
#       pool's SLSA VSA, a signature file outside the manifest like the attestation): one line per pool the
#       statement signs (none, and no file, when it signs none), each signed by the gate key, naming this
#       statement's digest and saying its levels and expiry — the same checks as
#       `hetero verify BUNDLE --key GATE_PUB.pem` for the run.
#   verify-bundle.sh --signoff LINE BUNDLE TEAM_PUB.pem
#       one team sign-off (line LINE ≥ 2): its predicate type says it is a sign-off, its only subject is the
#       run's statement.intoto.json by digest (which must be the run's signed payload), the team key's
#       signature; prints the role, layers, decision and text. Which key may sign for which role is the trust
#       policy's to say: `hetero verify … --policy POLICY`.
# A team's key never verifies line 1 and the gate key never verifies a sign-off line: each signature covers
# its own statement. Exits non-zero at the first failing check.
set -euo pipefail
mode=run
if [ "${1:-}" = "--signoff" ]; then mode=signoff line=$2; shift 2; fi
bundle=$1 pub=$2 index=${3:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
RUN_TYPE="https://pytest-hetero.dev/attestation/evidence-bundle/v1"
SIGNOFF_TYPE="https://pytest-hetero.dev/attestation/signoff/v1"
VSA_TYPE="https://slsa.dev/verification_summary/v1"

# dsse_verify ENVELOPE_FILE SIGNATURE_INDEX [QUIET]: the payload to $work/payload.json, then the Ed25519 signature
# over PAE(type, payload) = "DSSEv1 <len type> <type> <len payload> <payload>"
dsse_verify() {
  local env=$1 i=$2 type
  [ -f "$env" ] && [ ! -L "$env" ] || { echo "FAIL $env is not a regular file"; exit 1; }
  type=$(jq -r .payloadType "$env")
  [ "$type" = "application/vnd.in-toto+json" ] || { echo "FAIL payloadType $type"; exit 1; }
  jq -e 'keys == ["payload", "payloadType", "signatures"]' "$env" > /dev/null \
    || { echo "FAIL the envelope has fields beside payload, payloadType, signatures (unsigned)"; exit 1; }
  jq -r .payload "$env" | base64 -d > "$work/payload.json"
  printf 'DSSEv1 %d %s %d ' "${#type}" "$type" "$(stat -c %s "$work/payload.json")" > "$work/pae.bin"
  cat "$work/payload.json" >> "$work/pae.bin"
  jq -r ".signatures[$i].sig" "$env" | base64 -d > "$work/sig.bin"
  openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$work/pae.bin" -sigfile "$work/sig.bin" > "$work/openssl.out" \
    || { cat "$work/openssl.out"; echo "FAIL $env: the signature does not verify with $pub (forged or altered)"; exit 1; }
  [ -n "${3:-}" ] || cat "$work/openssl.out"
  jq -e '._type == "https://in-toto.io/Statement/v1"' "$work/payload.json" > /dev/null || { echo "FAIL _type"; exit 1; }
}

att="$bundle/attestation.intoto.jsonl"
[ -f "$att" ] && [ ! -L "$att" ] || { echo "FAIL $att is not a regular file"; exit 1; }

if [ "$mode" = signoff ]; then
  [ "$line" -ge 2 ] 2> /dev/null || { echo "FAIL a sign-off is line 2 or later (line 1 is the run's)"; exit 1; }
  sed -n "${line}p" "$att" > "$work/envelope.json"
  [ -s "$work/envelope.json" ] || { echo "FAIL no line $line in $att"; exit 1; }
  dsse_verify "$work/envelope.json" 0
  jq -e --arg t "$SIGNOFF_TYPE" '.predicateType == $t' "$work/payload.json" > /dev/null \
    || { echo "FAIL line $line is not a sign-off: predicateType $(jq -r .predicateType "$work/payload.json")"; exit 1; }
  # its subject is the run's statement: the file must be the run's signed payload, and have the sign-off's digest
  sed -n 1p "$att" | jq -r .payload | base64 -d > "$work/run.json"
  cmp -s "$work/run.json" "$bundle/statement.intoto.json" || { echo "FAIL statement.intoto.json differs from the run's payload"; exit 1; }
  jq -e '.subject | length == 1 and .[0].name == "statement.intoto.json"' "$work/payload.json" > /dev/null \
    || { echo "FAIL the sign-off's subject is not statement.intoto.json"; exit 1; }
  jq -r '.subject[] | "\(.digest.sha256)  \(.name)"' "$work/payload.json" | (cd "$bundle" && sha256sum --quiet -c -)
  jq -r '.predicate | "OK sign-off line '"$line"': role \(.role) for \(.layers | join(",")): \(.decision)\(if .conditions then ": " + .conditions else "" end) at \(.signed_at)"' \
    "$work/payload.json"
  exit 0
fi

# 1-3. the run's attestation is line 1: its signature, and its predicate type says it is the run's
sed -n 1p "$att" > "$work/envelope.json"
dsse_verify "$work/envelope.json" "$index"
jq -e --arg t "$RUN_TYPE" '.predicateType == $t' "$work/payload.json" > /dev/null \
  || { echo "FAIL line 1 is not the run's attestation: predicateType $(jq -r .predicateType "$work/payload.json")"; exit 1; }
cmp -s "$work/payload.json" "$bundle/statement.intoto.json" || { echo "FAIL statement.intoto.json differs from the payload"; exit 1; }
jq -r '.subject[] | "\(.digest.sha256)  \(.name)"' "$work/payload.json" | (cd "$bundle" && sha256sum --quiet -c -)

# 4. every manifest entry, in byte order, and no unlisted file; nothing but regular files and folders
bad=$(cd "$bundle" && find . ! -type f ! -type d | head -5)
[ -z "$bad" ] || { echo "FAIL not a regular file: $bad"; exit 1; }
jq -r '.files[] | "\(.sha256)  \(.path)"' "$bundle/manifest.json" | (cd "$bundle" && sha256sum --quiet -c -)
jq -r '.files[].path' "$bundle/manifest.json" > "$work/listed"
LC_ALL=C sort -cu "$work/listed" 2> /dev/null || { echo "FAIL manifest.json entries out of order or duplicated"; exit 1; }
(cd "$bundle" && find . -type f ! -path ./manifest.json ! -path ./statement.intoto.json \
   ! -path ./attestation.intoto.jsonl ! -path ./validation.intoto.jsonl | sed 's|^\./||' | LC_ALL=C sort) > "$work/present"
diff "$work/listed" "$work/present" > /dev/null || { echo "FAIL files differ from manifest.json:"; diff "$work/listed" "$work/present" || true; exit 1; }

# 5. validation.intoto.jsonl: exactly one signed VSA per pool of the signed statement, none twice
cp "$work/payload.json" "$work/run.json"
vsa="$bundle/validation.intoto.jsonl"
pools=$(jq '.predicate.validation.pools // [] | length' "$work/run.json")
if [ "$pools" -eq 0 ]; then
  [ ! -e "$vsa" ] || { echo "FAIL $vsa present but the signed statement has no pool"; exit 1; }
else
  [ -f "$vsa" ] && [ ! -L "$vsa" ] || { echo "FAIL $vsa is not a regular file (the statement signs $pools pool(s))"; exit 1; }
  [ -z "$(tail -c 1 "$vsa")" ] || { echo "FAIL $vsa: the last line has no newline (truncated or edited)"; exit 1; }
  lines=$(wc -l < "$vsa")
  [ "$lines" -eq "$pools" ] || { echo "FAIL $vsa has $lines line(s), the signed statement $pools pool(s)"; exit 1; }
  digest=$(sha256sum < "$bundle/statement.intoto.json" | cut -d' ' -f1)
  : > "$work/uris"
  for n in $(seq 1 "$lines"); do
    sed -n "${n}p" "$vsa" > "$work/vsa.json"
    dsse_verify "$work/vsa.json" 0 quiet
    jq -e --slurpfile run "$work/run.json" --arg d "$digest" --arg t "$VSA_TYPE" '
      .predicateType == $t and .predicate as $p
      | [$run[0].predicate.validation.pools[] | select("hetero-pool:\(.matrix)/\(.pool)" == $p.resourceUri)]
      | length == 1 and (.[0] | (.task_types | map_values(.level)) as $levels
        | $p.inputAttestations[0].digest.sha256 == $d and $p.pytestHetero.taskTypes == $levels
          and $p.pytestHetero.validUntil == .expires_at
          and $p.verificationResult == (if [$levels[] | select(. != "none")] | length > 0 then "PASSED" else "FAILED" end))' \
      "$work/payload.json" > /dev/null \
      || { echo "FAIL $vsa line $n: not this statement's VSA for a signed pool, or its levels, expiry or result differ"; exit 1; }
    jq -r .predicate.resourceUri "$work/payload.json" >> "$work/uris"
  done
  [ -z "$(sort "$work/uris" | uniq -d)" ] || { echo "FAIL $vsa names a pool twice"; exit 1; }
fi
cp "$work/run.json" "$work/payload.json"
echo "OK $bundle: run $(jq -r .predicate.run.id "$work/payload.json"), verdict $(jq -r .predicate.verdict "$work/payload.json")"
