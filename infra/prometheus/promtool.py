"""Build promtool, Prometheus' rule checker, from the Go module proxy (release tarballs cannot
be downloaded here): pinned, once, into .cache; also the Go environment of infra/terraform/checks.
Built in a scratch directory and moved into place under a lock, so no half-written binary is
ever seen. Usage: ``python infra/prometheus/promtool.py`` prints the binary's path.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.316.0"  # Prometheus 3.16.0
PROMTOOL_PACKAGE = f"{PROMETHEUS_MODULE}/cmd/promtool"
PROMETHEUS_RELEASE = "3.16.0"
#: a cheap cold build (figures: infra/prometheus/README.md): no service discoveries, no
#: optimiser (a third less compile CPU), no symbol table; the release for `promtool --version`
BUILD_FLAGS = (
    "-tags=remove_all_sd",
    "-trimpath",
    "-gcflags=all=-N -l",
    f"-ldflags=-s -w -X github.com/prometheus/common/version.Version={PROMETHEUS_RELEASE}",
)

ROOT = Path(__file__).resolve().parents[2]
GO_FALLBACKS = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")


class PromtoolBuildError(RuntimeError):
    """promtool could not be built; the message carries go's output."""


def cache_dir() -> Path:
    """The project's artefact cache (``OBSINGEST_STACK_CACHE_DIR``, default ``<repo>/.cache``)."""
    configured = os.environ.get("OBSINGEST_STACK_CACHE_DIR")
    return Path(configured).resolve() if configured else ROOT / ".cache"


def promtool_path(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "bin" / f"promtool-{PROMETHEUS_VERSION}" / "promtool"


def go_binary() -> str:
    for candidate in (os.environ.get("OBSINGEST_STACK_GO"), shutil.which("go"), *GO_FALLBACKS):
        if candidate and Path(candidate).exists():
            return candidate
    raise PromtoolBuildError("go not found (install Go >= 1.26, or set OBSINGEST_STACK_GO)")


def go_env(cache: Path, gobin: Path) -> dict[str, str]:
    root = cache / "go"
    env = dict(os.environ)
    env.update(
        GOPATH=str(root / "path"),
        GOMODCACHE=str(root / "mod"),
        GOCACHE=str(root / "build"),
        GOBIN=str(gobin),
        GOFLAGS="-mod=mod -modcacherw -buildvcs=false",
        GOWORK="off",
        CGO_ENABLED="0",
    )
    return env


def fetch(cache: Path | None = None, nice: int = 0) -> Path:
    """The pinned promtool, built on first use (at CPU priority ``nice``)."""
    cache = cache or cache_dir()
    binary = promtool_path(cache)
    if binary.exists():
        return binary
    binary.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent.parent / f".promtool-{PROMETHEUS_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        with tempfile.TemporaryDirectory(dir=binary.parent.parent) as scratch:
            target = f"{PROMTOOL_PACKAGE}@{PROMETHEUS_VERSION}"
            argv = [go_binary(), "install", *BUILD_FLAGS, target]
            env, renice = go_env(cache, Path(scratch)), (lambda: os.nice(nice)) if nice > 0 else None
            started = time.monotonic()
            result = subprocess.run(argv, env=env, capture_output=True, text=True, preexec_fn=renice)
            if result.returncode != 0:
                raise PromtoolBuildError(
                    f"`{' '.join(argv)}` failed after {time.monotonic() - started:.0f} s:\n"
                    + (result.stdout + result.stderr)[-4000:]
                )
            binary.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(scratch) / "promtool", binary)
    return binary


if __name__ == "__main__":
    try:
        print(fetch())
    except PromtoolBuildError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
