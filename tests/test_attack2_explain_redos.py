"""Attack round 2, (d)/(e): a 200-character line hangs ``hetero explain``. The recogniser of an echoed
``nvidia-container-cli … configure --device=… <rootfs>`` command line (``read_text._CLI_INVOCATION``) repeated an
option group whose ``--?[\\w.-]+`` splits ``--ab`` two ways (``-`` + ``-ab`` or ``--`` + ``ab``): on a line that is
not such a command, Python's backtracking engine tried 2**n splits of n options. ``nvidia-container-cli`` and 26
`` --ab`` took 26 s of CPU (70 s on this shared machine), each option more doubles it: 40 options is days.

The options keep one way to be split (the name after the dashes starts with a word character or a dot), so the
same lines are recognised, in linear time."""

from __future__ import annotations

import time

from pytest_hetero.explain.core import explain_text
from pytest_hetero.explain.read_text import _CLI_INVOCATION


def test_a_long_option_list_that_is_not_a_cli_invocation_is_read_in_linear_time() -> None:
    line = "nvidia-container-cli" + " --ab" * 40 + " x"
    begun = time.process_time()
    assert _CLI_INVOCATION.search(line) is None
    report = explain_text(line + "\n")
    assert time.process_time() - begun < 2.0
    assert [f.code for f in report.findings] == ["device_runtime_error"]


def test_real_invocations_are_still_context() -> None:
    for line in ("nvidia-container-cli --load-kmods --debug=/var/log/nvidia-container-toolkit.log configure "
                 "--ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --pid=2817 "
                 "/var/lib/docker/overlay2/4f1c/merged",
                 "nvidia-container-cli -k --load-kmods info",
                 "nvidia-container-cli --user list --libraries"):
        assert _CLI_INVOCATION.search(line), line
