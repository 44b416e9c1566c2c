"""A new user's ``egress`` entry without a port (``203.0.113.10``) is refused naming the field and the fix in words
(host:port), not the schema's regular expression."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_matrix_governance import TENANTS, write

from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix


def test_an_egress_address_without_a_port_names_the_field_and_the_form(tmp_path: Path) -> None:
    probe = {"name": "a-out", "kind": "network-isolation", "resource": "cpu-host", "as": "a",
             "egress": ["203.0.113.10"]}
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(write(tmp_path, [probe], TENANTS))
    [problem] = info.value.problems
    assert problem.location.field == "spec.governance.probes[0:a-out].egress[0]"
    assert problem.hint == ("write host:port, an IPv6 host in brackets (e.g. 203.0.113.10:443, "
                            "proxy.example.com:3128, [2001:db8::1]:443)")
