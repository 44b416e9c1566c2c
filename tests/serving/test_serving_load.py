"""The load generator against a real MLServer: count- and duration-bounded levels, status counts,
transport errors, and a service that answers every inference with an error."""

from __future__ import annotations

import pytest
from support import evidence_of, statuses

from pytest_hetero.matrix.model import Serving
from pytest_hetero.serving.load import run_levels, summarise
from pytest_hetero.serving.oip import OpenInferenceProtocol
from pytest_hetero.serving.protocol import read_samples
from serving.conftest import DigitsServers
from serving.helpers import COMBO, DIGITS, items_of, oip, records, serving_matrix
from serving.servers import free_port

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

JSON = {"Content-Type": "application/json"}


def _requests(url: str) -> list:  # type: ignore[type-arg]
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint=url))
    return proto.prepare(read_samples(DIGITS / "data" / "digits-test-1.0.0.csv")[:20], 1)


def test_count_and_duration_bounds(digits_servers: DigitsServers) -> None:
    requests = _requests(digits_servers.current)
    lines: list[str] = []
    counted, timed = run_levels(digits_servers.current, requests, [3], 50, 30.0, JSON, 10.0, lines.append) + \
        run_levels(digits_servers.current, requests, [2], None, 0.5, JSON, 10.0)
    one = summarise(counted, requests)
    assert (one["concurrency"], one["requests"], one["ok"], one["errors"], one["error_rate"],
            one["status_counts"]) == (3, 50, 50, 0, 0.0, {"200": 50})
    assert [r.request for r in sorted(counted.responses, key=lambda r: r.request)][:3] == [0, 0, 0]
    assert sorted(r.request for r in counted.responses) == sorted(k % 20 for k in range(50))
    assert lines[-1].startswith("concurrency 3: done, 50 requests in ")
    two = summarise(timed, requests)
    # the level starts no request after its 0.5 s deadline and ends when the last one started has its answer: by
    # the deadline plus the slowest request at most (+ the event loop's own turn), however slow a loaded server
    slowest = max(r.latency_s for r in timed.responses)
    assert 0.5 <= two["wall_s"] <= 0.5 + slowest + 1.0, (two["wall_s"], slowest)
    assert two["requests"] == two["ok"] > 0
    assert two["samples_per_s"] == two["requests_per_s"]


def test_transport_errors_and_refusals_are_counted(digits_servers: DigitsServers) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    (level,) = run_levels(closed, _requests(closed), [2], 6, 10.0, JSON, 2.0)
    summary = summarise(level, _requests(closed))
    assert (summary["requests"], summary["ok"], summary["error_rate"], summary["status_counts"],
            summary["latency_ms"], summary["requests_per_s"]) == (6, 0, 1.0, {"transport": 6}, None, 0.0)
    assert all(r.error and r.error.startswith("ConnectError") for r in level.responses)
    (level,) = run_levels(digits_servers.gated, _requests(digits_servers.gated), [2], 6, 10.0, JSON, 2.0)
    assert summarise(level, _requests(digits_servers.gated))["status_counts"] == {"401": 6}


def test_every_inference_failing_is_a_platform_failure(pytester: pytest.Pytester,
                                                       digits_servers: DigitsServers) -> None:
    # the scikit-learn runtime answers 400 to an output it does not have
    serving = oip(digits_servers.current, options={"output_name": "bogus"}, load={"requests": 10})
    pytester.makefile(".matrix.yaml", s=serving_matrix(serving))
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    found = statuses(ev)
    assert (found["cpu-host::py::startup"], found[f"cpu-host::py::{COMBO}::model"],
            found[f"cpu-host::py::{COMBO}::business"]) == ("passed", "failed", "blocked")
    items = items_of(ev)
    failure = items[f"cpu-host::py::{COMBO}::model"]["failure"]
    (ident,) = records(items["cpu-host::py::startup"], "serving.identity")
    (level,) = records(items[f"cpu-host::py::{COMBO}::model"], "serving.load")
    assert (failure["category"], failure["owner"]) == ("service_errors", "platform")
    assert failure["message"] == (f"no request to {digits_servers.current} succeeded "
                                  "(status counts {'400': 10})")
    assert (level["ok"], level["status_counts"], ident["probe_status"]) == (0, {"400": 10}, 400)
