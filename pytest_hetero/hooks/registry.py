"""The one registry of ``pytest_hetero_*`` implementations, for the ``hetero`` command and the pytest run.

Both see the same plugins: the hookspecs (:mod:`.specs`), the built-in last-resort
implementations (:mod:`.builtin`), and every module of the ``pytest_hetero`` entry-point group
(a package declares ``[project.entry-points.pytest_hetero] name = "module"``). The ``hetero``
command adds modules named with ``-p MODULE``; a pytest run adds its own plugins (conftest.py,
``-p``, pytest11) to the same pytest plugin manager, where :func:`register_builtins` put the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

import pluggy

from pytest_hetero.errors import SettingsError
from pytest_hetero.hooks import builtin, specs

PROJECT = "pytest"
"""The pluggy project name: pytest's, so a hook implementation marked with ``pytest.hookimpl`` (or this
package's ``pluggy.HookimplMarker("pytest")``) serves the pytest run and the ``hetero`` command alike."""
ENTRY_POINTS = "pytest_hetero"
"""Entry-point group of plugins that serve the pytest run and the ``hetero`` command."""
BUILTIN = "pytest_hetero.hooks.builtin"
"""Name under which the built-in implementations are registered."""
PREFIX = "pytest_hetero_"


class HeteroPluginManager(pluggy.PluginManager):
    """A pluggy manager that, like pytest's, takes unmarked ``pytest_hetero_*`` functions of a plugin
    module as implementations (marked ones keep their options: ``trylast``, ``hookwrapper``…)."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        """The options of ``plugin.name`` as an implementation; None when it is not one."""
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith(PREFIX) and callable(getattr(plugin, name, None)):
            return pluggy.HookimplOpts(wrapper=False, hookwrapper=False, optionalhook=False, tryfirst=False,
                                       trylast=False, specname=None)
        return opts


def register_builtins(pm: pluggy.PluginManager) -> None:
    """Add the hookspecs and the built-in implementations to ``pm`` (once), then every plugin of
    the ``pytest_hetero`` entry-point group that is neither registered nor blocked (``-p no:NAME``)."""
    if pm.has_plugin(BUILTIN):
        return
    pm.add_hookspecs(specs)
    pm.register(builtin, BUILTIN)
    for ep in entry_points(group=ENTRY_POINTS):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        plugin = ep.load()
        if not pm.is_registered(plugin):
            pm.register(plugin, ep.name)


def plugin_manager(plugins: Sequence[str] = ()) -> HeteroPluginManager:
    """A registry for the ``hetero`` command: specs, built-ins, the entry-point group, then each
    module of ``plugins`` (``-p MODULE``, imported by name). Raises SettingsError naming a module
    that cannot be imported."""
    pm = HeteroPluginManager(PROJECT)
    register_builtins(pm)
    for name in plugins:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"-p {name}: cannot import the plugin module ({exc})",
                                hint="put the module on PYTHONPATH, or install the package that provides it") from None
        if not pm.is_registered(module):
            pm.register(module, name)
    return pm


def hook(plugins: Sequence[str] = ()) -> Any:
    """The hook relay (``pm.hook``) of :func:`plugin_manager` for ``plugins``."""
    return plugin_manager(plugins).hook
