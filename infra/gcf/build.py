"""Build the register function's source archive for Cloud Functions gen2: ``main.py`` (the shim),
the packages it imports and a ``requirements.txt`` with ``requirements.lock``'s pins of its own
dependencies only (no Beam, astropy, ...). Usage: ``python infra/gcf/build.py OUT.zip``.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("functions", "obsingest", "schemas")
#: what the register path imports (directly or through the adapters it can be configured with)
RUNTIME = (
    "functions-framework",
    "werkzeug",
    "cloudevents",
    "google-cloud-storage",
    "google-cloud-pubsub",
    "google-auth",
    "google-crc32c",
    "sqlalchemy",
    "psycopg",
    "psycopg-binary",
    "fastavro",
    "pydantic",
    "pydantic-settings",
    "requests",
    "confluent-kafka",
)


def pinned_requirements() -> str:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==", 1)
            pins[name.split("[")[0].strip().lower()] = version.strip()
    missing = [n for n in RUNTIME if n not in pins]
    if missing:
        raise SystemExit(f"not pinned in requirements.lock: {', '.join(missing)}")
    return "".join(f"{name}=={pins[name]}\n" for name in RUNTIME)


def tracked_files() -> list[str]:
    argv = ["git", "ls-files", *PACKAGES]
    out = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if f.endswith((".py", ".avsc"))]


def build(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(ROOT / "infra" / "gcf" / "main.py", "main.py")
        zf.writestr("requirements.txt", pinned_requirements())
        for name in tracked_files():
            zf.write(ROOT / name, name)
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "build/register-function.zip")))
