#!/bin/sh
# pytest-hetero in-container device-initialisation payload.
# Needs only POSIX sh (sed/awk/tr when present, as in busybox); uses the image's python3, when
# there is one, to add the framework view. Prints ONE JSON object between the marker lines
# ---HETERO-PAYLOAD-BEGIN--- and ---HETERO-PAYLOAD-END---. Never exits non-zero on a finding:
# what is missing is data, judged by the controller (pytest_hetero.probes.payload.assess).
# HETERO_ROOT prefixes every path (tests); HETERO_TIMEOUT bounds each tool run (seconds).
R="${HETERO_ROOT:-}"
T="${HETERO_TIMEOUT:-60}"
TAB=$(printf '\t')

have() { command -v "$1" >/dev/null 2>&1; }

# stdin -> JSON string body (escapes \ " tab, newlines as \n; drops other control bytes)
esc() {
  if have sed && have awk && have tr; then
    tr -d '\000-\010\013\014\015\016-\037' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e "s/$TAB/\\\\t/g" |
      awk 'NR > 1 { printf "%s", "\\n" } { printf "%s", $0 }'
  else
    printf '%s' '(not escaped: sed/awk/tr missing)'
  fi
}
str() { printf '"%s"' "$(printf '%s' "$1" | esc)"; }

run_timed() {
  if have timeout; then timeout "$T" "$@"; else "$@"; fi
}

TMP="${TMPDIR:-/tmp}"
[ -d "$TMP" ] && [ -w "$TMP" ] || TMP=""

# tool NAME ARGS... -> {"present":..,"rc":..,"output":..,"error":..}
tool() {
  name=$1; shift
  if ! have "$name"; then
    printf '{"present":false,"rc":null,"output":null,"error":"%s not found on PATH"}' "$name"
    return
  fi
  if [ -n "$TMP" ]; then
    run_timed "$name" "$@" >"$TMP/hetero.$$.out" 2>"$TMP/hetero.$$.err"; rc=$?
    out=$(cat "$TMP/hetero.$$.out" 2>/dev/null); err=$(cat "$TMP/hetero.$$.err" 2>/dev/null)
    rm -f "$TMP/hetero.$$.out" "$TMP/hetero.$$.err"
  else
    out=$(run_timed "$name" "$@" 2>&1); rc=$?; err=""
  fi
  printf '{"present":true,"rc":%s,"output":%s,"error":%s}' "$rc" "$(str "$out")" "$(str "$err")"
}

echo "---HETERO-PAYLOAD-BEGIN---"
printf '{"schema":"hetero-payload/1"'
printf ',"hostname":%s' "$(str "$(cat "$R/proc/sys/kernel/hostname" 2>/dev/null || hostname 2>/dev/null)")"
printf ',"arch":%s,"uid":%s' "$(str "$(uname -m 2>/dev/null)")" "$(str "$(id -u 2>/dev/null)")"

printf ',"device_nodes":['
sep=""
for f in "$R"/dev/nvidia* "$R"/dev/nvidia-caps/* "$R"/dev/davinci* "$R"/dev/devmm_svm "$R"/dev/hisi_hdc \
         "$R"/dev/dri/* "$R"/dev/kfd; do
  [ -e "$f" ] || continue
  printf '%s%s' "$sep" "$(str "${f#"$R"}")"; sep=","
done
printf ']'

printf ',"env":{'
sep=""
for v in NVIDIA_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES ASCEND_VISIBLE_DEVICES \
         ASCEND_RT_VISIBLE_DEVICES LD_LIBRARY_PATH; do
  isset=""; val=""
  eval "isset=\${$v+x}"; eval "val=\${$v-}"
  if [ -n "$isset" ]; then printf '%s"%s":%s' "$sep" "$v" "$(str "$val")"; else printf '%s"%s":null' "$sep" "$v"; fi
  sep=","
done
printf '}'

printf ',"libraries":['
sep=""; seen="|"
dirs=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' ')
for d in $dirs /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu \
         /usr/lib64 /usr/lib /lib64 /lib/x86_64-linux-gnu /lib/aarch64-linux-gnu /usr/local/cuda/lib64 \
         /usr/local/cuda/compat /usr/local/Ascend/driver/lib64 /usr/local/Ascend/driver/lib64/driver \
         /usr/local/Ascend/driver/lib64/common /usr/local/Ascend/ascend-toolkit/latest/lib64 \
         /usr/local/Ascend/ascend-toolkit/latest/runtime/lib64; do
  for f in "$R$d"/libcuda.so* "$R$d"/libnvidia-ml.so* "$R$d"/libcudart.so* "$R$d"/libcudnn.so* \
           "$R$d"/libascendcl.so* "$R$d"/libascend_hal.so* "$R$d"/libhccl.so*; do
    [ -e "$f" ] || continue
    p="${f#"$R"}"
    case "$seen" in *"|$p|"*) continue ;; esac
    seen="$seen$p|"
    printf '%s{"name":%s,"path":%s}' "$sep" "$(str "${f##*/}")" "$(str "$p")"; sep=","
  done
done
printf ']'

# tool_or_table NAME MARK ARGS...: the tool run with ARGS; when that run fails and the plain run (no
# arguments) prints the vendor's table (its output holds MARK: some wrappers, minimal driver
# containers and replays of a capture answer only that way), the plain run, with the failed
# attempt kept under "first_attempt" and "args" saying what answered.
tool_or_table() {
  name=$1; mark=$2; shift 2
  first=$(tool "$name" "$@")
  case "$first" in '{"present":true,"rc":0,'*|'{"present":false'*) printf '%s' "$first"; return ;; esac
  plain=$(tool "$name")
  case "$plain" in
    '{"present":true,"rc":0,'*"$mark"*) printf '%s,"args":"","first_attempt":%s}' "${plain%\}}" "$first" ;;
    *) printf '%s' "$first" ;;
  esac
}

printf ',"tools":{"nvidia-smi":%s,"npu-smi":%s}' "$(tool_or_table nvidia-smi NVIDIA-SMI -q -x)" \
  "$(tool_or_table npu-smi 'npu-smi ' info)"

py=""
for c in python3 python; do if have "$c"; then py=$(command -v "$c"); break; fi; done
if [ -z "$py" ]; then
  printf ',"python":{"present":false,"path":null,"rc":null,"report":null,"error":"no python3/python on PATH"}'
else
  fw=$(run_timed "$py" - 2>/dev/null <<'PYEOF'
import contextlib, io, json, platform, sys
out = {"version": platform.python_version(), "executable": sys.executable}
def probe(name, fn):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            out[name] = fn()
    except BaseException as exc:
        out[name] = {"available": False, "error": ("%s: %s" % (type(exc).__name__, exc))[:500]}
def ort():
    import onnxruntime as o
    return {"available": True, "version": o.__version__, "providers": list(o.get_available_providers()), "error": None}
def torch_():
    import torch
    info = {"available": True, "version": torch.__version__, "cuda_build": torch.version.cuda,
            "cuda_available": None, "device_count": None, "error": None}
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["device_count"] = int(torch.cuda.device_count())
    except BaseException as exc:
        info["error"] = ("%s: %s" % (type(exc).__name__, exc))[:500]
    return info
def torch_npu_():
    import torch
    import torch_npu
    info = {"available": True, "version": getattr(torch_npu, "__version__", None), "npu_available": None,
            "device_count": None, "error": None}
    try:
        info["npu_available"] = bool(torch.npu.is_available())
        info["device_count"] = int(torch.npu.device_count())
    except BaseException as exc:
        info["error"] = ("%s: %s" % (type(exc).__name__, exc))[:500]
    return info
probe("onnxruntime", ort)
probe("torch", torch_)
probe("torch_npu", torch_npu_)
sys.stdout.write(json.dumps(out))
PYEOF
)
  rc=$?
  case "$fw" in
    "{"*"}") printf ',"python":{"present":true,"path":%s,"rc":%s,"report":%s,"error":null}' "$(str "$py")" "$rc" "$fw" ;;
    *) printf ',"python":{"present":true,"path":%s,"rc":%s,"report":null,"error":%s}' "$(str "$py")" "$rc" \
         "$(str "python framework probe printed no JSON (exit $rc): $fw")" ;;
  esac
fi
printf '}\n'
echo "---HETERO-PAYLOAD-END---"
exit 0
