"""tests/infra/apt-mirror.sh: the Debian archive the test images are built from is the one this machine's apt
uses (sources.list one-line entries, deb822 .sources stanzas), never a host written into the scripts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import REPO

SCRIPT = REPO / "tests" / "infra" / "apt-mirror.sh"

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://mirror.site.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://mirror.site.example/debian/ http://second.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def mirror(root: Path, suite: str = "bookworm") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(root), suite], capture_output=True, text=True, timeout=30)


def apt(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "etc" / "apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "etc" / "apt" / "sources.list.d").mkdir(parents=True, exist_ok=True)
    return root


@pytest.mark.parametrize(("files", "expected"), [
    ({"sources.list.d/debian.sources": DEB822}, "http://mirror.site.example/debian"),
    ({"sources.list": "# comment\ndeb-src http://src.example/debian bookworm main\n"
                      "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://deb.site.example/debian/ bookworm main\n"},
     "https://deb.site.example/debian"),
    # sources.list first, as apt reads it; a security line and a suite without main are passed over
    ({"sources.list": "deb http://sec.example/debian-security bookworm-security main\n"
                      "deb http://nonfree.example/debian bookworm non-free\n",
      "sources.list.d/debian.sources": DEB822}, "http://mirror.site.example/debian"),
    # a disabled stanza, and files apt ignores by their names
    ({"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n"
                                  "Components: main\n",
      "sources.list.d/b.list.disabled-by-farm": "deb http://ignored.example/debian bookworm main\n",
      "sources.list.d/c.list": "deb http://on.example/debian bookworm main\n"}, "http://on.example/debian"),
], ids=["deb822", "one-line-with-options", "apt-order", "disabled-and-ignored"])
def test_the_mirror_apt_uses_for_the_suite(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    done = mirror(apt(tmp_path, files))
    assert (done.returncode, done.stdout, done.stderr) == (0, expected + "\n", "")


def test_no_entry_for_the_suite_says_what_to_set(tmp_path: Path) -> None:
    done = mirror(apt(tmp_path, {"sources.list.d/debian.sources": DEB822}), suite="trixie")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"apt-mirror.sh: no 'deb' entry for suite trixie with component main in {tmp_path}/etc/apt/"
                           "sources.list{,.d/*.list,.d/*.sources}; set HETERO_DEBIAN_MIRROR to the Debian archive to use\n")


def test_the_image_script_names_no_mirror_host() -> None:
    text = (REPO / "tests" / "infra" / "docker-engine.sh").read_text()
    assert "deb.debian.org" not in text and "apt-mirror.sh" in text
