"""``Builder.ensure_deps`` on a stand-in engine (no Docker): the commands it runs, and what a
build killed between them leaves for the next one."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.containers import images

pytestmark = pytest.mark.unit


class Engine:
    """Images by tag with their stand-in label, containers by name; ``docker`` answers from them."""

    def __init__(self) -> None:
        self.images: dict[str, str] = {}
        self.containers: set[str] = set()

    def docker(self, *args: str, check: bool = True, **_: Any) -> subprocess.CompletedProcess[str]:
        out, rc = "", 0
        match args:
            case ("image", "inspect", "--format", _, tag):
                out, rc = (self.images[tag], 0) if tag in self.images else ("", 1)
            case ("ps", "-aq", "--filter", name):
                out = "\n".join(c for c in sorted(self.containers) if name.removeprefix("name=") in c)
            case ("rm", *names):
                self.containers -= set(names)
            case ("run", "--name", name, *_):
                self.containers.add(name)
            case ("commit", "--change", change, name, tag):
                assert name in self.containers
                self.images[tag] = change.split("=", 1)[1]
        return subprocess.CompletedProcess(args, rc, out, "")


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Engine:
    engine = Engine()
    monkeypatch.setattr(images, "docker", engine.docker)
    monkeypatch.setenv("OBSINGEST_IMAGES_CACHE_DIR", str(tmp_path / "images"))
    monkeypatch.setattr(images.Builder, "build", lambda *args, **kwargs: None)
    monkeypatch.setattr(images.Builder, "_staged_deps", lambda self, digest: tmp_path / "venv")
    return engine


def test_a_deps_build_killed_before_removing_its_container_leaves_none_for_good(engine: Engine) -> None:
    """Killed between `docker commit` and `docker rm`, a build left its container (a copy of the
    1 GB virtualenv): the next build found the image current and returned before removing it,
    and a build of other dependencies never looked for it. The next build removes both."""
    digest = images._folder_hash("obsingest-deps").hexdigest()[:16]
    tag = f"obsingest/obsingest-deps:{digest}"
    engine.images[tag] = digest  # committed ...
    engine.containers |= {f"obsingest-deps-build-{digest}", "obsingest-deps-build-0123456789abcdef"}
    engine.containers.add("register-facility-1")  # someone else's
    assert images.Builder(pull=False).ensure_deps() == tag
    assert engine.containers == {"register-facility-1"}

    del engine.images[tag]  # and a whole build leaves only its image
    assert images.Builder(pull=False).ensure_deps() == tag
    assert engine.images[tag] == digest and engine.containers == {"register-facility-1"}
