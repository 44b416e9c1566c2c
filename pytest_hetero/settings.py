"""Settings resolved once per run (command line over ini over environment over default) into a frozen object.

Every option is prefixed ``--hetero-…``, every ini key ``hetero_…``. This module holds the option
and ini tables and the resolution, and imports no pytest: the pytest glue registers the tables
(:mod:`pytest_hetero.pytest_plugin.options`) and hands :func:`build_settings` its ``getoption`` and
``getini``. Code reads the frozen :class:`Settings`, never ``getoption``.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pytest_hetero.errors import SettingsError

OPTIONS: tuple[tuple[str, dict[str, object]], ...] = (
    ("--hetero-matrix", {"action": "append", "default": [], "metavar": "PATH",
                         "help": "validation matrix file to collect (repeatable), besides files matching "
                                 "hetero_matrix_glob"}),
    ("--hetero-report-dir", {"default": None, "metavar": "DIR",
                             "help": "folder for evidence bundles (default: reports/ under rootdir)"}),
    ("--hetero-run-id", {"default": None, "metavar": "ID", "help": "run id (default: UTC time + random suffix)"}),
    ("--hetero-backend", {"default": None, "metavar": "NAME",
                          "help": "override every matrix's target backend (local, docker, kubernetes, …)"}),
    ("--hetero-keep", {"action": "store_true", "default": False,
                       "help": "keep containers/pods the run created, for debugging"}),
    ("--hetero-parallel", {"type": int, "default": None, "metavar": "N",
                           "help": "concurrent scheduling/startup probes per backend"}),
    ("--hetero-node-parallel", {"type": int, "default": None, "metavar": "N",
                                "help": "nodes a node-coverage item checks at once (device payload and smoke "
                                        "model run, each node's exec on its own connection; default 8)"}),
    ("--hetero-model-runs", {"default": None, "choices": ("shared", "per-run"),
                             "help": "every model run an exec in the shared workload (shared), or a workload of "
                                     "its own: a Pod placed by the scheduler on kubernetes, a container pinned to "
                                     "a device slot on docker, a sandbox pinned to a device slot on local "
                                     "(per-run); overrides resources[].model_runs"}),
    ("--hetero-concurrency", {"default": None, "metavar": "N|free",
                              "help": "model runs of one resource x image at once with per-run model runs (docker, "
                                      "local: at most one per device slot); free: as many as the pool holds now "
                                      "(kubernetes: its nodes' allocatable less what their pods request; docker, "
                                      "local: the device slots); overrides resources[].concurrency"}),
    ("--hetero-sign-key", {"default": None, "metavar": "PEM",
                           "help": "Ed25519 private key to sign the bundle (or $HETERO_SIGN_KEY)"}),
    ("--hetero-sign-command", {"default": None, "metavar": "CMD",
                               "help": "external Ed25519 signer instead of a key file (or $HETERO_SIGN_COMMAND): "
                                       "reads the message on stdin, writes the signature (raw, base64 or hex) "
                                       "on stdout; needs --hetero-sign-public"}),
    ("--hetero-sign-public", {"default": None, "metavar": "PEM",
                              "help": "public key of --hetero-sign-command (or $HETERO_SIGN_PUBLIC)"}),
    ("--hetero-profile", {"default": None, "metavar": "NAME", "help": "matrix profile (graded depth) to run"}),
    ("--hetero-kube-context", {"default": None, "metavar": "NAME",
                               "help": "kubeconfig context for the kubernetes backend"}),
    ("--hetero-kube-namespace", {"default": None, "metavar": "NS",
                                 "help": "namespace for workloads the kubernetes backend creates"}),
    ("--hetero-affected", {"action": "append", "default": [], "metavar": "DIM=VAL,…",
                           "help": "run only items whose dimensions match (plus their dependencies); repeatable"}),
    ("--hetero-affected-from", {"default": None, "metavar": "OLD_MATRIX",
                                "help": "run only what changed between OLD_MATRIX and the collected matrix"}),
    ("--hetero-baseline", {"default": None, "metavar": "BUNDLE",
                           "help": "compare this run to a previous verified bundle"}),
    ("--hetero-allow-unsigned", {"action": "store_true", "default": False,
                                 "help": "accept an unsigned --hetero-baseline bundle (the diff says it was "
                                         "unverified)"}),
    ("--hetero-fail-on", {"default": None, "metavar": "POLICY",
                          "help": "what fails the gate: any-failure (default), regression, untested-growth"}),
    ("--hetero-shard", {"default": None, "metavar": "K/N", "help": "run shard K of N (dependencies kept together)"}),
    ("--hetero-timeout-scale", {"type": float, "default": None, "metavar": "X",
                                "help": "multiply every layer timeout by X"}),
    ("--hetero-snapshot", {"action": "store_true", "default": False,
                           "help": "record (signed, in the bundle) a snapshot of what each kubernetes matrix depends "
                                   "on in its cluster: pool nodes, device plugins, RuntimeClasses, PriorityClasses, "
                                   "Kueue/Volcano queues, quotas and limits"}),
    ("--hetero-affected-from-cluster", {"default": None, "metavar": "BASELINE_BUNDLE",
                                        "help": "run only the items what changed in the cluster since the baseline "
                                                "bundle's snapshot can affect (implies --hetero-snapshot)"}),
    ("--hetero-change", {"default": None, "metavar": "TEXT|@FILE",
                         "help": "change record signed into the bundle: 'operator=…; ticket=…; reason=…; "
                                 "intended=RESOURCE,…' or a YAML file of those keys"}),
    ("--hetero-audit-log", {"default": None, "metavar": "PATH|managed-fields",
                            "help": "read who changed the pools' nodes, quotas, queues and device-plugin ConfigMaps "
                                    "between the --hetero-affected-from-cluster bundle and this run from the "
                                    "apiserver's audit log (JSON lines), or from managedFields "
                                    "('managed-fields': no audit access), into the signed change record; flag "
                                    "changes the change record does not name"}),
)
"""Command-line options as ``(flag, argparse keyword arguments)``, registered in the group "hetero"."""
INI: tuple[tuple[str, str, str], ...] = (
    ("hetero_matrix_glob", "glob of matrix files collected from test paths", "*.matrix.yaml"),
    ("hetero_report_dir", "folder for evidence bundles", "reports"),
    ("hetero_parallel", "concurrent scheduling/startup probes per backend", "4"),
    ("hetero_node_parallel", "nodes a node-coverage item checks at once", "8"),
    ("hetero_model_runs", "model runs when a resource says nothing: shared or per-run",
     "shared"),
    ("hetero_concurrency", "per-run model runs of one resource x image at once when a resource says nothing "
                           "(a number, or free)", "4"),
    ("hetero_timeout_scale", "multiply every layer timeout", "1.0"),
)
"""Ini keys as ``(name, help, default)``."""


@dataclass(frozen=True)
class SignCommand:
    """An external signer, so the run key need never sit on the host that runs the code under test (a KMS,
    an HSM, a signing service reached over ssh…): ``command`` (shell words, split with :func:`shlex.split`,
    run without a shell) reads the message on stdin — the DSSE pre-authentication encoding (``bundle.signing.pae``), or
    the journal key's derivation message — and writes its Ed25519 signature on stdout: the 64 raw bytes,
    or that in base64 or hex text. ``public``: the signer's public key PEM (the keyid and a check of every
    signature it returns come from it)."""

    command: str
    public: Path


def signer_spec(key: str | Path | None, command: str | None, public: str | Path | None, *,
                key_flag: str = "--sign-key") -> Path | SignCommand | None:
    """What signs for a ``hetero`` command that signs (``report --from-journal``, ``merge``, ``sign``,
    ``sign-policy``): the key file ``key`` (given with ``key_flag``), or the external signer ``command`` with its
    public key ``public`` (``--sign-command`` / ``--sign-public``: the same signer a run takes with
    ``--hetero-sign-command``); None when neither is given. Raises SettingsError when both are given, or one of
    ``--sign-command`` and ``--sign-public`` without the other."""
    if command and key:
        raise SettingsError(f"{key_flag} and --sign-command both given",
                            hint="sign with one: a key file, or an external signer command")
    if command and not public:
        raise SettingsError("--sign-command needs --sign-public PEM (the signer's public key)",
                            hint="pass the .pub of the key the command signs with")
    if public and not command:
        raise SettingsError("--sign-public is the public key of --sign-command, which is not given",
                            hint=f"give the signer command, or sign with a key file ({key_flag} KEY)")
    if command:
        return SignCommand(str(command), Path(public).resolve() if public else Path())
    return Path(key) if key else None


@dataclass(frozen=True)
class Settings:
    """The run's settings. Paths are absolute; ``parallel`` ≥ 1; ``timeout_scale`` > 0."""

    rootdir: Path
    matrix_glob: str
    matrices: tuple[Path, ...]
    report_dir: Path
    run_id: str
    backend: str | None
    keep: bool
    parallel: int
    sign_key: Path | SignCommand | None
    profile: str | None
    timeout_scale: float
    kube_context: str | None = None
    kube_namespace: str | None = None
    affected: tuple[str, ...] = ()
    affected_from: Path | None = None
    baseline: Path | None = None
    fail_on: str = "any-failure"
    shard: str | None = None
    allow_unsigned: bool = False
    snapshot: bool = False
    affected_from_cluster: Path | None = None
    change: str | None = None
    node_parallel: int = 8
    audit_log: str | None = None
    """Nodes a node-coverage item checks at once (``--hetero-node-parallel``, ini ``hetero_node_parallel``)."""
    model_runs: str | None = None
    """``--hetero-model-runs`` (``shared`` | ``per-run``): overrides every resource's ``model_runs``; None: none."""
    concurrency: int | Literal["free"] | None = None
    """``--hetero-concurrency``: overrides every resource's ``concurrency``; None: not given."""
    default_model_runs: str = "shared"
    """Ini ``hetero_model_runs``: the model runs of a resource that names none."""
    default_concurrency: int | Literal["free"] = 4
    """Ini ``hetero_concurrency``: the concurrency of a resource that names none."""

    @property
    def bundle_dir(self) -> Path:
        """``report_dir / run_id``: this run's evidence bundle folder."""
        return self.report_dir / self.run_id


RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def new_run_id() -> str:
    """``YYYYmmddTHHMMSSZ-xxxxxx``: sortable by time, unique by a 24-bit random suffix."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _given(option: Callable[[str], Any], ini: Callable[[str], Any], flag: str, key: str) -> tuple[object, str]:
    """(the value of command-line ``flag``, else of ini ``key``; the name of the one that gave it: ``flag``, or
    ``ini key``), so an error names what the user wrote."""
    value = option(flag)
    return (ini(key), f"ini {key}") if value is None else (value, flag)


def _number(value: object, name: str, kind: type, minimum: float) -> float:
    """``value`` read as ``kind`` (int or float), at least ``minimum``. ``name``: where it was given (a ``--flag`` or
    ``ini key``, :func:`_given`). Raises SettingsError naming it, with an example of a good value."""
    example = f"{name} 4" if name.startswith("--") else f"{name.removeprefix('ini ')} = 4 (in the ini file)"
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, got {value!r}", hint=f"e.g. {example}") from None
    if number < minimum:
        raise SettingsError(f"{name} must be ≥ {minimum:g}, got {number}", hint=f"e.g. {example}")
    return float(number)


def build_settings(option: Callable[[str], Any], ini: Callable[[str], Any], rootdir: Path,
                   inipath: Path | None, run_id: str | None = None) -> Settings:
    """Resolve the settings once. ``option(flag)`` answers a command-line option (None/False/[] when
    not given), ``ini(name)`` an ini key (its default when not set); ``rootdir`` is the rootdir and
    ``inipath`` the ini file, if any (relative report folders are anchored there). Raises
    SettingsError for bad values."""
    report = option("--hetero-report-dir") or ini("hetero_report_dir")
    report_dir = Path(str(report))
    if not report_dir.is_absolute():
        # relative to the ini file's folder when there is one, else to where pytest was started
        anchor = Path.cwd() if option("--hetero-report-dir") or inipath is None else rootdir
        report_dir = anchor / report_dir
    parallel = _given(option, ini, "--hetero-parallel", "hetero_parallel")
    node_parallel = _given(option, ini, "--hetero-node-parallel", "hetero_node_parallel")
    scale = _given(option, ini, "--hetero-timeout-scale", "hetero_timeout_scale")
    key = option("--hetero-sign-key") or os.environ.get("HETERO_SIGN_KEY")
    command = option("--hetero-sign-command") or os.environ.get("HETERO_SIGN_COMMAND")
    public = option("--hetero-sign-public") or os.environ.get("HETERO_SIGN_PUBLIC")
    if command and key:
        raise SettingsError("--hetero-sign-key and --hetero-sign-command both given",
                            hint="sign with one: a key file, or an external signer command")
    if command and not public:
        raise SettingsError("--hetero-sign-command needs --hetero-sign-public PEM (the signer's public key)",
                            hint="pass the .pub of the key the command signs with")
    run_id = run_id or option("--hetero-run-id") or new_run_id()
    if not RUN_ID.fullmatch(run_id):
        raise SettingsError(f"--hetero-run-id {run_id!r} is not a plain folder name",
                            hint="use letters, digits, '.', '_' and '-' (no '/' or leading '.')")
    return Settings(
        rootdir=rootdir,
        matrix_glob=str(ini("hetero_matrix_glob")),
        matrices=tuple(Path(p).resolve() for p in option("--hetero-matrix")),
        report_dir=report_dir.resolve(),
        run_id=run_id,
        backend=option("--hetero-backend"),
        keep=bool(option("--hetero-keep")),
        parallel=int(_number(*parallel, int, 1)),
        sign_key=SignCommand(str(command), Path(str(public)).resolve()) if command else
        Path(key).resolve() if key else None,
        profile=option("--hetero-profile"),
        timeout_scale=_number(*scale, float, 0.001),
        kube_context=option("--hetero-kube-context"),
        kube_namespace=option("--hetero-kube-namespace"),
        affected=tuple(option("--hetero-affected")),
        affected_from=Path(option("--hetero-affected-from")).resolve() if option("--hetero-affected-from") else None,
        baseline=Path(option("--hetero-baseline")).resolve() if option("--hetero-baseline") else None,
        fail_on=option("--hetero-fail-on") or "any-failure",
        shard=option("--hetero-shard"),
        allow_unsigned=bool(option("--hetero-allow-unsigned")),
        snapshot=bool(option("--hetero-snapshot") or option("--hetero-affected-from-cluster")),
        affected_from_cluster=Path(option("--hetero-affected-from-cluster")).resolve()
        if option("--hetero-affected-from-cluster") else None,
        change=option("--hetero-change"),
        audit_log=option("--hetero-audit-log"),
        node_parallel=int(_number(*node_parallel, int, 1)),
        model_runs=option("--hetero-model-runs"),
        concurrency=None if option("--hetero-concurrency") is None
        else _concurrency(option("--hetero-concurrency"), "--hetero-concurrency"),
        default_model_runs=_model_runs(ini("hetero_model_runs")),
        default_concurrency=_concurrency(ini("hetero_concurrency"), "hetero_concurrency"),
    )


MAX_CONCURRENCY = 1000
"""The most model runs of one resource × image at once a setting may ask for: the matrix schema's
``resources[].concurrency`` maximum, which the CLI and ini values are held to as well."""


def _concurrency(value: object, name: str) -> int | Literal["free"]:
    """A concurrency setting: ``free``, or a whole number from 1 to :data:`MAX_CONCURRENCY` (SettingsError
    naming ``name`` otherwise)."""
    if str(value).strip() == "free":
        return "free"
    example = f"{name} 8 or {name} free" if name.startswith("--") else f"{name} = 8 or {name} = free"
    try:
        number = int(_number(value, name, int, 1))
    except SettingsError as exc:
        raise SettingsError(f"{name} must be a whole number of model runs at once (at least 1) or free, got "
                            f"{value!r}", hint=example) from exc
    if number > MAX_CONCURRENCY:
        raise SettingsError(f"{name} must be at most {MAX_CONCURRENCY} model runs at once (the matrix schema's "
                            f"resources[].concurrency maximum), got {str(value).strip()}", hint=example)
    return number


def _model_runs(value: object) -> str:
    """The ini ``hetero_model_runs`` value, checked (SettingsError unless ``shared`` or ``per-run``)."""
    if str(value) not in ("shared", "per-run"):
        raise SettingsError(f"hetero_model_runs must be shared or per-run, got {value!r}",
                            hint="hetero_model_runs = per-run")
    return str(value)


def bundle_settings(bundle_dir: Path, sign_key: Path | SignCommand | None) -> Settings:
    """Settings for finishing an existing bundle folder outside a pytest run (``hetero report``,
    ``hetero merge``): ``bundle_dir`` is the bundle, ``sign_key`` the run key or external signer (None:
    unsigned);
    every selection option is unset, so only the writers and the signature apply."""
    bundle_dir = bundle_dir.resolve()
    return Settings(rootdir=Path.cwd(), matrix_glob="*.matrix.yaml", matrices=(), report_dir=bundle_dir.parent,
                    run_id=bundle_dir.name, backend=None, keep=False, parallel=1,
                    sign_key=sign_key.resolve() if isinstance(sign_key, Path) else sign_key, profile=None,
                    timeout_scale=1.0)
