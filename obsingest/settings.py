"""Typed settings, one group per concern, read at startup (``load()``), never at import time:
defaults that work locally, each overridden by ``OBSINGEST_<GROUP>_<NAME>``."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from obsingest import defaults


class RegistrySettings(BaseSettings):
    """Dataset registry connection. SQLite file by default; any PostgreSQL URL works."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_REGISTRY_", extra="ignore")

    url: str = defaults.REGISTRY_URL
    #: One pool per process, bounded, so thousands of invocations cannot exhaust max_connections.
    pool_size: int = Field(default=4, ge=1)
    max_overflow: int = Field(default=0, ge=0)
    pool_timeout: float = Field(default=5.0, gt=0)
    #: Transient OperationalError retries (killed connections, failover, locked SQLite).
    retry_attempts: int = Field(default=5, ge=1)
    retry_base_delay: float = Field(default=0.05, gt=0)
    #: Give up retrying after this long (seconds): past it, redelivery is the better retry.
    retry_deadline: float = Field(default=10.0, gt=0)
    run: str = defaults.RUN_TEMPLATE
    dataset_type: str = defaults.RAW_DATASET_TYPE


class HeaderSettings(BaseSettings):
    """``OBSINGEST_HEADER_CORRECTIONS``: ``fix_header`` correction directories, joined with
    ``os.pathsep``; point it at obs_lsst's ``corrections/`` to get Rubin's."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_HEADER_", extra="ignore")

    corrections: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("corrections", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part for part in value.split(os.pathsep) if part.strip()]
        return value


class StoreLayout(BaseSettings):
    """Where objects go in a store: shared by every unit that writes raw CCDs."""

    prefix: str = defaults.RAW_PREFIX
    quarantine_prefix: str = defaults.QUARANTINE_PREFIX


class StoreSettings(StoreLayout):
    """Object store. ``file://DIR`` (local directory, embedded default) or ``gs://BUCKET``."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_STORE_", extra="ignore")

    url: str = defaults.STORE_URL


class KafkaClientSettings(BaseSettings):
    """What every Kafka client's settings share: the brokers (``<PREFIX>BOOTSTRAP_SERVERS``,
    else ``KAFKA_BOOTSTRAP_SERVERS``) and extra librdkafka properties."""

    bootstrap_servers: str = defaults.KAFKA_BOOTSTRAP
    #: Extra librdkafka properties, e.g. ``{"security.protocol": "SASL_SSL"}`` (JSON in env).
    extra: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _conventional_bootstrap(cls, data: Any) -> Any:
        conventional = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if isinstance(data, dict) and "bootstrap_servers" not in data and conventional:
            return {**data, "bootstrap_servers": conventional}
        return data


class BusSettings(BaseSettings):
    """Topic names shared by producers, functions and jobs."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_BUS_", extra="ignore", populate_by_name=True)

    #: Where ArrivalEvents go: "memory" (in-process), "pubsub", "kafka", or "pubsub,kafka".
    backend: str = "memory"
    pubsub_project: str = defaults.LOCAL_PROJECT
    #: The conventional KAFKA_BOOTSTRAP_SERVERS (what `obsingest stack env` exports) is honoured,
    #: so the arrivals publisher talks to the same broker as everything else.
    kafka_bootstrap_servers: str = Field(
        default=defaults.KAFKA_BOOTSTRAP,
        validation_alias=AliasChoices("OBSINGEST_BUS_KAFKA_BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS"),
    )

    exposures_topic: str = defaults.EXPOSURES_TOPIC
    exposures_dlq_topic: str = defaults.EXPOSURES_DLQ_TOPIC
    chunks_topic: str = defaults.CHUNKS_TOPIC
    objects_topic: str = defaults.OBJECTS_TOPIC
    objects_dlq_topic: str = defaults.OBJECTS_DLQ_TOPIC
    arrivals_topic: str = defaults.ARRIVALS_TOPIC
    summaries_topic: str = defaults.SUMMARIES_TOPIC
    alerts_topic: str = defaults.ALERTS_TOPIC
    #: ``OBSINGEST_BUS_EXPOSURES_INGESTED_TOPIC``: one ExposureIngested per complete exposure
    exposures_ingested_topic: str = defaults.EXPOSURES_INGESTED_TOPIC

    @property
    def objects_dlq_hold(self) -> str:
        """The subscription that keeps the objects' dead letters."""
        return hold_subscription(self.objects_dlq_topic)

    @property
    def objects_parked_topic(self) -> str:
        """Where redrive parks dead letters it gave up on, for a human."""
        return self.objects_dlq_topic + defaults.PARKED_SUFFIX


def hold_subscription(topic: str) -> str:
    """The subscription that keeps ``topic``'s messages (a topic without one drops them)."""
    return topic + defaults.HOLD_SUFFIX


class PipelineSettings(BaseSettings):
    """What the pipeline promises: the per-CCD budget from readout to announcement."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_", extra="ignore")

    budget_seconds: float = Field(default=defaults.BUDGET_SECONDS, gt=0)


def run_name(template: str, instrument: str) -> str:
    """The run collection a raw CCD is ingested into, e.g. ``LSSTCam/raw/all``."""
    return template.format(instrument=instrument)


class FunctionSettings(BaseSettings):
    """The register function's HTTP (push) endpoint security."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_FUNCTION_", extra="ignore")

    #: Verify the Google-signed OIDC token on push requests (on in production).
    push_auth: bool = False
    #: Expected ``aud`` claim: the function's URL.
    push_audience: str = ""
    #: Service account the push subscription signs as; empty accepts any verified Google identity.
    push_service_account: str = ""
    #: Largest request body accepted. A GCS notification is a few KiB (custom metadata is capped
    #: at 8 KiB by GCS); 1 MiB leaves room and bounds memory per request (larger: 413).
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)
    #: ``Retry-After`` on 503 replies (seconds).
    retry_after_seconds: int = Field(default=10, ge=0)

    @model_validator(mode="after")
    def _audience_required(self) -> FunctionSettings:
        """A token is only proof for this function if its audience is checked."""
        if self.push_auth and not self.push_audience:
            raise ValueError("OBSINGEST_FUNCTION_PUSH_AUTH needs OBSINGEST_FUNCTION_PUSH_AUDIENCE")
        return self
