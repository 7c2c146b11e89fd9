"""Small disks of a world's own, for the exhaustion scenarios (tests/chaos/exhaustion.py): a
tmpfs over the GCS emulator's directory of the world's bucket, a tmpfs tablespace holding
the world's registry database, and a tmpfs as the log directory of a Kafka broker of the world's
own. Filling one fills that resource's disk, never the machine's.

Kept apart from the faults so ``World`` can set them up without importing the faults (which
import ``World``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from infra.local.stack.kafka_broker import Kafka


def mount_gcs_disk(stack: Any, bucket: str, megabytes: int) -> Path:
    """A tmpfs over the GCS emulator's directory of ``bucket`` (still empty: nothing hidden)."""
    disk = stack.settings.data_dir("gcs") / "storage" / bucket
    disk.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(disk)], check=True)
    return disk


def kafka_broker_on_small_disk(megabytes: int) -> tuple[Any, Path]:
    """A Kafka broker of its own (a ``PrivateStack``) whose only log directory (its partitions
    and, in KRaft, the metadata log too) is a tmpfs of ``megabytes``, mounted before the broker
    formats it; (the started stack, the mount point). Undo with ``drop_kafka_disk``."""
    from tests.integration.fixtures.private_stack import PrivateStack

    kafka = PrivateStack(["kafka"])
    disk = cast("Kafka", kafka.stack.service("kafka")).log_dirs
    disk.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(disk)], check=True)
    try:
        kafka.up(timeout=180)
    except Exception:
        drop_kafka_disk(kafka, disk)
        raise
    return kafka, disk


def drop_kafka_disk(kafka: Any, disk: Path) -> list[str]:
    """The broker stopped first, then its tmpfs unmounted and its run directory removed; the
    services that were running (``Stack.down``)."""
    stopped = kafka.stack.down()
    subprocess.run(["umount", "-l", str(disk)], check=False)
    kafka.down()
    return list(stopped)


def mount_registry_disk(stack: Any, tag: str, megabytes: int) -> Path:
    """A tmpfs of ``megabytes`` owned by PostgreSQL's user, for a tablespace."""
    import pwd

    from infra.local.stack.postgres_server import run_as_user

    disk = stack.run_dir / f"registry-disk-{tag}"
    disk.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(disk)], check=True
    )
    user = run_as_user(stack.settings.postgres_user)
    if user:
        entry = pwd.getpwnam(user)
        os.chown(disk, entry.pw_uid, entry.pw_gid)
    return disk


def _dsn(admin_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)


def create_database_on(admin_url: str, disk: Path, prefix: str) -> tuple[str, str]:
    """A tablespace at ``disk`` and a database in it; (database URL, tablespace name)."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_dsn(admin_url), autocommit=True) as conn:
        conn.execute(f"CREATE TABLESPACE \"ts_{name}\" LOCATION '{disk}'")
        conn.execute(f'CREATE DATABASE "{name}" TABLESPACE "ts_{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    return url, f"ts_{name}"


def drop_registry_disk(admin_url: str, tablespace: str, disk: Path) -> None:
    """The tablespace dropped (its database is dropped first) and the tmpfs unmounted."""
    import psycopg

    with contextlib.suppress(Exception), psycopg.connect(_dsn(admin_url), autocommit=True) as c:
        c.execute(f'DROP TABLESPACE IF EXISTS "{tablespace}"')
    subprocess.run(["umount", "-l", str(disk)], check=False)
    with contextlib.suppress(OSError):
        disk.rmdir()
