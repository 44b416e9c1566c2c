"""List-watch of one collection, and the run's pod watch built on it.

:class:`ListWatch` keeps a collection current in a daemon thread, as client-go's reflector does: list, then watch from
the list's resourceVersion (bookmarks keep it fresh); a watch the server ends (after its timeout) or a dropped
connection resumes from the last resourceVersion seen; ``410 Gone`` (resourceVersion too old: an HTTP answer or an
ERROR event) re-lists. ``resumes`` and ``relists`` count both, for evidence. The run's pod watch
(:class:`PodWatch`) and the session's watch of every node (:class:`.nodes.NodeReadiness`) are two of them.

:class:`PodWatch` is one per (namespace, run): every pod the run creates, waited on by key. Waiting is
event-driven: a waiter blocks on a per-key :class:`threading.Event` that the watch thread sets when a pod carrying
that key (label ``pytest-hetero/probe``) changes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Generator
from contextlib import closing
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.client import PROBE
from pytest_hetero.backends.kubernetes.manifests import ObjectList, ServedPod, WatchEvent
from pytest_hetero.backends.kubernetes.objects import parse_metadata
from pytest_hetero.signals import quiet_thread

WATCH_TIMEOUT_S = 240
"""Server-side timeout of one pod watch request (seconds); the thread then resumes."""

Pod = ServedPod
T = TypeVar("T")


class ListWatch:
    """One collection (``path``, e.g. ``/api/v1/nodes``; ``selector``: a label selector, "" for none) kept by a list
    and a watch in a daemon thread named ``name`` (see the module docstring). What it sees goes to the subclass:
    :meth:`listed` gets every list's items, :meth:`changed` every ``ADDED``/``MODIFIED``/``DELETED`` event's object
    (JSON as ``json.loads`` decodes it), each with the ``time.perf_counter()`` of its arrival.

    ``rv``: the last resourceVersion seen; ``resumes``: watches begun again from it (after the server ended one or
    the connection dropped); ``relists``: lists after ``410 Gone`` or an ERROR event (at once); ``error``,
    ``failures``: the last failure (``<exception type>: <text>``, at most 300 characters) and how many there were,
    each retried after a backoff doubling from ``backoff_s[0]`` to ``backoff_s[1]`` seconds (a failed list is tried
    again, a failed watch resumes); ``tried`` is set once the first list answered or failed."""

    def __init__(self, api: client.ApiClient, path: str, selector: str, timeout_s: int, name: str,
                 backoff_s: tuple[float, float]) -> None:
        self.api, self.path, self.selector = api, path, selector
        self.timeout_s, self.thread_name, self.backoff_s = timeout_s, name, backoff_s
        self.rv: str | None = None
        self.resumes = self.relists = self.failures = 0
        self.error: str | None = None
        self.tried = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None

    def listed(self, items: list[Any], now: float) -> None:
        """Every object a list answered (the whole collection), arrived at ``now``."""

    def changed(self, kind: str, obj: Any, now: float) -> None:
        """One watch event's object (``kind``: ``ADDED``, ``MODIFIED``, ``DELETED``), arrived at ``now``."""

    def list_now(self) -> None:
        """List the collection (one GET, :func:`.client.raw_request`) and keep its resourceVersion. Raises
        ApiException (e.g. 403 without ``list``) and urllib3 errors."""
        query = [("labelSelector", self.selector)] if self.selector else []
        try:
            body: ObjectList[Any] = kc.raw_request(self.api, "GET", self.path, query=query,
                                                   timeout_s=kc.API_TIMEOUT_S)
            self.listed(body["items"], time.perf_counter())
            self.rv = body["metadata"]["resourceVersion"]
        finally:
            self.tried.set()

    def run(self) -> None:
        """Start the watch thread (once): it lists first unless :meth:`list_now` did. Never raises."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        quiet_thread()
        backoff = self.backoff_s[0]
        while not self._stop.is_set():
            try:
                if self.rv is None:
                    self.list_now()
                self._watch_once()
                self.resumes += 1
                backoff = self.backoff_s[0]
            except _Relist:
                self.relists += 1
                self.rv = None
                continue
            except Exception as exc:  # noqa: BLE001 - dropped or refused: retried, the runs go on meanwhile
                if self._stop.is_set():
                    return
                self._failed(f"{type(exc).__name__}: {exc}")
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.backoff_s[1])

    def _failed(self, why: str) -> None:
        self.error, self.failures = why[:300], self.failures + 1
        if self.rv is not None:
            self.resumes += 1

    def _watch_once(self) -> None:
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(self.timeout_s))]
        if self.rv is not None:
            query.append(("resourceVersion", self.rv))
        if self.selector:
            query.append(("labelSelector", self.selector))
        try:
            events = watch_events(self.api, self.path, query, self.timeout_s, self._keep)
        except ApiException as exc:
            if exc.status == 410:
                raise _Relist(410) from None
            raise
        with closing(events):  # releases the connection on raise and return too
            for kind, obj in events:
                if kind == "ERROR":  # 410 Gone (resourceVersion too old), or the apiserver's watch failed: re-list
                    raise _Relist(obj.get("code"))
                self.rv = obj["metadata"].get("resourceVersion") or self.rv
                if kind != "BOOKMARK":
                    self.changed(kind, obj, time.perf_counter())
                if self._stop.is_set():
                    return

    def _keep(self, resp: Any) -> None:
        """Hold the open watch response so :meth:`stop` can close it."""
        self._resp = resp

    def stop(self) -> None:
        """Stop the watch thread (closes its stream). Never raises."""
        self._stop.set()
        close_watch(self._resp)


class _Relist(Exception):  # noqa: N818 - a signal of the loop, not an error
    """The watch must list again (410 Gone, or an ERROR event)."""


class PodWatch(ListWatch):
    """Pods labelled ``selector`` in ``namespace``, as JSON dicts, updated by a background list-watch.

    ``pods``: name → latest pod dict; ``seen_at``: name → ``time.perf_counter()`` of its last event; ``keyed``:
    probe key → {name → pod} (what :meth:`by_key` reads, so a wait does not scan every pod of the run). A key
    :meth:`forget` dropped is no longer kept (a per-run model run's pod, once read back and deleted).
    """

    def __init__(self, api: client.ApiClient, namespace: str, selector: str) -> None:
        super().__init__(api, f"/api/v1/namespaces/{namespace}/pods", selector, WATCH_TIMEOUT_S, "hetero-pod-watch",
                         (0.1, 2.0))
        self.namespace = namespace
        self.pods: dict[str, Pod] = {}
        self.keyed: dict[str, dict[str, Pod]] = {}
        self.forgotten: set[str] = set()
        """Keys :meth:`forget` dropped while one of their pods was not yet seen deleted."""
        self.seen_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        """name → wall time (``time.time()``) the watch first saw the pod with ``spec.nodeName``."""
        self.events: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def start(self) -> None:
        """List once (raises ApiException, e.g. 403 without ``list pods``), then watch in a daemon thread."""
        self.list_now()
        self.run()

    def listed(self, items: list[Any], now: float) -> None:
        """Keep every listed pod."""
        with self.lock:
            for pod in items:
                self._store(pod, now)

    def changed(self, kind: str, obj: Any, now: float) -> None:
        """Keep the event's pod (a deleted one marked ``deleted``) and wake the waiters of its key."""
        with self.lock:
            self._store(obj, now, deleted=kind == "DELETED")

    def _store(self, pod: Pod, now: float, deleted: bool = False) -> None:
        name = pod["metadata"]["name"]
        key = _labels(pod).get(PROBE)
        if key is not None and key in self.forgotten:
            if deleted:
                self.forgotten.discard(key)
            return
        if deleted:
            pod = {**pod, "deleted": True}
        self.pods[name] = pod
        self.seen_at[name] = now
        if name not in self.bound_at and pod["spec"].get("nodeName"):
            self.bound_at[name] = time.time()
        if key is not None:
            self.keyed.setdefault(key, {})[name] = pod
            self.events.setdefault(key, threading.Event()).set()

    def wait(self, key: str, done: Callable[[list[Pod]], T], timeout_s: float) -> T | None:
        """Block until ``done(pods with probe label key)`` is truthy; return that value, or None after
        ``timeout_s`` seconds or once the watch is stopped (the engine closing: a per-run model run waiting for its
        pod must not hold the interrupted gate's exit for the model timeout). ``done`` runs on the waiting thread
        after each change of those pods."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            event = self.events.setdefault(key, threading.Event())
        while True:
            event.clear()
            found = done(self.by_key(key))
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return None
            event.wait(min(left, 5.0))

    def by_key(self, key: str) -> list[Pod]:
        """Current pods carrying probe label ``key`` (deleted ones included, marked ``deleted``), in the order
        the watch first saw them."""
        with self.lock:
            return list((self.keyed.get(key) or {}).values())

    def forget(self, key: str) -> None:
        """Drop the pods of probe label ``key`` and keep none of its later events (its last: the pod's deletion), so
        a gate of thousands of per-run pods holds the ones in flight only. Called once nothing reads ``key``
        again."""
        with self.lock:
            pods = self.keyed.pop(key, None) or {}
            self.events.pop(key, None)
            for name, pod in pods.items():
                self.pods.pop(name, None)
                self.seen_at.pop(name, None)
                self.bound_at.pop(name, None)
                if not pod.get("deleted"):
                    self.forgotten.add(key)

    def stop(self) -> None:
        """Stop the watch thread (closes the stream) and wake every :meth:`wait`. Never raises."""
        super().stop()
        with self.lock:
            for event in self.events.values():
                event.set()


def _labels(pod: Pod) -> dict[str, str]:
    return parse_metadata(pod["metadata"]).labels


def close_watch(resp: Any) -> None:
    """Close an open watch response (urllib3) from another thread, so its reader returns. Never raises."""
    if resp is not None:
        try:
            resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
        except Exception:  # noqa: BLE001, S110 - already closed
            pass


def watch_events(api: client.ApiClient, path: str, query: list[tuple[str, str]], timeout_s: int,
                 on_response: Callable[[Any], None]) -> Generator[tuple[str, Any]]:
    """One watch request of ``path`` (``query``: ``watch=true`` and its options; :func:`.client.open_stream`):
    yields ``(type, object)`` per event (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``, ``ERROR`` with a Status
    object) until the server ends the watch after ``timeout_s`` seconds; the object as ``json.loads`` decoded it
    (the caller knows the kind it watches). ``on_response`` gets the HTTP response first, so another thread can
    close it to stop the watch; the connection is released when the generator ends. Raises ApiException for a
    refused request, urllib3 errors when there is no answer."""
    resp = kc.open_stream(api, path, query, (10, timeout_s + 30))
    on_response(resp)
    try:
        for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
            event: WatchEvent = json.loads(line)
            yield event["type"], event["object"]
    finally:
        resp.release_conn()
