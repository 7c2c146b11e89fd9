"""Typed settings of the local service stack: ``OBSINGEST_STACK_<FIELD>`` overrides each field,
read when :func:`load_settings` is called (not at import)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults

KAFKA_VERSION = "4.3.1"
FAKE_GCS_SERVER_MODULE = "github.com/fsouza/fake-gcs-server"
FAKE_GCS_SERVER_VERSION = "v1.56.1"
PSTEST_VERSION = "v2.8.1"
POSTGRES_MAJOR = "15"


def project_root() -> Path:
    """The checkout this package lives in (editable install), else the current directory."""
    here = Path(__file__).resolve().parents[3]
    if (here / "pyproject.toml").is_file() and (here / "infra" / "local").is_dir():
        return here
    return Path.cwd()


class StackSettings(BaseSettings):
    """Ports, directories and tool locations of the native local stack."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_STACK_", extra="ignore")

    host: str = Field(defaults.LOCAL_HOST, description="loopback address every service binds to")
    run_dir: Path = Field(Path(".run/stack"), description="pid files, logs, service data")
    cache_dir: Path = Field(Path(".cache"), description="fetched jars and built Go binaries")
    infra_dir: Path = Field(Path("infra/local"), description="pom.xml and the pstest server")

    kafka_port: int = defaults.LOCAL_KAFKA_PORT
    kafka_controller_port: int = 19093
    kafka_partitions: int = Field(6, description="num.partitions for auto-created topics")
    kafka_heap: str = Field("768m", description="-Xmx of the broker JVM (2-core machine)")
    kafka_max_message_bytes: int = Field(16 * 1024 * 1024, description="must exceed ~8 MiB chunk records")

    pubsub_port: int = 18085
    pubsub_project_id: str = defaults.LOCAL_PROJECT

    gcs_port: int = 14443
    gcs_backend: Literal["filesystem", "memory"] = Field(
        "filesystem",
        description="fake-gcs-server backend. memory (as compose.yaml) needs half the CPU per upload "
        "but holds every object in RAM until deleted (a day of benchmarks: OOM-killed at 20 GB)",
    )

    postgres_port: int = 15432
    postgres_durable: bool = Field(
        True, description="fsync, synchronous_commit, full_page_writes (postgres_server.py); off for speed"
    )
    postgres_user: str = Field(
        "", description="OS user running the cluster as root (default: postgres, nobody)"
    )

    java: str = ""
    mvn: str = ""
    go: str = ""
    pg_bin_dir: str = ""

    startup_timeout: float = Field(60.0, description="seconds to wait for each service health")

    @model_validator(mode="after")
    def _absolute_dirs(self) -> Self:
        """Relative directories resolve against the project root: one run dir for CLI and pytest."""
        for name in ("run_dir", "cache_dir", "infra_dir"):
            path = getattr(self, name).expanduser()
            setattr(self, name, path if path.is_absolute() else (project_root() / path).resolve())
        return self

    def log_file(self, service: str) -> Path:
        return self.run_dir / "logs" / f"{service}.log"

    def pid_file(self, service: str) -> Path:
        return self.run_dir / "pids" / f"{service}.json"

    def data_dir(self, service: str) -> Path:
        return self.run_dir / service

    def java_bin(self) -> str | None:
        return _tool(self.java, "java", ["/usr/bin/java"])

    def mvn_bin(self) -> str | None:
        return _tool(self.mvn, "mvn", ["/usr/bin/mvn"])

    def go_bin(self) -> str | None:
        return _tool(self.go, "go", ["/usr/local/go/bin/go", "/usr/lib/go/bin/go"])

    def pg_bin(self) -> Path | None:
        """Directory holding initdb/postgres: configured, Debian's versioned dir, or PATH."""
        if self.pg_bin_dir:
            return Path(self.pg_bin_dir)
        debian = Path(f"/usr/lib/postgresql/{POSTGRES_MAJOR}/bin")
        if (debian / "initdb").exists():
            return debian
        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if candidates:
            return candidates[-1].parent
        found = shutil.which("initdb")
        return Path(found).parent if found else None


def _tool(configured: str, name: str, fallbacks: list[str]) -> str | None:
    return configured or shutil.which(name) or next((c for c in fallbacks if os.access(c, os.X_OK)), None)


def load_settings(**overrides: object) -> StackSettings:
    """Read settings from the environment now (not at import)."""
    return StackSettings(**overrides)  # type: ignore[arg-type]
