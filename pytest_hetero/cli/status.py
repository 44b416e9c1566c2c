"""``hetero catalog`` and ``hetero publish``: the validation status of signed bundles, for people and for
the cluster.

Both read a bundle only once it verifies offline with the trusted keys (``--key``, ``$HETERO_TRUST_KEYS``)
including its VSA file (:func:`pytest_hetero.bundle.vsa.load_status`). Exit status: 0 done, 1 refused
(publish: expired status, nothing to publish, the cluster refused a write), 2 unreadable or unverified input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from pytest_hetero.errors import HeteroError

if TYPE_CHECKING:
    from pytest_hetero.evidence.views import BundleStatus


def _statuses(args: argparse.Namespace, allow_unsigned: bool) -> list[BundleStatus]:
    from pytest_hetero.bundle.verify import trusted_keys
    from pytest_hetero.bundle.vsa import load_status

    keys = trusted_keys(args.key)
    return [load_status(b, keys, allow_unsigned=allow_unsigned) for b in args.bundles]


def cmd_catalog(args: argparse.Namespace) -> int:
    """``hetero catalog BUNDLE…``: the resource catalogue (Markdown, or JSON with ``--json``)."""
    from pytest_hetero.reporting.catalog import catalog_rows, catalog_text
    from pytest_hetero.status.publish import parse_now

    try:
        rows = catalog_rows(_statuses(args, args.allow_unsigned), parse_now(args.now))
    except (HeteroError, ValueError) as exc:
        print(exc.render() if isinstance(exc, HeteroError) else f"bad --now: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=1, sort_keys=True) if args.json else catalog_text(rows))
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """``hetero publish BUNDLE --to kubernetes`` (labels, conditions, annotations, optional taint), or
    ``hetero publish --expire --to kubernetes --domain D`` (withdraw what expired)."""
    from pytest_hetero.backends.kubernetes.publish import apply_plan, read_nodes
    from pytest_hetero.backends.protocol import EngineFault
    from pytest_hetero.status.publish import (
        PublishRefused,
        expiry_plan,
        keep_latest,
        left_as_is,
        node_uids,
        not_replaced,
        parse_now,
        publish_plan,
    )

    untouched: list[dict[str, str]] = []
    later: list[dict[str, str]] = []
    replaced: list[dict[str, str]] = []
    try:
        now = parse_now(args.now)
        if args.expire:
            if args.bundles or not args.domain:
                raise PublishRefused("--expire takes --domain and no bundle", None,
                                     "hetero publish --expire --to kubernetes --domain DOMAIN [--taint KEY]")
            plan = expiry_plan(read_nodes(args.kubeconfig, args.context), args.domain, now, args.taint)
        else:
            if len(args.bundles) != 1:
                raise PublishRefused("publish takes exactly one bundle", None, "hetero publish BUNDLE --to kubernetes")
            status = _statuses(args, allow_unsigned=False)[0]
            plan = publish_plan(status["validation"]["pools"], status["digest"], now, args.taint, args.require_level)
            untouched = left_as_is(status["validation"]["pools"], plan)
            if not args.dry_run:  # one node list: a node a later run's status stands on keeps it; a node of another
                # uid, or created since the run began, is not the node the run exercised
                seen = read_nodes(args.kubeconfig, args.context)
                plan, later = keep_latest(plan, seen)
                began = status["run"].get("started_at")
                plan, replaced = not_replaced(plan, seen, began if isinstance(began, str) else None,
                                              node_uids(status["validation"]["pools"]))
        done = apply_plan(plan, args.taint, args.kubeconfig, args.context) if not args.dry_run else []
    except PublishRefused as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    except EngineFault as exc:
        print(f"the cluster refused: {exc.message} ({exc.category})", file=sys.stderr)
        return 1
    except (HeteroError, ValueError) as exc:
        print(exc.render() if isinstance(exc, HeteroError) else f"bad --now: {exc}", file=sys.stderr)
        return 2
    for gone in (d["node"] for d in done if d.get("gone")):
        print(f"node {gone} no longer exists (deleted since the run): nothing written on it", file=sys.stderr)
    for kept in later:
        print(f"node {kept['node']}: left as a later run published it ({kept['key']} verified at {kept['published']}, "
              f"this bundle's run at {kept['ours']})", file=sys.stderr)
    for new in replaced:
        why = (f"is uid {new['uid']}, the run read uid {new['run_uid']}" if "uid" in new else
               f"was created at {new['created']}, after the run began ({new['run_started']})")
        print(f"node {new['node']} {why}: not the node the run exercised, nothing written on it", file=sys.stderr)
    out: dict[str, Any] = {"plan": plan, "applied": done, "dry_run": args.dry_run}
    if not args.expire:
        out["not_exercised"] = untouched  # unvalidated by this bundle: left as they are
        out["later_status_kept"] = later  # a later run's status stands there: not overwritten by this older bundle
        out["replaced"] = replaced  # another uid, or created since the run began: not the node that ran
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0
