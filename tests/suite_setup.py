"""Suite-wide setup, run once when tests/conftest.py imports it. Shared helpers live in tests/support.py
(``from support import …``).

It lives outside conftest.py so that mypy, which names a module by its file, sees one module called
``conftest`` in tests/ (tests/kubernetes/conftest.py, whose classes the Kubernetes tests import).
"""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support import outside_paths


@pytest.fixture
def outside_inputs(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``HETERO_ALLOW_PATHS`` for one test whose matrices sit in a temporary folder (outside any project)
    and name the repository's ``cases/``, or files of a neighbouring temporary folder of this session, by
    absolute path: path containment refuses those, so the test allows exactly these two folders, as a user
    would (docs/safety.md). Its pytester runs and subprocesses inherit it; it is gone after the test.

    Nothing sets it suite-wide: a test that does not take this fixture (a module marks itself with
    ``pytestmark = pytest.mark.usefixtures("outside_inputs")`` and says why) runs with containment as a
    user gets it. Returns the value set.
    """
    value = outside_paths(tmp_path_factory)
    monkeypatch.setenv("HETERO_ALLOW_PATHS", value)
    return value

# The host-wide device slot leases of per-run model runs (pytest_hetero.backends.slots.HostLease) are per test
# process: a test's gate runs (its pytester runs and their pytest-xdist workers inherit this) keep clear of each
# other's CPUs, but not of another test process's, which would make a test that needs two CPUs at once wait for a
# neighbouring test (this suite's own workers, another checkout's suite on the same machine).
os.environ["HETERO_SLOT_LOCKS"] = tempfile.mkdtemp(prefix="hetero-slots-")
os.chmod(os.environ["HETERO_SLOT_LOCKS"], 0o1777)  # as the gate makes it: a test's gate run as another user shares it
atexit.register(shutil.rmtree, os.environ["HETERO_SLOT_LOCKS"], ignore_errors=True)  # no folder left per test process

# Hypothesis keeps its storage (example database, constants cache) outside the checkout: its files are
# mode 0600, and a checkout holding one is a project the sandbox user cannot read, so the gate copies it
# for the model (test_sandbox: a sandbox-user run must need no copy, whatever ran before it serially).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      str(Path(tempfile.gettempdir()) / f"hypothesis-of-{getpass.getuser()}"))
try:
    from hypothesis.configuration import set_hypothesis_home_dir
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
else:
    set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])


def _preload_kubernetes_client() -> None:
    """Import the kubernetes client's API and model classes before any in-process pytester run.

    pytester drops the modules first imported inside a run when it ends. kubernetes ≥ 35 imports
    APIs and models lazily, so a model class loaded inside one run and reloaded after it no longer
    matches the class its API validates against (pydantic "valid instance of V1Node" errors in
    later tests). Loading them once, up front, keeps one set of classes for the whole session.
    """
    try:
        from kubernetes import client
    except ImportError:
        return
    for name in client.__all__:
        if name.endswith("Api") or name.startswith(("V1", "V2", "Core", "Rbac")):
            getattr(client, name, None)


_preload_kubernetes_client()


def _preload_httpx() -> None:
    """Load httpx and every httpcore module a plain request uses before any in-process pytester run.

    The same hazard as above: httpcore imports its network backend and connection classes on first
    use; first used inside a pytester run (our serving plugin's clients), they are dropped when the run
    ends and reloaded later with new exception classes, so httpx no longer maps httpcore's
    ``ConnectError`` and a refused connection escapes ``except httpx.HTTPError`` (seen in the serving
    fixtures under pytest-xdist). One refused request to a closed loopback port loads them all once.
    """
    try:
        import httpx
    except ImportError:
        return
    try:
        httpx.get("http://127.0.0.1:9/", timeout=0.5)
    except httpx.HTTPError:
        pass


_preload_httpx()


def _preload_metrics() -> None:
    """Load numpy, scikit-learn's metrics and pyarrow's Parquet reader before any in-process pytester run.

    The business layer imports them on first use; first used inside a pytester run, pytester drops them when
    the run ends, and numpy's C core refuses a second load in one process ("cannot load module more than once
    per process") in the next run's business items.
    """
    import sklearn.metrics  # noqa: F401

    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        pass


_preload_metrics()



LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("realnode", ("tests/kubernetes/test_realnode_", "tests/kubernetes/test_kube_cleanup_evidence.py",
                  "tests/kubernetes/test_kube_dossier.py", "tests/kubernetes/test_kube_example.py")),
    ("docker", ("tests/docker/", "tests/test_docker_engine.py", "tests/test_apt_mirror.py")),
)
"""The suite's lanes under pytest-xdist (``bash tests/run.sh`` runs it with ``-n``): tests sharing one piece of
infrastructure that a concurrent test could disturb run one after another on one worker, in file order: the real
node (one node, 4 stand-in GPUs, its CPU, one Kueue: every file whose tests take the ``realnode``,
``realnode_images`` or ``real_kueue`` fixture, checked at collection) and the Docker engine (containers and images
counted by label). The KWOK plane needs no lane: each worker has a plane of its own (:func:`_plane_per_worker`).
First matching prefix wins (nodeids are relative to the repository root)."""

REAL_NODE_FIXTURES = frozenset({"realnode", "realnode_images", "real_kueue"})


def lane_of(nodeid: str) -> str | None:
    """The lane of a test's nodeid (``tests/docker/test_x.py::test_y`` → ``docker``), None for a test that
    uses no infrastructure a concurrent test could disturb."""
    for lane, prefixes in LANES:
        if nodeid.startswith(prefixes):
            return lane
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test that takes a real-node fixture outside the real node's lane: under ``-n`` it would run beside
    the lane's tests on the one node (its GPUs and CPU) and both would fail by chance."""
    stray = sorted({item.nodeid.split("::", 1)[0] for item in items
                    if REAL_NODE_FIXTURES & set(getattr(item, "fixturenames", ())) and lane_of(item.nodeid) != "realnode"})
    if stray:
        raise pytest.UsageError(f"{', '.join(stray)}: takes a real-node fixture but is not in the real node's lane; "
                                "add the file to LANES['realnode'] in tests/suite_setup.py")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduler for this suite: each :data:`LANES` lane is one work unit (its tests run in order
    on one worker), every other test file is a unit of its own. xdist queues the units largest first, so the
    lanes start at once and the other files fill the remaining workers and those whose lane ended. Tried before
    the plugin's own scheduler (which groups matrix items by resource: this suite's own items are plain tests)."""
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            lane = lane_of(nodeid)
            return f"lane:{lane}" if lane else nodeid.split("::", 1)[0]

    return LaneScheduling(config, log)


def _plane_per_worker() -> None:
    """Give each pytest-xdist worker but the first a KWOK plane of its own (``HETERO_KUBE_STATE`` of the first,
    default ``/tmp/hetero-kube``, suffixed with the worker id; started on first use by the ``cluster`` fixture,
    ``tests/infra/kubeplane.py``): a session's KWOK nodes carry the pools' labels, and two sessions on one plane
    would see, select and taint each other's nodes."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and worker != "gw0":
        base = os.environ.get("HETERO_KUBE_STATE") or "/tmp/hetero-kube"  # kubeplane.sh's default
        if not base.endswith(f"-{worker}"):  # a pytest run started from this worker inherits the suffixed value
            os.environ["HETERO_KUBE_STATE"] = f"{base}-{worker}"


_plane_per_worker()


CPU_LOG = os.environ.get("HETERO_TEST_CPU_LOG", "")
"""A file each test's CPU seconds are appended to (``nodeid<TAB>own<TAB>children<TAB>wall``: the worker's own
user+system time over the test's setup, call and teardown, the same for its waited-for subprocesses — gate runs,
CLI calls — and wall seconds); unset: nothing is written. Daemons (apiservers, dockerd, containerd, kubelet)
are not in it. docs/testing.md says how CI time was measured with it."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Any:
    """Log the test's CPU to :data:`CPU_LOG` when it is set."""
    if not CPU_LOG:
        yield
        return
    import resource
    import time

    def cpu() -> tuple[float, float]:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime

    (own0, kids0), t0 = cpu(), time.monotonic()
    yield
    (own1, kids1), wall = cpu(), time.monotonic() - t0
    with open(CPU_LOG, "a", encoding="utf-8") as log:
        log.write(f"{item.nodeid}\t{own1 - own0:.2f}\t{kids1 - kids0:.2f}\t{wall:.2f}\n")
