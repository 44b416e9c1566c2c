# Sourced by the real node's NetworkPolicy enforcer scripts (netpol.sh, kuberouter.sh): the real-node plane's
# API as its admin. Needs PLANE_STATE (the plane's state folder: ports.env, pki/) and a die() of the caller.

plane_port() { sed -n 's/^APISERVER_PORT=//p' "$PLANE_STATE/ports.env"; }
curl_admin() {
  local d="$PLANE_STATE/pki"
  curl -sf --max-time 10 --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" "$@"
}
apply() {  # apply <collection path under the API> <json>: create, or leave it as it is when it exists
  local code
  code="$(curl_admin -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
          "https://127.0.0.1:$(plane_port)$1" -d "$2" || true)"
  [[ "$code" == 201 || "$code" == 409 ]] || die "POST $1 answered HTTP ${code:-nothing}"
}
