"""Attack round 2, (e): a CUDA OOM in PyTorch 2.2+'s wording where *another* process holds the GPU's memory.

PyTorch 2.2+ prints each other process on the device (``Process P has M memory in use``) and then this process's own
use (``Including non-PyTorch memory, this process has M memory in use``). Below, another process holds 78.40 GiB of
79.15 GiB and this one 734 MiB: the program did not ask for too much, the GPU it was given was not free. Whose that
is the text cannot decide (a co-tenant or a process left behind on a device the platform handed out, or another
process of the same job put on the same GPU, e.g. ranks without ``torch.cuda.set_device``), so the owner is
undetermined with the candidates, never a confident ``algorithm`` ("asked for more than is free"). Before the fix
``hetero explain`` said ``cuda_memory_allocation [algorithm]``.

When this process holds the memory itself (``OOM_OWN``), or the 2.1 wording lists the process alone, it stays the
program's (algorithm)."""

from __future__ import annotations

from pytest_hetero.explain.core import explain_text
from pytest_hetero.explain.model import Finding

OOM_OTHER = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 6.75 MiB is free. Process 2741053 has 78.40 GiB memory in use. Including non-PyTorch memory, this "
    "process has 734.00 MiB memory in use. Of the allocated memory 312.00 MiB is allocated by PyTorch, and 16.00 MiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
OOM_OWN = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.02 GiB is free. Process 9911 has 512.00 MiB memory in use. Including non-PyTorch memory, this "
    "process has 77.60 GiB memory in use. Of the allocated memory 76.90 GiB is allocated by PyTorch, and 120.00 MiB "
    "is reserved by PyTorch but unallocated.")


def _oom(text: str) -> Finding:
    (found,) = [f for f in explain_text(text).findings if f.code == "cuda_memory_allocation"]
    return found


def test_an_oom_where_another_process_holds_the_gpu_is_not_called_the_programs_fault() -> None:
    found = _oom(OOM_OTHER)
    assert found.quantities["other_process.2741053"] == "78.40 GiB"
    assert found.owner is None and found.undetermined
    assert found.failure == "gpu_memory_held_elsewhere"
    assert "platform" in (found.owner_candidates or "") and "algorithm" in (found.owner_candidates or "")
    assert "another process" in found.meaning


def test_an_oom_where_this_process_holds_the_memory_stays_the_programs() -> None:
    found = _oom(OOM_OWN)
    assert (found.owner, found.failure) == ("algorithm", "cuda_program_error")
