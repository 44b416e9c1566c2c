"""Attack round 2, (e): one fact, two owners. The image's CUDA is newer than the node's driver supports:

- printed by the CUDA runtime inside the container (``CUDA driver version is insufficient for CUDA runtime
  version``), ``hetero explain`` says ``cuda_insufficient_driver`` owned by the **platform** (FACTS.md of the
  real fixtures: "driver/toolkit pairing on the node vs. the image's CUDA runtime");
- printed by the NVIDIA container toolkit before the container starts (``nvidia-container-cli: requirement error:
  unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda
  container``, the ``NVIDIA_REQUIRE_CUDA`` check: nvidia-container-toolkit's documented wording), it said a generic
  ``device_runtime_error`` owned by **infrastructure**, which sends the driver team to a runtime that worked.

The same pairing keeps one owner, whoever prints it: the hook's requirement error is the CUDA set-up category
(``cuda_environment_error``), with the version the image requires. Also through a pod's container state, where the
runs read it (``pending.startup.classify_startup``)."""

from __future__ import annotations

from pytest_hetero.explain.core import explain_text
from pytest_hetero.pending.startup import classify_startup

HOOK = ("Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
        "failed: unable to start container process: error during container init: error running hook #0: error running "
        "hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a "
        "newer version, or use an earlier cuda container: unknown\n")
RUNTIME = ("[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code CUDA driver version is "
           "insufficient for CUDA runtime version)!\n")


def test_the_hooks_cuda_requirement_error_has_the_owner_of_the_same_fact_printed_by_the_runtime() -> None:
    runtime = {f.owner for f in explain_text(RUNTIME).findings if f.unhealthy}
    assert runtime == {"platform"}
    hook = [f for f in explain_text(HOOK).findings if "requirement error" in " ".join(ln.text for ln in f.lines)]
    assert hook, [f.to_dict() for f in explain_text(HOOK).findings]
    assert {(f.failure, f.owner) for f in hook} == {("cuda_environment_error", "platform")}
    assert hook[0].quantities["requires_cuda"] == ">=12.4"


def test_a_pod_state_with_the_requirement_error_reads_the_same() -> None:
    reason = classify_startup("StartError", HOOK.splitlines()[1], container="train")
    assert reason is not None
    assert (reason.code, reason.cause, reason.detail.get("requires_cuda")) == (
        "device_runtime_error", "cuda_environment_error", ">=12.4")
