"""``make images``: every image the container runs need, offline if it must be.

The official image when ``docker pull`` fetches it; else a stand-in built under the official
name (so testcontainers finds it): a ``debootstrap`` Debian base (tarball cached in
``.cache/images/``) plus Debian packages and the native stack's pinned artefacts. ``obsingest``
is the project's wheel on ``obsingest/obsingest-deps:<digest>``, a relocatable virtualenv of
``requirements.lock``, so a source change rebuilds only the thin top layer. A stand-in's label
holds the digest of what it was built from; one whose label matches is not rebuilt.

    python -m infra.containers.images [--no-pull] [SERVICE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from infra.containers.names import BASE_IMAGE, OFFICIAL, STAND_IN_LABEL, image
from infra.local.stack import Stack, load_settings
from infra.local.stack.base import artefact_lock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEBIAN_MIRROR = os.environ.get("OBSINGEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
#: the project's own sources: a change in any of them means a new obsingest image
PROJECT_SOURCES = ("obsingest", "obsingest_cli", "producers", "functions", "beam_jobs", "schemas", "infra")
SERVICES = tuple(OFFICIAL)
UV = str(Path(sys.executable).parent / "uv")
#: the folder of ``images/`` holding a service's Dockerfile: its name, but for gcs
DOCKERFILE_DIR = {service: service for service in SERVICES} | {"gcs": "fake-gcs-server"}
#: the name (before its digest) of the container the deps image is committed from
DEPS_BUILD = "obsingest-deps-build-"


class ImageError(RuntimeError):
    """An image could be neither pulled nor built; the message carries the tool's output."""


def docker(
    *args: str, check: bool = True, timeout: float | None = None, quiet: bool = True
) -> subprocess.CompletedProcess[str]:
    """The docker CLI with the classic builder (this engine may lack buildx)."""
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    result = subprocess.run(["docker", *args], env=env, text=True, timeout=timeout, capture_output=quiet)
    if check and result.returncode != 0:
        raise ImageError(f"docker {' '.join(args[:3])} failed:\n{(result.stderr or '')[-3000:]}")
    return result


def label_of(tag: str) -> str | None:
    """The stand-in digest label of a local image; '' for an image without it; None if absent."""
    template = f'{{{{index .Config.Labels "{STAND_IN_LABEL}"}}}}'
    result = docker("image", "inspect", "--format", template, tag, check=False)
    if result.returncode != 0:
        return None
    return result.stdout.strip().replace("<no value>", "")


class Builder:
    """Pulls or builds the images into the engine ``docker`` talks to."""

    def __init__(self, pull: bool = True) -> None:
        self.settings = load_settings()
        override = os.environ.get("OBSINGEST_IMAGES_CACHE_DIR")
        self.cache = Path(override) if override else self.settings.cache_dir / "images"
        self.cache.mkdir(parents=True, exist_ok=True)
        self.pull = pull
        self.timings: dict[str, float] = {}

    def say(self, text: str) -> None:
        print(f"images: {text}", file=sys.stderr, flush=True)

    def base(self) -> None:
        """``obsingest/debian-base:bookworm``: ``docker import`` of a cached debootstrap tarball."""
        if label_of(BASE_IMAGE) is not None:
            return
        tarball = self.cache / "debian-bookworm-minbase.tar.gz"
        with artefact_lock(self.cache, "base"):
            if not tarball.exists():
                self._debootstrap(tarball)
            started = time.monotonic()
            docker("import", "--change", 'CMD ["bash"]', str(tarball), BASE_IMAGE)
            self.timings["base-import"] = time.monotonic() - started

    def _debootstrap(self, tarball: Path) -> None:
        if not shutil.which("debootstrap"):
            if os.geteuid() != 0:
                raise ImageError("debootstrap is missing: apt-get install debootstrap (as root)")
            apt = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=600", "debootstrap"]
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(apt, check=True, capture_output=True, env=env)
        self.say("debootstrap --variant=minbase bookworm (once; ~1-2 min)")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=self.cache, prefix="rootfs.") as tmp:
            rootfs = Path(tmp) / "rootfs"
            _run(["nice", "debootstrap", "--variant=minbase", "bookworm", str(rootfs), DEBIAN_MIRROR])
            for junk in ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
            partial = tarball.with_suffix(".partial")
            subprocess.run(f"tar -C {rootfs} -c . | gzip -1 > {partial}", shell=True, check=True)
            partial.rename(tarball)
        self.timings["base-debootstrap"] = time.monotonic() - started

    def artefacts(self, service: str) -> dict[str, Path]:
        """Context name -> host path of the pinned artefacts a stand-in copies in."""
        if service not in ("kafka", "gcs", "pubsub"):
            return {}
        svc: Any = Stack(self.settings, only=[service]).service(service)
        svc.fetch_once()
        path = svc.libs if service == "kafka" else svc.binary  # named as the Dockerfile copies it
        return {path.name: path}

    def digest(self, service: str, artefacts: dict[str, Path], base: str = "") -> str:
        """What a stand-in is built from: its Dockerfile folder, the artefacts, the sources."""
        h = _folder_hash(DOCKERFILE_DIR[service], base, pins=service == "obsingest")
        for name, path in sorted(artefacts.items()):
            for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
                stat = f.stat()
                h.update(f"{name}/{f.name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
        if service == "obsingest":
            for package in PROJECT_SOURCES:
                for path in sorted((ROOT / package).rglob("*")):
                    if path.suffix in (".py", ".c", ".avsc", ".go", ".mod", ".sum", ".xml"):
                        h.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
        return h.hexdigest()[:16]

    def ensure(self, service: str) -> str:
        """The image for ``service`` is present: pulled, kept, or built. Returns how."""
        tag = image(service)
        artefacts = self.artefacts(service)
        deps = self.ensure_deps() if service == "obsingest" else ""
        digest = self.digest(service, artefacts, deps)
        have = label_of(tag)
        if have == digest or (have == "" and service != "obsingest"):
            return "present"  # our current stand-in, or an official image pulled earlier
        official = self.pull and service != "obsingest" and tag == OFFICIAL[service]
        if official and docker("pull", tag, check=False, timeout=300).returncode == 0:
            return "pulled"
        self.build(service, tag, DOCKERFILE_DIR[service], digest, artefacts, deps)
        return "built"

    def ensure_deps(self) -> str:
        """``obsingest/obsingest-deps:<digest>``: Python and the pinned dependencies, rebuilt
        only when requirements.lock or pyproject.toml change (the slow, 1 GB layer)."""
        digest = _folder_hash("obsingest-deps").hexdigest()[:16]
        tag = f"obsingest/obsingest-deps:{digest}"
        with artefact_lock(self.cache, "obsingest-deps"):
            # a build killed before its `docker rm` left its container, 1 GB each, for good
            if leftovers := docker("ps", "-aq", "--filter", f"name={DEPS_BUILD}").stdout.split():
                docker("rm", "-f", *leftovers)
            if label_of(tag) == digest:
                return tag
            venv = self._staged_deps(digest)
            python_tag = "obsingest/obsingest-deps:python"
            self.build("obsingest-python", python_tag, "obsingest-deps", digest, {})
            # the 1 GB virtualenv goes in by a bind mount and `docker commit`: no build context
            # (tarred, sent, unpacked and copied again by the classic builder), one copy only
            started = time.monotonic()
            name = f"{DEPS_BUILD}{digest}"
            container = ["--name", name, "--network", "none", "-v", f"{venv}:/src:ro", python_tag]
            docker("run", *container, "cp", "-a", "/src/.", "/opt/obsingest/")
            docker("commit", "--change", f"LABEL {STAND_IN_LABEL}={digest}", name, tag)
            docker("rm", name)
            self.timings["obsingest-deps"] = time.monotonic() - started
            return tag

    def _staged_deps(self, digest: str) -> Path:
        """``.cache/images/obsingest-deps-<digest>/venv`` (older sets removed): a relocatable
        virtualenv of the wheel's pinned dependencies from uv's cache, without the project."""
        folder = self.cache / f"obsingest-deps-{digest}"
        venv = folder / "venv"
        if (folder / ".complete").exists():
            return venv
        started = time.monotonic()
        for old in self.cache.glob("obsingest-deps-*"):
            shutil.rmtree(old, ignore_errors=True)
        folder.mkdir(parents=True)
        wheel = self._wheel(folder / "wheels")
        python = str(venv / "bin" / "python")
        _run([UV, "venv", "-q", "--relocatable", "--python", "/usr/bin/python3.11", str(venv)])
        install = [UV, "pip", "install", "-q", "--python", python, "--link-mode=hardlink"]
        _run([*install, "--compile-bytecode", "-c", str(ROOT / "requirements.lock"), str(wheel)])
        _run([UV, "pip", "uninstall", "-q", "--python", python, "obsingest"])
        shutil.rmtree(folder / "wheels")
        (folder / ".complete").write_text(digest + "\n")
        self.timings["obsingest-deps-staging"] = time.monotonic() - started
        return venv

    def build(
        self, what: str, tag: str, folder: str, digest: str, artefacts: dict[str, Path], deps: str = ""
    ) -> None:
        """``docker build --network host`` of ``images/<folder>`` plus artefacts; with ``deps``
        (the project's image) its wheel on that deps image."""
        self.base()
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=self.cache, prefix=f"ctx-{what}.") as tmp:
            context = Path(tmp)
            for path in (HERE / "images" / folder).iterdir():
                shutil.copy2(path, context / path.name)
            for name, path in artefacts.items():
                if path.is_dir():
                    shutil.copytree(path, context / name, copy_function=_link_or_copy)
                else:
                    _link_or_copy(path, context / name)
            if deps:
                self._stage_project(context)
            self.say(f"building {tag} (stand-in)")
            args = [f"--build-arg=DEPS={deps}"] if deps else []
            label = f"{STAND_IN_LABEL}={digest}"
            docker("build", "--network", "host", "--label", label, *args, "-t", tag, str(context))
        self.timings[what] = time.monotonic() - started

    def _wheel(self, into: Path) -> Path:
        """The project's wheel (with its C extension), built by uv."""
        _run([UV, "build", "-q", "--wheel", "--out-dir", str(into), str(ROOT)])
        return next(into.glob("obsingest-*.whl"))

    def _stage_project(self, context: Path) -> None:
        """The project's wheel unpacked into ``site/`` (no dependencies: the deps image)."""
        wheel = self._wheel(context / "wheels")
        install = [UV, "pip", "install", "-q", "--no-deps", "--compile-bytecode", "--python"]
        install += ["/usr/bin/python3.11", "--target", str(context / "site"), str(wheel)]
        _run(install)
        shutil.rmtree(context / "wheels")

    def ensure_all(self, services: tuple[str, ...] = SERVICES) -> dict[str, str]:
        return {service: self.ensure(service) for service in services}


def _folder_hash(folder: str, base: str = "", pins: bool = True) -> Any:
    """sha256 over ``base``, the files of ``images/<folder>`` and (``pins``) the dependency pins."""
    h = hashlib.sha256(base.encode())
    for path in sorted((HERE / "images" / folder).rglob("*")):
        if path.is_file():
            h.update(path.name.encode() + path.read_bytes())
    for name in ("pyproject.toml", "requirements.lock") if pins else ():
        h.update((ROOT / name).read_bytes())
    return h


def _run(argv: list[str]) -> None:
    """``argv`` in the project root; ImageError with its output if it fails."""
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise ImageError(f"{' '.join(argv[:3])} failed:\n{(result.stdout + result.stderr)[-3000:]}")


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link an artefact into a build context (same file system), else copy it."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.containers.images",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("services", nargs="*", metavar="SERVICE", help=f"of {SERVICES}")
    parser.add_argument("--no-pull", action="store_true", help="build stand-ins without trying")
    args = parser.parse_args(argv)
    unknown = set(args.services) - set(SERVICES)
    if unknown:
        parser.error(f"unknown service(s) {sorted(unknown)}; known: {SERVICES}")
    builder = Builder(pull=not args.no_pull)
    started = time.monotonic()
    try:
        for service in args.services or SERVICES:
            how = builder.ensure(service)
            builder.say(f"{image(service)}: {how}")
    except ImageError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    builder.say(
        f"ready in {time.monotonic() - started:.1f} s "
        + " ".join(f"{k}={v:.1f}s" for k, v in builder.timings.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
