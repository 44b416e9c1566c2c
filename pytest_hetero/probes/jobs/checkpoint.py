"""Step loop of the gate's checkpoint check, run inside the job's workload (one rank).

Environment (set by the gate): ``HETERO_CHECKPOINT_DIR`` (the volume the matrix names, mounted),
``HETERO_STEPS`` (steps in all), ``HETERO_CHECKPOINT_BYTES`` (size of the state written each step),
``HETERO_STEP_SLEEP_S`` (pause after each step, so the gate can stop it between two), ``HETERO_CHECKPOINT_FRESH``
(``1``: remove an earlier checkpoint first: the gate's first attempt).

The state is ``step`` and a deterministic byte pattern of the given size derived from the step; each step it
is written to ``ckpt.tmp``, fsync'd and renamed to ``ckpt.bin`` (the header line holds the step). At start,
an existing ``ckpt.bin`` is read back and the loop resumes at its step + 1. One JSON line per event on stdout:
``{"event": "written", "step", "sha256", "write_s", "bytes"}``, ``{"event": "resumed", "step", "sha256",
"read_s"}`` (``step`` read from the file), ``{"event": "done", "step", "sha256"}``. It judges nothing: the
gate compares the digests and steps it reads with its own.
"""

import hashlib
import json
import os
import sys
import time


def state(step: int, size: int) -> bytes:
    """The state after ``step`` steps: a header line and ``size`` bytes of a pattern of the step."""
    seed = hashlib.sha256(b"hetero-checkpoint-%d" % step).digest()
    body = (seed * (size // len(seed) + 1))[:size]
    return b"step=%d\n" % step + body


def main() -> int:
    """Resume from the checkpoint when there is one, run the remaining steps, writing each; 0, or raise."""
    folder = os.environ["HETERO_CHECKPOINT_DIR"]
    steps, size = int(os.environ["HETERO_STEPS"]), int(os.environ["HETERO_CHECKPOINT_BYTES"])
    pause = float(os.environ.get("HETERO_STEP_SLEEP_S", "0"))
    path, tmp = os.path.join(folder, "ckpt.bin"), os.path.join(folder, "ckpt.tmp")
    step = 0
    if os.environ.get("HETERO_CHECKPOINT_FRESH") == "1":  # the gate's first attempt: an earlier run's state goes
        for old in (path, tmp):
            if os.path.exists(old):
                os.remove(old)
    if os.path.exists(path):
        start = time.perf_counter()
        with open(path, "rb") as fh:
            data = fh.read()
        took = time.perf_counter() - start
        step = int(data.split(b"\n", 1)[0].split(b"=", 1)[1])
        print(json.dumps({"event": "resumed", "step": step, "sha256": hashlib.sha256(data).hexdigest(),
                          "read_s": took, "bytes": len(data)}), flush=True)
    digest = ""
    while step < steps:
        step += 1
        data = state(step, size)
        start = time.perf_counter()
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        took = time.perf_counter() - start
        digest = hashlib.sha256(data).hexdigest()
        print(json.dumps({"event": "written", "step": step, "sha256": digest, "write_s": took,
                          "bytes": len(data)}), flush=True)
        time.sleep(pause)
    print(json.dumps({"event": "done", "step": step, "sha256": digest}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
