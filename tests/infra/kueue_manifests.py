"""Kueue's own manifests, adapted to a manager run out of cluster, applied to the real-node plane.

Used by ``kueue.sh``; standard library + PyYAML only (no Kubernetes client), so it runs before
the test dependencies are installed.

What changes from the module source (``config/components/`` of ``sigs.k8s.io/kueue@<version>``):

* CRDs (``crd/bases``): the conversion webhook the module's ``crd/kustomization.yaml`` patches in
  (``patches/webhook_in_<plural>.yaml``, uncommented entries only) points at
  ``url: https://127.0.0.1:<port>/convert`` with the plane CA as ``caBundle``: the plane has no
  kube-proxy, so a Service reference could never be reached.
* Webhook configurations (``webhook/manifests.yaml``): named ``kueue-<name>`` as the release does,
  ``url:`` instead of ``service:``, and only the webhooks of Kueue's own kinds plus the frameworks in
  use (``batch/job``). The pod / deployment / statefulset / ... webhooks are dropped: with
  ``failurePolicy: Fail`` and no manager serving them they would block every pod on the plane. The
  job webhooks get the namespaceSelector the module's kustomization copies onto them (not
  ``kube-system`` / ``kueue-system``).

Commands::

    python3 kueue_manifests.py apply  --manifests DIR --url https://127.0.0.1:PORT --api URL \
        --ca CA --cert CRT --key KEY [--webhooks]
    python3 kueue_manifests.py delete-webhooks --api URL --ca CA --cert CRT --key KEY
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "kueue-system"
FIELD_MANAGER = "hetero-kueue-sh"
WEBHOOK_CONFIGS = (
    ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
)
#: framework name (Kueue's ``integrations.frameworks``) -> (API group, resource) its webhooks match
FRAMEWORKS = {"batch/job": ("batch", "jobs")}
KUEUE_GROUP = "kueue.x-k8s.io"
#: what the module's webhook/kustomization.yaml copies onto the job webhooks
SYSTEM_NAMESPACES = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
    ]
}


def _load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def conversion_patched(manifests: Path) -> set[str]:
    """CRD names whose conversion webhook the module's ``crd/kustomization.yaml`` enables."""
    kust = yaml.safe_load((manifests / "crd" / "kustomization.yaml").read_text())
    names = set()
    for patch in kust.get("patches") or []:
        path = patch.get("path", "")
        if Path(path).name.startswith("webhook_in_"):
            doc = yaml.safe_load((manifests / "crd" / path).read_text())
            names.add(doc["metadata"]["name"])
    return names


def _keep_webhook(hook: dict[str, Any], frameworks: list[str]) -> bool:
    wanted = {FRAMEWORKS[f] for f in frameworks}
    for rule in hook.get("rules", []):
        for group in rule.get("apiGroups", []):
            if group == KUEUE_GROUP:
                continue
            if not all((group, res) in wanted for res in rule.get("resources", [])):
                return False
    return True


def render(manifests: Path, url: str, ca_pem: bytes, frameworks: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """Return (base objects, webhook configurations), each a list of (API path, object).

    ``url`` is the webhook server's base URL (``https://127.0.0.1:<port>``).
    """
    ca_b64 = base64.b64encode(ca_pem).decode()
    base: list[tuple[str, dict[str, Any]]] = [
        (f"/api/v1/namespaces/{NAMESPACE}",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    ]
    converted = conversion_patched(manifests)
    for crd_file in sorted((manifests / "crd" / "bases").glob("*.yaml")):
        crd = yaml.safe_load(crd_file.read_text())
        name = crd["metadata"]["name"]
        if name in converted:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"{url}/convert", "caBundle": ca_b64},
                    "conversionReviewVersions": ["v1"],
                },
            }
        base.append((f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", crd))
    hooks: list[tuple[str, dict[str, Any]]] = []
    for doc in _load_all(manifests / "webhook" / "manifests.yaml"):
        plural = dict(WEBHOOK_CONFIGS).get(doc["kind"])
        if plural is None:
            continue
        doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"]}
        kept = []
        for hook in doc.get("webhooks", []):
            if not _keep_webhook(hook, frameworks):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": url + path, "caBundle": ca_b64}
            if any(g != KUEUE_GROUP for r in hook.get("rules", []) for g in r.get("apiGroups", [])):
                hook["namespaceSelector"] = SYSTEM_NAMESPACES
            kept.append(hook)
        doc["webhooks"] = kept
        hooks.append((f"/apis/admissionregistration.k8s.io/v1/{plural}/{doc['metadata']['name']}", doc))
    return base, hooks


class Api:
    """Minimal HTTPS client for the plane (admin client certificate)."""

    def __init__(self, server: str, ca: str, cert: str, key: str) -> None:
        self.server = server.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def call(self, method: str, path: str, body: bytes | None = None,
             content_type: str = "application/json") -> dict[str, Any]:
        req = urllib.request.Request(self.server + path, data=body, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
            answer: dict[str, Any] = json.loads(resp.read() or b"{}")
            return answer

    def apply(self, path: str, obj: dict[str, Any]) -> None:
        """Server-side apply (force): idempotent, and takes over fields an older run set."""
        self.call("PATCH", f"{path}?fieldManager={FIELD_MANAGER}&force=true",
                  json.dumps(obj).encode(), "application/apply-patch+yaml")

    def delete(self, path: str) -> bool:
        try:
            self.call("DELETE", path)
            return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise


def _established(api: Api, path: str) -> bool:
    crd = api.call("GET", path)
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["apply", "delete-webhooks"])
    p.add_argument("--manifests", type=Path, help="copy of the module's config/components")
    p.add_argument("--url", help="webhook server base URL, https://127.0.0.1:<port>")
    p.add_argument("--frameworks", default="batch/job")
    p.add_argument("--webhooks", action="store_true", help="apply the webhook configurations too")
    p.add_argument("--api", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    args = p.parse_args(argv)
    api = Api(args.api, args.ca, args.cert, args.key)
    if args.command == "delete-webhooks":
        for _, plural in WEBHOOK_CONFIGS:
            for name in ("kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"):
                if api.delete(f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}"):
                    print(f"deleted {plural}/{name}", file=sys.stderr)
        return 0
    base, hooks = render(args.manifests, args.url, Path(args.ca).read_bytes(), args.frameworks.split(","))
    for path, obj in base if not args.webhooks else hooks:
        api.apply(path, obj)
    if not args.webhooks:
        deadline = time.monotonic() + 60
        for path, obj in base:
            if obj["kind"] != "CustomResourceDefinition":
                continue
            while not _established(api, path):
                if time.monotonic() > deadline:
                    print(f"CRD {obj['metadata']['name']} not Established after 60 s", file=sys.stderr)
                    return 1
                time.sleep(0.3)
        print(f"applied {len(base)} objects (namespace + CRDs), all CRDs Established", file=sys.stderr)
    else:
        names = [h["name"] for _, doc in hooks for h in doc["webhooks"]]
        print(f"applied {len(hooks)} webhook configurations: {', '.join(names)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
