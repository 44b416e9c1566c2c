"""One watch per (namespace, run): every pod the run creates, kept current, waited on by key.

Waiting is event-driven: a waiter blocks on a per-key :class:`threading.Event` that the watch
thread sets when a pod carrying that key (label ``pytest-hetero/probe``) changes. The watch
survives a dropped connection: it resumes from the last resourceVersion it saw (bookmarks keep it
fresh) and re-lists when the apiserver answers 410 Gone (resourceVersion too old). ``resumes`` and
``relists`` count both, for evidence.
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

from pytest_hetero.backends.kubernetes.client import PROBE
from pytest_hetero.backends.kubernetes.manifests import ServedPod
from pytest_hetero.signals import quiet_thread

WATCH_TIMEOUT_S = 240
"""Server-side timeout of one watch request (seconds); the thread then resumes."""

Pod = ServedPod
T = TypeVar("T")


class PodWatch:
    """Pods labelled ``selector`` in ``namespace``, as JSON dicts, updated by a background watch.

    ``pods``: name → latest pod dict; ``seen_at``: name → ``time.perf_counter()`` of its last event; ``keyed``:
    probe key → {name → pod} (what :meth:`by_key` reads, so a wait does not scan every pod of the run). A key
    :meth:`forget` dropped is no longer kept (a per-run model run's pod, once read back and deleted).
    """

    def __init__(self, api: client.ApiClient, namespace: str, selector: str) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace, self.selector = namespace, selector
        self.pods: dict[str, Pod] = {}
        self.keyed: dict[str, dict[str, Pod]] = {}
        self.forgotten: set[str] = set()
        """Keys :meth:`forget` dropped while one of their pods was not yet seen deleted."""
        self.seen_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        """name → wall time (``time.time()``) the watch first saw the pod with ``spec.nodeName``."""
        self.events: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.rv: str | None = None
        self.resumes = self.relists = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None

    def start(self) -> None:
        """List once (raises ApiException, e.g. 403 without ``list pods``), then watch in a daemon thread."""
        self._relist()
        self._thread = threading.Thread(target=self._loop, name="hetero-pod-watch", daemon=True)
        self._thread.start()

    def _relist(self) -> None:
        resp: Any = self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _preload_content=False, _request_timeout=60
        )
        body = json.loads(resp.data)
        now = time.perf_counter()
        with self.lock:
            for pod in body.get("items") or []:
                self._store(pod, now)
            self.rv = body["metadata"].get("resourceVersion")

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
        if name not in self.bound_at and (pod.get("spec") or {"containers": []}).get("nodeName"):
            self.bound_at[name] = time.time()
        if key is not None:
            self.keyed.setdefault(key, {})[name] = pod
            self.events.setdefault(key, threading.Event()).set()

    def _loop(self) -> None:
        quiet_thread()
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self._watch_once()
                backoff = 0.1
            except ApiException as exc:
                if exc.status == 410:
                    self.relists += 1
                    self._safe_relist()
                    continue
                self.error = f"watch: HTTP {exc.status}"
            except Exception as exc:  # noqa: BLE001 - connection dropped: resume from the last rv
                if self._stop.is_set():
                    return
                self.error = f"watch: {type(exc).__name__}: {exc}"
            self.resumes += 1
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 2.0)

    def _safe_relist(self) -> None:
        try:
            self._relist()
        except Exception as exc:  # noqa: BLE001 - retried by the loop
            self.error = f"relist: {exc}"
            self._stop.wait(0.5)

    def _watch_once(self) -> None:
        def keep(resp: Any) -> None:
            self._resp = resp

        events = watch_events(self.core.list_namespaced_pod, self.namespace, resource_version=self.rv,
                              timeout_s=WATCH_TIMEOUT_S, on_response=keep, label_selector=self.selector)
        with closing(events):  # releases the connection on raise and return too
            for kind, obj in events:
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise ApiException(status=410, reason="Gone")
                    raise ApiException(status=obj.get("code") or 500, reason=obj.get("message"))
                now = time.perf_counter()
                with self.lock:
                    self.rv = obj.get("metadata", {}).get("resourceVersion") or self.rv
                    if kind != "BOOKMARK":
                        self._store(obj, now, deleted=kind == "DELETED")
                if self._stop.is_set():
                    return

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
        self._stop.set()
        close_watch(self._resp)
        with self.lock:
            for event in self.events.values():
                event.set()


def _labels(pod: Pod) -> dict[str, str]:
    return pod["metadata"].get("labels") or {}


def close_watch(resp: Any) -> None:
    """Close an open watch response (urllib3) from another thread, so its reader returns. Never raises."""
    if resp is not None:
        try:
            resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
        except Exception:  # noqa: BLE001, S110 - already closed
            pass


def watch_events(list_call: Callable[..., Any], *args: Any, resource_version: str | None, timeout_s: int,
                 on_response: Callable[[Any], None], **selectors: Any) -> Generator[tuple[str, Any]]:
    """One watch request through an official-client list call (``list_call(*args, watch=True, …)``,
    raw JSON lines, bookmarks allowed): yields ``(type, object)`` per event (``ADDED``, ``MODIFIED``,
    ``DELETED``, ``BOOKMARK``, ``ERROR`` with a Status object) until the server ends the watch after
    ``timeout_s`` seconds; the object as ``json.loads`` decoded it (the caller knows the kind it listed:
    a :class:`~.manifests.ServedPod` of a pod watch). ``on_response`` gets the HTTP response first, so
    another thread can close it to stop the watch; the connection is released when the generator ends. Raises what the
    client raises for a refused request (ApiException, urllib3 errors)."""
    resp: Any = list_call(*args, **selectors, watch=True, resource_version=resource_version,
                          allow_watch_bookmarks=True, timeout_seconds=timeout_s, _preload_content=False,
                          _request_timeout=(10, timeout_s + 30))
    on_response(resp)
    try:
        for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
            event = json.loads(line)
            yield event.get("type"), event.get("object") or {}
    finally:
        resp.release_conn()
