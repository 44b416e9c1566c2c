"""Unusable outputs files on the real engine are the model team's ``bad_outputs``, as on the local engine.

One container serves four model × dataset items; the entrypoint picks by dataset what it leaves as
``outputs.json``: a relative symbolic link, a link to ``/etc/passwd``, a FIFO, a 5 GiB sparse file.
Before: the link was a harness error (``KeyError: "linkname 'real.json' not found"``, platform), the
FIFO was ``no_outputs``.
"""

from __future__ import annotations

from typing import Any

import pytest
from dockerkit import docker_matrix, evidence, failure, items, leftovers, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

SCRIPT = ('case {dataset} in '
          '*/digits-test/*) echo "{{}}" > "$(dirname {outputs})/real.json"; ln -s real.json {outputs};; '
          '*/digits-test1/*) ln -s /etc/passwd {outputs};; '
          '*/digits-test2/*) mkfifo {outputs};; '
          '*) truncate -s 5G {outputs};; esac')


def test_links_fifos_and_sparse_outputs_are_the_model_teams(pytester: pytest.Pytester, run_id: str,
                                                           engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix(datasets=4, entrypoint=["sh", "-c", SCRIPT]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)

    def model(ds: str) -> tuple[str, str, str, str]:
        return failure(it[f"cpu::img::digits-logreg@{ds}::model"])

    assert model("digits-test") == (
        "failed", "bad_outputs", "algorithm", "outputs file outputs.json is a symbolic link (to 'real.json'); links "
                                              "are not followed: write the outputs into the file itself")
    assert model("digits-test1") == (
        "failed", "bad_outputs", "algorithm", "outputs file outputs.json is a symbolic link (to '/etc/passwd'); links "
                                              "are not followed: write the outputs into the file itself")
    assert model("digits-test2") == ("failed", "bad_outputs", "algorithm",
                                     "outputs file outputs.json is a FIFO; write a regular file")
    status, category, owner, message = model("digits-test3")
    assert (status, category, owner) == ("failed", "outputs_too_large", "algorithm")
    assert message.startswith("entrypoint wrote a 5368709120-byte outputs file (/tmp/hetero-run/")
    assert statuses(ev)["cpu::img::digits-logreg@digits-test2::business"] == "blocked"
    assert leftovers(engine, run_id) == []
