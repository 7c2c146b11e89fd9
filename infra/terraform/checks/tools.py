"""The pinned tools that check infra/terraform offline, each fetched once into the cache:
checkov in its own virtualenv (checkov.lock), the provider schema from @cdktf/provider-google
(integrity-pinned below), Terraform v1.5.7 from the Go module proxy for `terraform fmt -check`.
Why each: infra/terraform/README.md. Cache: $OBSINGEST_STACK_CACHE_DIR, else .cache/.
Usage: ``python infra/terraform/checks/tools.py checkov|schema|fmt``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from infra.prometheus.promtool import cache_dir as cache_root
from infra.prometheus.promtool import go_binary, go_env

HERE = Path(__file__).resolve().parent
TERRAFORM_DIR = HERE.parent

CHECKOV_LOCK = HERE / "checkov.lock"
SCHEMA_SCRIPT = str(HERE / "provider_schema.py")
PROVIDER_PACKAGE = "@cdktf/provider-google"
PROVIDER_PACKAGE_VERSION = "16.12.1"  # bindings of hashicorp/google 6.50.0
PROVIDER_VERSION = "6.50.0"
PROVIDER_PACKAGE_INTEGRITY = (  # npm's dist.integrity of that version
    "sha512-KqNA/5RiFT07r0PSZ6/07cJ2zESUgbj1JchVj21iBFBZVUbD+578xA/k8eq/r0cbyEgLmg9eYWeVslaYah4DCQ=="
)
TERRAFORM_MODULE = "github.com/hashicorp/terraform"
TERRAFORM_VERSION = "v1.5.7"


class ToolError(RuntimeError):
    """A tool could not be fetched or built; the message carries its output."""


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise ToolError(f"`{' '.join(args)}` failed:\n{(result.stdout + result.stderr)[-4000:]}")
    return result


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        raise ToolError("uv not found (make setup installs it into .venv)")
    return found


def checkov_env(cache: Path | None = None) -> Path:
    """The virtualenv holding the locked checkov (created on first use); returns its python."""
    digest = hashlib.sha256(CHECKOV_LOCK.read_bytes()).hexdigest()[:12]
    venv = (cache or cache_root()) / "checkov" / digest
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    _run([_uv(), "venv", "-q", "--python", sys.executable, str(venv)])
    _run([_uv(), "pip", "sync", "-q", "--python", str(python), str(CHECKOV_LOCK)])
    (venv / ".complete").touch()
    return python


def run_checkov(tf_dir: Path = TERRAFORM_DIR, cache: Path | None = None) -> dict[str, Any]:
    """checkov's JSON report of ``tf_dir``: offline (no guideline download, no platform key)."""
    python = checkov_env(cache)
    env = {k: v for k, v in os.environ.items() if k not in ("BC_API_KEY", "PRISMA_API_URL")}
    argv = [str(python), "-m", "checkov.main", "--directory", str(tf_dir)]
    argv += ["--framework", "terraform", "--skip-download", "--compact", "--output", "json"]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tf_dir)
    if result.returncode not in (0, 1):  # 1 = failed checks, reported in the JSON
        raise ToolError(f"checkov exited {result.returncode}:\n{result.stderr[-4000:]}")
    report = json.loads(result.stdout)
    return report[0] if isinstance(report, list) else report


def provider_schema(cache: Path | None = None) -> Path:
    """The compact schema JSON of the pinned Google provider release (built on first use)."""
    out = (cache or cache_root()) / "terraform-schema" / f"google-{PROVIDER_VERSION}.json"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if not npm:
        raise ToolError("npm not found (Debian package npm, or Node.js)")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        spec = f"{PROVIDER_PACKAGE}@{PROVIDER_PACKAGE_VERSION}"
        packed = _run([npm, "pack", spec, "--json", "--silent", "--pack-destination", tmp]).stdout
        tarball = Path(tmp) / json.loads(packed)[0]["filename"]
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if f"sha512-{digest}" != PROVIDER_PACKAGE_INTEGRITY:
            raise ToolError(f"{spec}: integrity sha512-{digest} is not the pinned one")
        with tarfile.open(tarball) as archive:
            archive.extract("package/.jsii", tmp, filter="data")
        partial = out.with_suffix(".partial")
        _run([sys.executable, SCHEMA_SCRIPT, "convert", str(Path(tmp) / "package" / ".jsii"), str(partial)])
        partial.replace(out)
    return out


def schema_problems(tf_dir: Path = TERRAFORM_DIR, cache: Path | None = None) -> list[str]:
    """What the provider schema refuses in ``tf_dir`` (empty when everything is known)."""
    return _in_checkov_env(cache, "check", str(provider_schema(cache)), str(tf_dir))


def parsed_config(tf_dir: Path = TERRAFORM_DIR, cache: Path | None = None) -> dict[str, list]:
    """The .tf files of ``tf_dir`` as python-hcl2 parses them (see provider_schema.parse)."""
    return _in_checkov_env(cache, "dump", str(tf_dir))


def _in_checkov_env(cache: Path | None, *args: str) -> Any:
    """provider_schema.py's JSON answer, run where python-hcl2 is: checkov's virtualenv."""
    return json.loads(_run([str(checkov_env(cache)), SCHEMA_SCRIPT, *args]).stdout)


def terraform(cache: Path | None = None) -> Path:
    """Terraform built from the Go module proxy into <cache>/bin/terraform-<version>/."""
    root = cache or cache_root()
    target = root / "bin" / f"terraform-{TERRAFORM_VERSION}"
    binary = target / "terraform"
    if not binary.exists():
        module = f"{TERRAFORM_MODULE}@{TERRAFORM_VERSION}"
        _run([go_binary(), "install", "-trimpath", "-ldflags=-s -w", module], env=go_env(root, target))
    return binary


def terraform_fmt_problems(tf_dir: Path = TERRAFORM_DIR, cache: Path | None = None) -> str:
    """`terraform fmt -check -diff` output; empty when every file is formatted."""
    argv = [str(terraform(cache)), "fmt", "-check", "-diff", "-recursive", str(tf_dir)]
    env = dict(os.environ, TF_CLI_CONFIG_FILE="/dev/null")
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    return "" if result.returncode == 0 else (result.stdout + result.stderr)


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    failed = False
    if what in ("checkov", "all"):
        report = run_checkov()
        print(f"checkov: {report.get('summary', {})}")
        for check in report.get("results", {}).get("failed_checks", []):
            failed = True
            print(f"  FAILED {check['check_id']} {check['resource']} {check['file_path']}")
    if what in ("schema", "all"):
        problems = schema_problems()
        print(f"google {PROVIDER_VERSION} schema: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    if what in ("fmt", "all"):
        diff = terraform_fmt_problems()
        print(f"terraform {TERRAFORM_VERSION} fmt -check: {'ok' if not diff else 'NOT formatted'}")
        print(diff, end="")
        failed = failed or bool(diff)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
