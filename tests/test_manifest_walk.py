"""The manifest's walk (os.scandir) and serialisation (by hand) give the same bytes as the plain way
(os.walk, json.dumps(indent=1)) they replace (issue 20 item 4)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import tracemalloc
from pathlib import Path

from pytest_hetero.bundle.manifest import (
    _ENTRY_BATCH,
    Manifest,
    ManifestFile,
    _sort_key,
    bundle_files,
    manifest_bytes,
    write_manifest_data,
)


def _walk_plain(bundle: Path) -> tuple[list[str], list[str]]:
    """The os.walk listing the scandir walk replaced."""
    files: list[str] = []
    odd: list[str] = []
    for root, dirs, names in os.walk(bundle, followlinks=False):
        rel_root = Path(root).relative_to(bundle)
        odd += [(rel_root / d).as_posix() for d in dirs if (Path(root) / d).is_symlink()]
        for name in names:
            full, rel = Path(root) / name, (rel_root / name).as_posix()
            if full.is_symlink() or not full.is_file():
                odd.append(rel)
            elif rel not in {"manifest.json", "statement.intoto.json", "attestation.intoto.jsonl"}:
                files.append(rel)
    return sorted(files, key=_sort_key), sorted(odd, key=_sort_key)


def test_the_scandir_walk_lists_what_os_walk_listed(tmp_path: Path) -> None:
    rng = random.Random(3)
    for n in range(300):
        path = tmp_path.joinpath(*[rng.choice(["a", "b", "é", "x y", "Z"]) for _ in range(rng.randint(1, 4))],
                                 f"f{n}.txt")
        if path.parent.is_file():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(n))
    for name in ("manifest.json", "statement.intoto.json", "attestation.intoto.jsonl"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "a" / "manifest.json").parent.mkdir(exist_ok=True)
    (tmp_path / "a" / "manifest.json").write_text("{}")  # listed: only top-level signature files are left out
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "file-link").symlink_to("/etc/hostname")
    os.mkfifo(tmp_path / "pipe")
    assert bundle_files(tmp_path) == _walk_plain(tmp_path)
    assert "a/manifest.json" in bundle_files(tmp_path)[0]
    assert bundle_files(tmp_path)[1] == ["file-link", "link", "pipe"]


def test_the_manifest_bytes_are_json_dumps_indent_1(tmp_path: Path) -> None:
    rng = random.Random(1)
    chars = 'ab/é"\\\n\t\u2028\x01😀 '
    for _ in range(300):
        files: list[ManifestFile] = [{"path": "".join(rng.choice(chars) for _ in range(rng.randint(1, 12))),
                                      "sha256": f"{rng.getrandbits(256):064x}", "size": rng.randint(0, 10**12)}
                                     for _ in range(rng.randint(0, 5))]
        manifest: Manifest = {"schema": "pytest-hetero/manifest/v1", "algorithm": "sha256", "files": files}
        assert manifest_bytes(manifest) == (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False)
                                            + "\n").encode("utf-8")


def test_a_manifest_of_many_batches_is_written_piece_by_piece_as_json_dumps(tmp_path: Path) -> None:
    """write_manifest_data writes manifest_bytes a batch of entries at a time (its text is never held whole: it was
    held twice, as text and as bytes, beside the list of each entry's text): the same bytes and digest."""
    rng = random.Random(2)
    odd = ["é", "😀", '"', "\\", "\u2028"]  # now and then a name JSON escapes, or writes as it is (ensure_ascii=False)
    files: list[ManifestFile] = [{"path": f"artifacts/m{n}{odd[n % 5] if n % 97 == 0 else ''}/{rng.getrandbits(40):x}",
                                  "size": rng.randint(0, 10**9), "sha256": f"{rng.getrandbits(256):064x}"}
                                 for n in range(32 * _ENTRY_BATCH + 7)]
    files.sort(key=lambda e: _sort_key(e["path"]))
    manifest: Manifest = {"schema": "pytest-hetero/manifest/v1", "algorithm": "sha256", "files": files}
    reference = (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()
    assert manifest_bytes(manifest) == reference
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        digest = write_manifest_data(tmp_path, manifest)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert (tmp_path / "manifest.json").read_bytes() == reference
    assert digest == hashlib.sha256(reference).hexdigest()
    assert peak < len(reference) / 2, f"peak {peak} bytes while writing {len(reference)}"
