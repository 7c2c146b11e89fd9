"""Kafka 4.3.1, single node in KRaft mode (broker + controller), from Maven Central jars."""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from pathlib import Path

from infra.local.stack.base import Launch, Service
from infra.local.stack.errors import FetchError, StackError
from infra.local.stack.process import port_open
from infra.local.stack.settings import KAFKA_VERSION, StackSettings


def render_server_properties(settings: StackSettings, log_dir: Path | None) -> str:
    """server.properties for a one-node KRaft cluster sized for a 2-core test machine; record
    limits raised so ~8 MiB chunk records pass, internal topics at replication 1 (one broker)."""
    host = settings.host
    max_bytes = settings.kafka_max_message_bytes
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{settings.kafka_controller_port}",
        "listeners": (
            f"PLAINTEXT://{host}:{settings.kafka_port},CONTROLLER://{host}:{settings.kafka_controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{host}:{settings.kafka_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.partitions": str(settings.kafka_partitions),
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "message.max.bytes": str(max_bytes),
        "replica.fetch.max.bytes": str(max_bytes),
        "replica.fetch.response.max.bytes": str(max(max_bytes, 10 * 1024 * 1024)),
        "fetch.max.bytes": str(max(max_bytes * 4, 57671680)),
        "socket.request.max.bytes": str(max(max_bytes * 4, 104857600)),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.hours": "24",
        "log.segment.bytes": str(256 * 1024 * 1024),
    }
    if log_dir is not None:
        props["log.dirs"] = str(log_dir)
    header = "# written by obsingest stack; edit StackSettings instead\n"
    return header + "".join(f"{k}={v}\n" for k, v in props.items())


def new_cluster_id() -> str:
    """16 random bytes, URL-safe base64 without padding (as kafka-storage random-uuid)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Kafka(Service):
    name = "kafka"
    port_fields = ("kafka_port", "kafka_controller_port")
    stop_timeout = 30.0

    @property
    def home(self) -> Path:
        return self.settings.cache_dir / f"kafka-{KAFKA_VERSION}"

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    def env(self) -> dict[str, str]:
        return {"KAFKA_BOOTSTRAP_SERVERS": self.endpoint}

    def fetch(self) -> None:
        """The broker's runtime dependency closure from Maven Central, once."""
        stamp = self.libs / ".complete"
        if stamp.exists():
            return
        mvn = self.settings.mvn_bin()
        if not mvn:
            raise FetchError(self.name, "mvn not found (apt-get install maven; OBSINGEST_STACK_MVN)")
        pom = self.settings.infra_dir / "kafka" / "pom.xml"
        staging = self.home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        argv = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
        argv += ["-DincludeScope=runtime", f"-Dmaven.repo.local={self.settings.cache_dir / 'm2'}"]
        argv += [f"-DoutputDirectory={staging}"]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise FetchError(
                self.name, "maven could not fetch the broker jars", (result.stdout + result.stderr)[-4000:]
            )
        shutil.rmtree(self.libs, ignore_errors=True)
        staging.rename(self.libs)
        stamp.write_text(f"kafka {KAFKA_VERSION}\n")

    @property
    def config_path(self) -> Path:
        return self.settings.data_dir(self.name) / "server.properties"

    @property
    def log_dirs(self) -> Path:
        return self.settings.data_dir(self.name) / "data"

    def _jvm(self) -> list[str]:
        java = self.settings.java_bin()
        if not java:
            raise FetchError(self.name, "java not found (make system-deps; OBSINGEST_STACK_JAVA)")
        argv = [java, f"-Xmx{self.settings.kafka_heap}", "-Xms128m", "-XX:+UseG1GC"]
        argv += ["-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]
        argv += ["-Dorg.slf4j.simpleLogger.defaultLogLevel=info"]
        argv += ["-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", f"{self.libs}/*"]
        return argv

    def prepare(self) -> None:
        """Write server.properties; format the storage directory the first time."""
        data = self.settings.data_dir(self.name)
        data.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_server_properties(self.settings, self.log_dirs))
        if (self.log_dirs / "meta.properties").exists():
            return
        argv = [*self._jvm(), "kafka.tools.StorageTool", "format", "--config", str(self.config_path)]
        argv += ["--cluster-id", new_cluster_id(), "--ignore-formatted"]
        self.run_logged(argv, "kafka storage format")

    def launch(self) -> Launch:
        return Launch(argv=[*self._jvm(), "kafka.Kafka", str(self.config_path)], env={})

    def probe(self) -> None:
        """A metadata request through librdkafka, as every client makes."""
        from confluent_kafka.admin import AdminClient

        if not port_open(self.settings.host, self.settings.kafka_port):
            raise StackError(self.name, f"nothing listens on {self.endpoint}")
        admin = AdminClient({"bootstrap.servers": self.endpoint, "socket.timeout.ms": 2000, "log_level": 0})
        md = admin.list_topics(timeout=2)
        if not md.brokers:
            raise StackError(self.name, "metadata response lists no broker")


def properties_to_docker_env(properties: str, drop: tuple[str, ...] = ("log.dirs",)) -> dict[str, str]:
    """server.properties as the apache/kafka image's ``KAFKA_*`` variables (``KAFKA_A_B`` is
    ``a.b``; ``__`` a literal underscore, ``___`` a dash), for the Testcontainers backend."""
    pairs = [line.strip().split("=", 1) for line in properties.splitlines() if "=" in line]
    return {
        "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper(): value
        for key, value in pairs
        if not key.startswith("#") and key not in drop
    }
