"""This host's devices as its vendor tool reports them: the inventory part of every engine whose
host this process can see (the local backend; a Docker engine on this machine). Nothing here
judges what it sees (:mod:`pytest_hetero.layers.discovery` does)."""

from __future__ import annotations

from pytest_hetero.backends.protocol import HostView
from pytest_hetero.matrix.model import Resource
from pytest_hetero.probes import probe_host


def host_view(resource: Resource) -> HostView:
    """Probe this host with ``resource``'s probe (:attr:`~pytest_hetero.matrix.model.Resource.probe_vendor`);
    the probe's Inventory, raw output included. A missing driver is in its ``global_errors``."""
    return HostView(vendor=resource.probe_vendor, devices=probe_host(resource.probe_vendor))
