"""A daf_butler repository as the registry (``butler:<repo>``): its URL, settings, formatter and
creation, apart from ``butler`` so that configuring or creating one loads no registry code."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from obsingest import defaults
from obsingest.logs import get_logger, log_event

URL_PREFIX = "butler:"
#: obsingest's stand-in for the science pipelines' raw formatter (see butler_formatter)
FALLBACK_FORMATTER = "obsingest.registry.butler_formatter.RawFitsFormatter"
#: the storage class a repository without the science pipelines gives raws (``make_repo``)
RAW_FITS_STORAGE_CLASS = "ObsingestRawFits"
RAW_DIMENSIONS = ("instrument", "exposure", "detector")

log = get_logger("obsingest.registry.butler_setup")


class ButlerSettings(BaseSettings):
    """The Butler backend's own settings (``OBSINGEST_BUTLER_*``); the repository, run and
    dataset type come from ``RegistrySettings`` (``OBSINGEST_REGISTRY_URL=butler:<repo>``)."""

    model_config = SettingsConfigDict(env_prefix="OBSINGEST_BUTLER_", extra="ignore")

    #: obsingest's companion tables; default ``sqlite:///<repo>/obsingest.sqlite3``
    companion_url: str = ""
    #: formatter recorded with each raw; default obs_lsst's raw formatter of the instrument when
    #: ``lsst.obs.lsst`` is importable, else obsingest's RawFitsFormatter
    formatter: str = ""
    #: storage class of the raw dataset type when this backend has to register it
    storage_class: str = "Exposure"
    #: seconds a batch waits for more CCDs before ingesting (0: group commit only)
    linger: float = Field(default=0.0, ge=0)
    #: at most this many seconds a batch waits for the registrations still being prepared
    #: (``ButlerRegistry.arriving``): a whole exposure arriving at once is one ingest
    gather: float = Field(default=defaults.BUTLER_GATHER_SECONDS, ge=0)
    #: arrivals less than this many seconds apart are a burst a batch waits for (group_commit)
    gather_gap: float = Field(default=defaults.BUTLER_GATHER_GAP_SECONDS, ge=0)
    max_batch: int = Field(default=256, ge=1)
    #: stat every file at ingest to record its size (one request per file on object stores)
    record_validation_info: bool = False


def is_butler_url(url: str) -> bool:
    return url.startswith(URL_PREFIX)


def repo_of(url: str) -> str:
    """``butler:///abs/repo`` -> ``/abs/repo``; ``butler:rel`` -> ``rel``; ``butler:s3://b/r``."""
    rest = url[len(URL_PREFIX) :]
    return rest[2:] if rest.startswith("///") else rest


def default_companion_url(repo: str) -> str:
    if "://" in repo and not repo.startswith("file://"):
        raise ValueError(
            f"Butler repository {repo!r} is not a local directory: set "
            "OBSINGEST_BUTLER_COMPANION_URL to a database for obsingest's own tables"
        )
    root = Path(repo.removeprefix("file://"))
    root = root.parent if root.suffix in (".yaml", ".json") else root
    return f"sqlite:///{root.resolve() / 'obsingest.sqlite3'}"


@cache
def raw_formatter(instrument: str, configured: str = "") -> str:
    """The formatter class recorded for a raw of ``instrument`` (see ButlerSettings.formatter)."""
    if configured:
        return configured
    from obsingest import camera

    try:
        import lsst.obs.lsst  # noqa: F401  (the science pipelines, when installed)
    except ImportError:
        return FALLBACK_FORMATTER
    return camera.instrument(instrument).raw_formatter


def make_repo(root: str | Path, registry_db: str | None = None) -> str:
    """Create a Butler repository that reads obsingest's raws without the science pipelines (the
    ``raw`` dataset type's storage class ObsingestRawFits: an astropy HDUList); ``registry_db``:
    a SQLAlchemy URL (PostgreSQL needs ``btree_gist``), default SQLite. Returns ``butler:<root>``."""
    from lsst.daf.butler import Butler, Config

    config = Config(
        {
            "storageClasses": {RAW_FITS_STORAGE_CLASS: {"pytype": "astropy.io.fits.HDUList"}},
            "datastore": {"formatters": {RAW_FITS_STORAGE_CLASS: FALLBACK_FORMATTER}},
        }
    )
    if registry_db:
        config["registry", "db"] = registry_db
    root = Path(root).resolve()
    Butler.makeRepo(str(root), config=config)
    butler = Butler.from_config(str(root), writeable=True)
    try:
        ensure_dataset_type(butler, "raw", RAW_FITS_STORAGE_CLASS)
    finally:
        butler.close()
    return f"{URL_PREFIX}//{root}"


def ensure_dataset_type(butler: Any, name: str, storage_class: str) -> Any:
    """The dataset type ``name``, registered with ``storage_class`` if the repository lacks it."""
    from lsst.daf.butler import DatasetType
    from lsst.daf.butler.registry import MissingDatasetTypeError

    try:
        return butler.get_dataset_type(name)
    except MissingDatasetTypeError:
        pass
    butler.registry.registerDatasetType(
        DatasetType(name, RAW_DIMENSIONS, storage_class, universe=butler.dimensions)
    )
    log_event(log, "butler.dataset_type_registered", dataset_type=name, sc=storage_class)
    return butler.get_dataset_type(name)
