"""Go builds kept inside the project cache (GOPATH, module cache, build cache, binaries)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from infra.local.stack.errors import FetchError
from infra.local.stack.settings import StackSettings


def go_env(settings: StackSettings, gobin: Path | None = None) -> dict[str, str]:
    """Environment that keeps every Go download and build artefact under ``<cache>/go``."""
    root = settings.cache_dir / "go"
    env = dict(os.environ)
    env.update(
        GOPATH=str(root / "path"),
        GOMODCACHE=str(root / "mod"),
        GOCACHE=str(root / "build"),
        # -modcacherw: module cache stays deletable; -mod=mod: resolve go.mod as written.
        GOFLAGS="-mod=mod -modcacherw -buildvcs=false",
        CGO_ENABLED="0",
    )
    if gobin is not None:
        env["GOBIN"] = str(gobin)
    return env


def run_go(
    settings: StackSettings,
    service: str,
    args: list[str],
    *,
    cwd: Path | None = None,
    gobin: Path | None = None,
) -> None:
    """Run ``go <args>`` with the cache environment; FetchError carrying go's output on failure."""
    go = settings.go_bin()
    if not go:
        raise FetchError(service, "go not found (install Go >= 1.24, or set OBSINGEST_STACK_GO)")
    result = subprocess.run([go, *args], cwd=cwd, env=go_env(settings, gobin), capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError(service, f"`go {' '.join(args)}` failed", (result.stdout + result.stderr)[-4000:])


def install(
    settings: StackSettings, service: str, package: str, binary: Path, *, cwd: Path | None = None
) -> None:
    """``go install <package>`` into ``binary`` (named as the package's command): installed into a
    staging directory beside it, then renamed into place. go writes an executable in place (a
    copy out of its build cache): killed midway, it would leave a part under the binary's name,
    which a later fetch (building only a missing binary) took for the whole."""
    staging = binary.parent / ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    run_go(settings, service, ["install", package], cwd=cwd, gobin=staging)
    (staging / binary.name).rename(binary)
    staging.rmdir()
