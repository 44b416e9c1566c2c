"""Small test images for the real node, built offline from the Docker engine's test images and
imported into the real node's own containerd (never pulled: no registry is reachable).

Each image stands for one thing the kubelet meets in the field, so the failure it causes is the
real kubelet's / containerd's own:

==================================  =====================================================================
image                               stands for
==================================  =====================================================================
``pytest-hetero/accel-standin:2``   a CUDA / CANN user-space image for Python models on a node whose
                                    runtime injected the driver libraries: ``python3`` (the interpreter the
                                    matrices' models run as ``{python}``), no framework (those matrices'
                                    models declare no runtime), stand-in ``libcuda.so.1``,
                                    ``libnvidia-ml.so.1``, ``libascend_hal.so``, ``libascendcl.so`` (text
                                    files, not libraries), and ``NVIDIA_VISIBLE_DEVICES=all`` as the
                                    ``nvidia/cuda`` images set it
``pytest-hetero/accel-standin:3``   ``:2`` plus a STAND-IN ``nvidia-smi`` (``/usr/local/bin``, ahead of the
                                    device plugin's replay in ``/usr/bin``; :data:`STANDIN_SMI`): it answers
                                    ``--query-gpu=… --format=csv,noheader,nounits`` for the devices of
                                    ``NVIDIA_VISIBLE_DEVICES`` with the values a test writes in
                                    ``/tmp/hetero-standin-smi`` (``uuid memory.used utilization.gpu`` lines;
                                    ``[N/A]`` until then); any other call goes to the replay. Its numbers are
                                    the test's, not a GPU's: it proves the in-pod sampling path only
``pytest-hetero/accel-standin:4``   the Python image (ONNX Runtime kept: the digits model runs) with the
                                    STAND-IN ``nvidia-smi`` of ``:3`` (also looping with ``-lms``) and a
                                    STAND-IN ``npu-smi``
                                    (:data:`STANDIN_NPU_SMI`) in ``/usr/local/bin``, first on the image's
                                    ``PATH`` (ahead of the plugin's ``npu-smi`` replay in ``/usr/local/sbin``):
                                    ``info -t usages|memory -i N`` in the real key/value layout for the NPUs
                                    of ``ASCEND_VISIBLE_DEVICES``, values from ``/tmp/hetero-standin-npu``
                                    (``id hbm-rate% aicore-rate%`` lines; ``NA`` until then). Its numbers are
                                    the test's: it proves the in-pod sampling path, the allocation filter
                                    and the rules on device values only
``pytest-hetero/ghost-user:1``      an image whose ``USER`` has no passwd entry → ``CreateContainerError``
``pytest-hetero/crashing-shell:1``  an image whose entrypoint exits at once (its ``/bin/sh`` prints a line
                                    and exits 3) → ``CrashLoopBackOff``
``pytest-hetero/no-shell:1``        an image with no ``/bin/sh`` (nor any interpreter) → ``StartError``
                                    ``exec: "/bin/sh": stat /bin/sh: no such file or directory``
``pytest-hetero/no-python:1``       a shell-only image (busybox): the models' ``{python}`` is not in it
``pytest-hetero/oom-shell:1``       an image whose ``/bin/sh`` allocates 512 MiB at once (busybox ``dd``
                                    with a 512M block) → ``OOMKilled`` under a smaller memory limit
``pytest-hetero/late-oom-shell:1``  an image whose ``/bin/sh`` as PID 1 idles 2 s, then allocates 512 MiB
                                    (``OOMKilled`` after it was seen running); run by exec it idles 8 s:
                                    the startup checks are under way when the container is killed
==================================  =====================================================================

The device nodes and ``nvidia-smi``/``npu-smi`` come from the test device plugin
(tests/infra/deviceplugin), as on a node with a real plugin. An image is rebuilt when its recipe
changes (the recipe's sha256 is a label of the image in containerd, like ``realnode.sh``'s
``hetero.key``) and pinned so the kubelet's image GC keeps it.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

STANDIN = "stand-in file of the pytest-hetero accel-standin test image: not a driver library\n"
PYTHON_BASE = "pytest-hetero/py311-onnx:1"
"""The real node's Python image (Debian 12, python3 3.11, ONNX Runtime CPU build), in the Docker engine."""
ORT_DIST = "/usr/local/lib/python3.11/dist-packages"
CRASH = "#!/bin/busybox ash\necho 'crashing-shell: the entrypoint exits 3 at once' >&2\nexit 3\n"
LATE_OOM = ("#!/bin/busybox ash\nif [ $$ = 1 ]; then /bin/busybox sleep 2\n"
            "  exec /bin/busybox dd if=/dev/zero of=/dev/null bs=512M count=1\nfi\n/bin/busybox sleep 8\nexit 3\n")
OOM = "#!/bin/busybox ash\nexec /bin/busybox dd if=/dev/zero of=/dev/null bs=512M count=1\n"

STANDIN_SMI = r"""#!/bin/sh
# STAND-IN nvidia-smi of the pytest-hetero accel-standin:3 test image: NOT NVIDIA's tool, no GPU is read.
# --query-gpu=<fields> --format=csv,noheader,nounits: one line per device of NVIDIA_VISIBLE_DEVICES, memory.used
# and utilization.gpu from /tmp/hetero-standin-smi ("<uuid> <memory.used MiB> <utilization %>" lines, written by
# the test's model), "[N/A]" for a device it does not list. Anything else: the device plugin's replay.
case "$1" in --query-gpu=*) ;; *) exec /usr/bin/nvidia-smi "$@" ;; esac
[ "$2" = "--format=csv,noheader,nounits" ] || { echo "stand-in nvidia-smi: only --format=csv,noheader,nounits" >&2; exit 2; }
fields=${1#--query-gpu=}
i=0
for uuid in $(echo "${NVIDIA_VISIBLE_DEVICES:-}" | tr ',' ' '); do
  case "$uuid" in GPU-*) ;; *) continue ;; esac
  used="[N/A]"; util="[N/A]"
  if [ -r /tmp/hetero-standin-smi ]; then
    while read -r u m p; do [ "$u" = "$uuid" ] && used=$m && util=$p; done < /tmp/hetero-standin-smi
  fi
  line=""
  for f in $(echo "$fields" | tr ',' ' '); do
    case "$f" in
      index) v=$i ;; uuid) v=$uuid ;; name) v="NVIDIA H100 80GB HBM3 (stand-in)" ;; memory.total) v=81559 ;;
      memory.used) v=$used ;; utilization.gpu) v=$util ;;
      *) echo "stand-in nvidia-smi: field $f is not answered" >&2; exit 2 ;;
    esac
    line="${line:+$line, }$v"
  done
  echo "$line"
  i=$((i + 1))
done
"""
"""The stand-in ``nvidia-smi`` of ``accel-standin:3`` (see the table above)."""
STANDIN_SMI_LMS = STANDIN_SMI.replace("accel-standin:3", "accel-standin:4").replace(
    '[ "$2" = "--format=csv,noheader,nounits" ]',
    'lms=""; [ "$3" = "-lms" ] && lms=$4\n[ "$2" = "--format=csv,noheader,nounits" ]').replace(
    "i=0\nfor uuid", "while :; do\ni=0\nfor uuid").rstrip("\n") + (
    '\n[ -n "$lms" ] || break\nsleep "$((lms / 1000)).$(printf %03d $((lms % 1000)))"\ndone\n')
"""``STANDIN_SMI`` that also loops as ``--query-gpu=… --format=csv,noheader,nounits -lms <ms>`` does (of
``accel-standin:4``)."""

STANDIN_NPU_SMI = r"""#!/bin/sh
# STAND-IN npu-smi of the pytest-hetero accel-standin:4 test image: NOT Huawei's tool, no NPU is read.
# info -t usages|memory -i N, N one of ASCEND_VISIBLE_DEVICES: the key/value layout of the real tool (captured in
# shared/fixtures/real/npu-smi-info-t-usages-and-t-memory-npu1-32gb-hbm.txt), HBM and AI Core usage rates from
# /tmp/hetero-standin-npu ("<id> <hbm rate %> <aicore rate %>" lines, written by the test's model), "NA" for an NPU
# it does not list. Anything else: the device plugin's replay.
[ "$1 $2" = "info -t" ] && [ "$4" = "-i" ] || exec /usr/local/sbin/npu-smi "$@"
case ",${ASCEND_VISIBLE_DEVICES:-}," in *",$5,"*) ;; *) echo "Error: the npu id $5 is invalid." >&2; exit 1 ;; esac
hbm=NA; core=NA
if [ -r /tmp/hetero-standin-npu ]; then
  while read -r i h c; do [ "$i" = "$5" ] && hbm=$h && core=$c; done < /tmp/hetero-standin-npu
fi
row() { printf '%-31s: %s\n' "$1" "$2"; }
case "$3" in
  usages) row "NPU ID" "$5"; row "Chip Count" 1; echo; row "DDR Capacity(MB)" 15079; row "DDR Usage Rate(%)" 14
          row "HBM Capacity(MB)" 32768; row "HBM Usage Rate(%)" "$hbm"; row "Aicore Usage Rate(%)" "$core"
          row "Aicpu Usage Rate(%)" 0; row "Chip ID" 0 ;;
  memory) row "NPU ID" "$5"; row "Chip Count" 1; echo; row "DDR Capacity(MB)" 0; row "HBM Capacity(MB)" 32768
          row "HBM Clock Speed(MHz)" 1600; row "Chip ID" 0 ;;
  *) exec /usr/local/sbin/npu-smi "$@" ;;
esac
"""
"""The stand-in ``npu-smi`` of ``accel-standin:4`` (see the table above)."""

RECIPES: dict[str, tuple[str, dict[str, str]]] = {
    # :2 has python3: startup fails an image without the interpreter its models' entrypoints run
    # (interpreter_missing), and :1 (busybox only) was that image. The CPU-only ONNX Runtime of the base is
    # removed: in a GPU/NPU image it would be a framework without the accelerator's provider.
    "pytest-hetero/accel-standin:2": (
        f"FROM {PYTHON_BASE}\nRUN rm -rf {ORT_DIST}/onnxruntime {ORT_DIST}/onnxruntime-*\nCOPY root/ /\n"
        "ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility\n",
        {
            "root/usr/lib/x86_64-linux-gnu/libcuda.so.1": STANDIN,
            "root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": STANDIN,
            "root/usr/lib64/libascend_hal.so": STANDIN,
            "root/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so": STANDIN,
        },
    ),
    "pytest-hetero/ghost-user:1": ("FROM pytest-hetero/shell-only:1\nUSER ghost\n", {}),
    "pytest-hetero/crashing-shell:1": (
        "FROM scratch\nCOPY --from=pytest-hetero/shell-only:1 /bin/busybox /bin/busybox\n"
        "COPY sh /bin/sh\n",
        {"sh": CRASH},
    ),
    "pytest-hetero/no-shell:1": ("FROM scratch\nCOPY marker /marker\n", {"marker": "no /bin/sh, no interpreter\n"}),
    "pytest-hetero/no-python:1": ("FROM pytest-hetero/shell-only:1\nLABEL hetero.stands-for=no-python\n", {}),
    "pytest-hetero/oom-shell:1": (
        "FROM scratch\nCOPY --from=pytest-hetero/shell-only:1 /bin/busybox /bin/busybox\nCOPY sh /bin/sh\n",
        {"sh": OOM},
    ),
    "pytest-hetero/late-oom-shell:1": (
        "FROM scratch\nCOPY --from=pytest-hetero/shell-only:1 /bin/busybox /bin/busybox\nCOPY sh /bin/sh\n",
        {"sh": LATE_OOM},
    ),
}
"""Image → (Dockerfile, build-context files)."""
RECIPES["pytest-hetero/accel-standin:3"] = (RECIPES["pytest-hetero/accel-standin:2"][0], {
    **RECIPES["pytest-hetero/accel-standin:2"][1], "root/usr/local/bin/nvidia-smi": STANDIN_SMI})

RECIPES["pytest-hetero/accel-standin:4"] = (
    f"FROM {PYTHON_BASE}\nCOPY root/ /\nENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin\n",
    {"root/usr/local/bin/nvidia-smi": STANDIN_SMI_LMS, "root/usr/local/bin/npu-smi": STANDIN_NPU_SMI})


def recipe_key(name: str) -> str:
    """First 12 hex digits of the sha256 of the image's Dockerfile and files."""
    dockerfile, files = RECIPES[name]
    text = dockerfile + "".join(f"\0{k}\0{v}" for k, v in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _ctr(socket: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(["ctr", "--address", str(socket), "-n", "k8s.io", *args], input=data,
                          capture_output=True, timeout=300, check=True)
    return done.stdout.decode()


def _key_in_containerd(socket: Path, full: str) -> str:
    for line in _ctr(socket, "images", "ls", f"name=={full}").splitlines()[1:]:
        for label in line.split()[-1].split(","):
            if label.startswith("hetero.key="):
                return label.split("=", 1)[1]
    return ""


def ensure(socket: Path, name: str) -> str:
    """Build ``name`` with the Docker engine (offline, from its local images) when its recipe changed,
    and import it into the containerd at ``socket``; return the reference the kubelet knows it by.

    Raises subprocess.CalledProcessError (docker/ctr output attached) when a step fails.
    """
    full = f"docker.io/{name}"
    key = recipe_key(name)
    if _key_in_containerd(socket, full) == key:
        return name
    dockerfile, files = RECIPES[name]
    with tempfile.TemporaryDirectory(prefix="hetero-image-") as tmp:
        root = Path(tmp)
        (root / "Dockerfile").write_text(dockerfile)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            (root / rel).chmod(0o755 if text.startswith("#!") else 0o644)  # COPY keeps the mode
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", name, str(root)],
                       capture_output=True, timeout=300, check=True)
    image = subprocess.run(["docker", "save", name], capture_output=True, timeout=300, check=True).stdout
    _ctr(socket, "images", "import", "--snapshotter", "overlayfs", "-", data=image)
    _ctr(socket, "images", "label", full, f"hetero.key={key}", "io.cri-containerd.pinned=pinned")
    return name


def import_from_docker(socket: Path, name: str, key: str) -> str:
    """Import the Docker engine's image ``name`` (built there, e.g. tests/docker/trainkit.py's jax image, whose
    build needs pip's index, which the recipes above do without) into the containerd at ``socket`` unless it
    holds it with the label ``hetero.key=<key>``; label and pin it like :func:`ensure`. Return the reference the
    kubelet knows it by. Raises subprocess.CalledProcessError when ``docker save`` or ``ctr import`` fails."""
    full = f"docker.io/{name}"
    if _key_in_containerd(socket, full) == key:
        return name
    with subprocess.Popen(["docker", "save", name], stdout=subprocess.PIPE) as save:
        done = subprocess.run(["ctr", "--address", str(socket), "-n", "k8s.io", "images", "import",
                               "--snapshotter", "overlayfs", "-"], stdin=save.stdout, capture_output=True,
                              timeout=600, check=False)
        assert save.stdout is not None
        save.stdout.close()
    if save.returncode or done.returncode:
        raise subprocess.CalledProcessError(save.returncode or done.returncode, ["docker save | ctr import", name],
                                            done.stdout, done.stderr)
    _ctr(socket, "images", "label", full, f"hetero.key={key}", "io.cri-containerd.pinned=pinned")
    return name


SET_DEVICES = (
    "import os, runpy, sys, time\n"
    "gpus = [u for u in os.environ.get('NVIDIA_VISIBLE_DEVICES', '').split(',') if u.startswith('GPU-')]\n"
    "npus = [i for i in os.environ.get('ASCEND_VISIBLE_DEVICES', '').split(',') if i.isdigit()]\n"
    "open('/tmp/hetero-standin-smi', 'w').write(''.join(u + ' 20480 75\\n' for u in gpus))\n"
    "open('/tmp/hetero-standin-npu', 'w').write(''.join(i + ' 50 70\\n' for i in npus))\n"
    "time.sleep(2.5)\nsys.argv = sys.argv[1:]\n"
    "if '--provider' in sys.argv: sys.argv[sys.argv.index('--provider') + 1] = 'CPUExecutionProvider'\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
"""Sets the stand-ins' answer for the run's own devices (GPU: 20480 MiB used, 75 %; NPU: HBM 50 % of 32768 MB,
AI Core 70 %), holds them 2.5 s (over two 1 s samples), then runs the digits model on ONNX Runtime's CPU provider
(the devices are stand-ins: the provider the gate names for the row is not in the image)."""
