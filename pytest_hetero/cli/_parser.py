"""Every ``hetero`` sub-command declared with plain argparse, and the functions that run them.

Declaring a sub-command imports nothing: ``hetero --version`` and ``hetero --help`` cost an
interpreter start. Each ``_run_*`` function imports its implementation module when that
sub-command runs, so each sub-command pays only for what it uses. ``hetero cleanup`` parses its
own arguments (:mod:`pytest_hetero.cli.cleanup`), since installed backends add options to it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_hetero import LAYERS, __version__
from pytest_hetero.bundle.baseline import DEFAULT_TOLERANCE, POLICIES

DECISIONS = ("accept", "accept-with-conditions", "accept-with-known-failures", "reject")
"""``hetero sign --decision`` choices (:data:`pytest_hetero.bundle.attestation.DECISIONS`)."""

FORMATS = ("html", "md", "junit", "ctrf", "dossier")
"""``hetero render --format`` choices (the keys of :data:`pytest_hetero.reporting.writers.FORMATS`, and
``dossier``, rendered on demand)."""
LANGS = ("en", "zh")
"""``hetero render --format dossier --lang`` choices (:data:`pytest_hetero.reporting.dossier_text.LANGS`)."""
PLUGIN_HELP = "import MODULE as a pytest-hetero plugin (repeatable), besides the pytest_hetero entry points"


def _run_probe(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.probe import run

    return run(args)


def _run_explain(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.explain import run

    return run(args)


def _run_explain_pending(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.pending import run

    return run(args)


def _run_cleanup(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.cleanup import main

    return main(args.cleanup_args)


def _run_lint(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.workflow import cmd_lint

    return cmd_lint(args)


def _run_plan(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.workflow import cmd_plan

    return cmd_plan(args)


def _run_diff(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.workflow import cmd_diff

    return cmd_diff(args)


def _run_merge(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.workflow import cmd_merge

    return cmd_merge(args)


def _run_keygen(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.signing import keygen

    return keygen(args)


def _run_sign(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.signing import sign

    return sign(args)


def _run_verify(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.signing import verify

    return verify(args)


def _run_sign_policy(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.signing import sign_policy

    return sign_policy(args)


def _run_render(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.signing import render

    return render(args)


def _run_trend(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.trend import run

    return run(args)


def _run_report(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.evidence import run

    return run(args)


def _run_catalog(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.status import cmd_catalog

    return cmd_catalog(args)


def _run_publish(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.status import cmd_publish

    return cmd_publish(args)


def _run_prune(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.prune import run

    return run(args)


def _add_prune(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("prune", help="retention: remove old run folders from a reports folder, keeping the newest "
                                     "N and/or those younger than a duration, and every bundle a baseline names")
    p.add_argument("reports", nargs="?", default="reports", metavar="REPORTS",
                   help="the reports folder (default: reports)")
    p.add_argument("--keep", type=int, default=None, metavar="N", help="keep the N newest finished bundles")
    p.add_argument("--older-than", default=None, metavar="DURATION",
                   help="remove only run folders older than DURATION (e.g. 7d, 36h)")
    p.add_argument("--baseline", action="append", default=[], type=Path, metavar="PATH",
                   help="never remove this bundle: a bundle folder, a link to one, or a text file listing bundles "
                        "one per line (repeatable; links inside REPORTS are baselines too)")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--json", action="store_true", help="print a JSON list of decisions")
    p.set_defaults(func=_run_prune)


def _run_schema(args: argparse.Namespace) -> int:
    import sys

    from pytest_hetero.errors import HeteroError
    from pytest_hetero.matrix.reference import explain, markdown

    try:
        sys.stdout.write(markdown() if args.markdown else explain(args.path))
    except HeteroError as exc:
        sys.stderr.write(f"hetero schema: {exc.render()}\n")
        return 2
    return 0


def _add_schema(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("schema", help="what a matrix field means: type, default, examples and its fields, from the "
                                      "JSON Schema (like kubectl explain), e.g. hetero schema spec.resources.expect")
    p.add_argument("path", nargs="?", default="", metavar="PATH",
                   help="dotted field path, e.g. spec.resources.requests (default: the whole document)")
    p.add_argument("--markdown", action="store_true",
                   help="print the whole reference as Markdown (docs/matrix-reference.md is generated with it)")
    p.set_defaults(func=_run_schema)


def _run_doctor(args: argparse.Namespace) -> int:
    from pytest_hetero.cli.doctor import run

    return run(args)


def _add_doctor(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", help="what the matrices' engines need on this machine (sandbox, Docker and its "
                                      "runtimes, Kubernetes context and permissions, device tools, Chromium), "
                                      "each missing piece with its fix; exit 1 when something is missing")
    p.add_argument("matrix", nargs="*", metavar="MATRIX", help="matrix files (none: check everything, require nothing)")
    p.set_defaults(func=_run_doctor)


def _plugins(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE", help=PLUGIN_HELP)


def build_parser() -> argparse.ArgumentParser:
    """The top-level ``hetero`` parser with every sub-command declared (each sets ``func``)."""
    parser = argparse.ArgumentParser(prog="hetero", description="pytest-hetero commands that need no pytest run "
                                     "(run the gate itself with: pytest MATRIX.matrix.yaml)")
    parser.add_argument("--version", action="version", version=f"pytest-hetero {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_explain(sub)
    _add_probe(sub)
    _add_explain_pending(sub)
    p = sub.add_parser("cleanup", help="remove containers/volumes left behind by crashed runs "
                       "(hetero cleanup --help lists every installed backend's options)", add_help=False)
    p.set_defaults(func=_run_cleanup, cleanup_args=[])
    _add_workflow(sub)
    _add_signing(sub)
    _add_status(sub)
    _add_prune(sub)
    _add_schema(sub)
    _add_doctor(sub)
    p = sub.add_parser("report", help="rebuild a bundle (evidence.json, renderings, signature) "
                                      "from a run's journal, e.g. after a crash")
    p.add_argument("--from-journal", metavar="DIR", required=True, type=Path,
                   help="the run's report folder (holding journal.jsonl)")
    p.add_argument("--sign-key", metavar="PEM", type=Path, default=None,
                   help="Ed25519 private key to sign the rebuilt bundle")
    _signer(p, "the run's")
    _plugins(p)
    p.set_defaults(func=_run_report)
    return parser


def _add_probe(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "probe",
        help="show what the devices of this host (or a captured tool output) report",
        description="Print what the devices of this host, or a captured tool output, report: one Inventory "
        "as JSON (memory MiB, temperature C, power W, utilisation %).",
        epilog="--from detects nvidia-smi -q -x XML, plain nvidia-smi, dmesg/kernel Xid logs, device-plugin "
        "logs, npu-smi info, npu-smi info -t board and -t info-vnpu. Exit status: 0 healthy, 1 an unhealthy "
        "device or a host-level error, 2 unreadable input.",
    )
    parser.add_argument("vendor", choices=("nvidia", "ascend", "cpu"), help="which probe to run")
    parser.add_argument("--from", dest="source", metavar="FILE",
                        help="captured output to read instead of running the tools ('-' = stdin)")
    parser.add_argument("--root", default="/", metavar="DIR",
                        help="filesystem root for /dev, /proc and /sys reads (default /)")
    parser.add_argument("--no-raw", action="store_true", help="leave the parsed raw text out of the JSON")
    parser.set_defaults(func=_run_probe)


EXPLAIN = """\
Read any pasted GPU/NPU cluster output and say what it means: nvidia-smi (table, -q, -q -x, -L, nvlink -s, mig
-lgi/-lci/-lgip, topo -m, --query-gpu csv), a dmesg or syslog excerpt (Xid, fallen off the bus,
RmInitAdapter), dcgmi diag/discovery/nvlink/health/dmon, npu-smi info (and -t …), dcmi and CANN/ACL/HCCL
errors, kubectl describe node/pod/workload, events, Kueue/Volcano objects, HAMi and device-plugin logs,
CUDA/PyTorch/torch_npu/NCCL errors from container logs. Line prefixes (forwarding host, syslog/journalctl,
kubectl --prefix/--timestamps, torchrun rank, kmsg) are taken off first. The paste is split into blocks;
each block's kind is detected and read by the same readers the runs use.

Prints the report as JSON (exit_code, readable, blocks, findings: kind, code, category, owner, entity,
timestamps as printed, counts and ages, quantities, source lines, meaning), or one line per finding
with --text. Exit status: 0 nothing unhealthy, 1 something unhealthy or blocking, 2 nothing in the
input could be read (empty, binary, or no block recognised; the unrecognised lines are still listed).
Text that is readable but not recognised is reported as 'unrecognised' with owner none.
"""

EXPLAIN_PENDING = """\
Explain a captured pending/unschedulable workload offline.

Reads a file (or ``-`` for stdin) holding ``kubectl describe`` output, an events listing, a
Workload / PodGroup / Pod / Event as YAML or JSON, or a bare scheduler / apiserver message, and
prints the normalised reasons as a JSON list of Reason dicts, or one line per reason with ``--text``.

Exit codes: 0 at least one reason was explained; 1 nothing could be explained (the ``unknown``
fragments are still printed); 2 the input could not be read at all.
"""


def _add_explain(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("explain",
                            help="read pasted nvidia-smi/dmesg/dcgmi/npu-smi/kubectl/log output and explain it",
                            description=EXPLAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", default="-", metavar="FILE",
                        help="file to read, or '-' for standard input (default)")
    parser.add_argument("--text", action="store_true", help="one line per finding for people, instead of JSON")
    parser.add_argument("--all", action="store_true",
                        help="with --text, also list healthy/informational findings (default: only problems "
                             "and unrecognised text, plus a count of the rest)")
    parser.set_defaults(func=_run_explain)


def _add_explain_pending(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("explain-pending",
                            help="explain why a workload is pending, from captured kubectl output or objects",
                            description=EXPLAIN_PENDING, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", default="-", metavar="FILE",
                        help="file to read, or '-' for standard input (default)")
    parser.add_argument("--text", action="store_true", help="print one line per reason instead of JSON")
    parser.add_argument("--owner", action="append", default=[], metavar="ROLE=TEAM",
                        help="name the team of an owner role of the failure table (repeatable), e.g. "
                             "image=ml-team")
    parser.set_defaults(func=_run_explain_pending)


def _add_workflow(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lint", help="validate matrices (and AcceptanceRules files) without running: "
                       "schema, referenced files, acceptance rules, entrypoint placeholders "
                       "(all problems, exit 1 on any)")
    p.add_argument("matrices", nargs="+", type=Path, metavar="MATRIX")
    p.add_argument("--digests", action="store_true",
                   help="also compute each model and dataset file's sha256 and compare it with the "
                   "declared one")
    _plugins(p)
    p.set_defaults(func=_run_lint)
    p = sub.add_parser("plan", help="what a run would do: items, omissions, untested, duration estimate")
    p.add_argument("matrix", type=Path, metavar="MATRIX")
    p.add_argument("--profile", default=None, help="profile (graded depth) to plan")
    p.add_argument("--affected", action="append", default=[], metavar="DIM=VAL,…")
    p.add_argument("--affected-from", type=Path, default=None, metavar="OLD_MATRIX")
    p.add_argument("--shard", default=None, metavar="K/N")
    p.add_argument("--backend", default=None, help="override the matrix's target backend")
    p.add_argument("--from-bundle", type=Path, default=None, metavar="BUNDLE",
                   help="estimate from this bundle's item timings instead of the layer timeouts")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--affected-from-cluster", type=Path, default=None, metavar="BASELINE_BUNDLE",
                   help="plan only the items what changed in the matrix's cluster since the bundle's snapshot can "
                        "affect (lists the changes; reads the live cluster, runs nothing)")
    p.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context of the live cluster")
    p.add_argument("--change", default=None, metavar="TEXT|@FILE",
                   help="change record to compare with the observed impact (as --hetero-change)")
    _trust(p)
    _plugins(p)
    p.set_defaults(func=_run_plan)
    p = sub.add_parser("diff", help="compare two bundles offline (exit 1 when the gate policy fails)")
    p.add_argument("old", type=Path, metavar="OLD")
    p.add_argument("new", type=Path, metavar="NEW")
    p.add_argument("--fail-on", choices=POLICIES, default="regression")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="relative metric change reported (default 0.05 = 5%%)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run_diff)
    _trust(p)
    p = sub.add_parser("merge", help="merge shard bundles into one verified bundle")
    p.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR")
    p.add_argument("--sign-key", type=Path, default=None, metavar="PEM", help="Ed25519 private key to sign the merge")
    _signer(p, "the merge's")
    p.add_argument("--matrix", type=Path, default=None, help="the matrix file in this checkout")
    p.set_defaults(func=_run_merge)
    _trust(p)
    _plugins(p)


def _signer(p: argparse.ArgumentParser, whose: str) -> None:
    p.add_argument("--sign-command", metavar="CMD", default=None,
                   help=f"external Ed25519 signer instead of a key file, as a run's --hetero-sign-command: reads the "
                        f"message on stdin, writes the signature (raw, base64 or hex) on stdout; {whose} key then "
                        "never sits on this host")
    p.add_argument("--sign-public", metavar="PEM", type=Path, default=None,
                   help="public key of --sign-command (every signature it returns is checked against it)")


def _trust(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", action="append", type=Path, default=[], metavar="PUB",
                   help="trusted Ed25519 public key (repeatable; also $HETERO_TRUST_KEYS)")
    p.add_argument("--allow-unsigned", action="store_true", help="accept unsigned bundles, marked so")


def _policy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", type=Path, default=None, metavar="POLICY",
                   help="trust policy (YAML): which keys may sign off for which role, and whose they are; trusted "
                        "when signed by a gate key (POLICY.dsse.json, hetero sign-policy) or pinned by --policy-sha256")
    p.add_argument("--policy-sha256", default=None, metavar="HEX",
                   help="pin the trust policy by its sha256 instead of its gate-key signature")


def _add_signing(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("keygen", help="create an Ed25519 key pair (PEM; private key mode 0600)")
    p.add_argument("key", help="private key file to create")
    p.add_argument("--pub", help="public key file (default: KEY.pub)")
    p.set_defaults(func=_run_keygen)

    p = sub.add_parser("sign", help="add a team's sign-off (its own attestation) to a bundle")
    p.add_argument("bundle", help="report folder (reports/<run-id>)")
    p.add_argument("--key", default=None, help="the team's Ed25519 private key (PEM); or --sign-command")
    _signer(p, "the team's")
    p.add_argument("--role", required=True, help="owner team as named in the matrix (e.g. business)")
    p.add_argument("--decision", required=True, choices=DECISIONS,
                   help="accept; accept-with-conditions; accept-with-known-failures (required when a layer signed "
                        "has failed, errored or blocked items); reject")
    p.add_argument("--text", default=None, help="the conditions, the known failures accepted, or why rejected "
                                                "(required for every decision but accept)")
    p.add_argument("--layer", action="append", choices=LAYERS,
                   help="layer to vouch for (repeatable; default: every layer the role owns)")
    p.add_argument("--gate-key", action="append", default=[], metavar="PUB",
                   help="run-signing public key the bundle must verify against before it is signed (repeatable; "
                        "also $HETERO_TRUST_KEYS); without one, the bundle's files are still checked against its "
                        "signed statement")
    p.add_argument("--unverified", action="store_true",
                   help="sign even though the bundle does not verify (unsigned, tampered); the refusal says why")
    p.add_argument("--supersede", action="store_true",
                   help="record a later decision of this key for this role; the earlier sign-off stays, superseded")
    p.set_defaults(func=_run_sign)

    p = sub.add_parser("sign-policy", help="sign a trust policy with the gate key (writes POLICY.dsse.json)")
    p.add_argument("policy", type=Path, help="trust policy YAML (kind: TrustPolicy)")
    p.add_argument("--key", default=None, help="the gate's Ed25519 private key (PEM); or --sign-command")
    _signer(p, "the gate's")
    p.set_defaults(func=_run_sign_policy)

    p = sub.add_parser("verify", help="verify a bundle offline: signatures, statement, manifest, sign-offs")
    p.add_argument("bundle", help="report folder")
    p.add_argument("--key", action="append", default=[], help="trusted gate (run-signing) public key PEM "
                                                              "(repeatable)")
    _policy_options(p)
    p.add_argument("--require-role", action="append", default=[], metavar="ROLE",
                   help="fail unless ROLE has a verified sign-off that does not reject (repeatable; needs --policy)")
    p.add_argument("--max-age", default=None, metavar="AGE",
                   help="fail when the run finished longer ago than AGE (e.g. 36h, 7d, 90m, 3600s)")
    p.add_argument("--signoff-head", default=None, metavar="N:SHA256",
                   help="fail unless the bundle still holds this N-th sign-off (as hetero sign and verify print it): "
                        "the removal of the latest sign-offs is caught only against such a record kept elsewhere")
    p.set_defaults(func=_run_verify)

    p = sub.add_parser("render", help="re-render a bundle's evidence.json (html, md, junit, ctrf), or its "
                       "acceptance dossier (dossier, --lang en|zh)")
    p.add_argument("bundle", help="report folder")
    p.add_argument("--format", choices=list(FORMATS), default="html",
                   help="dossier: the acceptance dossier (cover, proves / does not prove, the five layers, "
                   "acceptance results, phases and POC scenarios, untested scope, reproduce)")
    p.add_argument("--lang", choices=LANGS, default=None, help="language of the dossier (default en; dossier only)")
    p.add_argument("--out", help="output file (default: stdout); keep it outside the bundle, which is signed")
    p.add_argument("--pdf", action="store_true",
                   help="print the HTML (html or dossier) to PDF (--out) with headless Chromium; the dossier prints A4")
    p.add_argument("--key", action="append", default=[], help="trusted gate public key PEM (repeatable): the "
                                                              "evidence is rendered only once verified")
    _policy_options(p)
    p.set_defaults(func=_run_render)

    p = sub.add_parser("trend", help="each item and metric across many signed bundles (nights): status history, "
                       "first failing night, flaky items, metric series with their bound; verifies each bundle first")
    p.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE", help="report folders, in any order "
                   "(ordered by their run's start time)")
    p.add_argument("--format", choices=("text", "json", "html"), default="text")
    p.add_argument("--out", type=Path, default=None, help="output file (default: stdout)")
    p.add_argument("--limit", type=int, default=50, metavar="N",
                   help="items listed per section in text and html (default 50; json lists all)")
    p.set_defaults(func=_run_trend)
    _trust(p)


def _add_status(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("catalog", help="the resource catalogue from signed bundles: per pool its type, nodes, "
                       "requestable quantity, labels, queue, validation level per task type, expiry, owners, untested")
    p.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--now", default=None, metavar="TIME", help="judge expiry as of TIME (ISO 8601; default: now)")
    _trust(p)
    p.set_defaults(func=_run_catalog)
    p = sub.add_parser("publish", help="write a verified bundle's validation status onto the cluster's nodes "
                       "(label and condition validation.<domain>/<task-type>); refuses an unverified or expired one")
    p.add_argument("bundles", nargs="*", type=Path, metavar="BUNDLE")
    p.add_argument("--to", required=True, choices=("kubernetes",), help="where to publish")
    p.add_argument("--key", action="append", type=Path, default=[], metavar="PUB",
                   help="trusted Ed25519 public key (repeatable; also $HETERO_TRUST_KEYS); unsigned bundles are "
                        "refused")
    p.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="kubeconfig (default: $KUBECONFIG, in-cluster)")
    p.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context")
    p.add_argument("--taint", default=None, metavar="KEY",
                   help="also manage taint KEY:NoSchedule: removed while a task type's condition is True on the node, "
                        "added back when none is (what a NodeReadinessRule over these conditions does)")
    p.add_argument("--require-level", default="business", choices=LAYERS,
                   help="the level a task type must reach for its condition to be True (default business)")
    p.add_argument("--expire", action="store_true",
                   help="instead of publishing, withdraw every status of --domain whose expiry has passed")
    p.add_argument("--domain", default=None, help="with --expire: the status domain (spec.validation.domain)")
    p.add_argument("--now", default=None, metavar="TIME", help="judge expiry as of TIME (ISO 8601; default: now)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    p.set_defaults(func=_run_publish)
