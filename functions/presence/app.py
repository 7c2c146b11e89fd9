"""The presence API as an ASGI app: routes, error replies, request metrics. The OpenAPI that
Schemathesis fuzzes comes from the declarations that validate requests; every error is JSON
``{"error", "message"}``, none a 500. The heavy night listing is a plain ``def`` (thread pool).
"""

# No ``from __future__ import annotations``: FastAPI reads the annotations at run time.
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from functions.presence.models import ApiError, Health, InvalidRequest, Night, NightExposure, ValidationIssue
from functions.presence.settings import PresenceSettings
from obsingest import camera
from obsingest.errors import RetriableError
from obsingest.logs import get_logger, log_event
from obsingest.metrics import Metrics, private_metrics
from obsingest.registry.completeness import CcdPresence, ExposurePresence
from obsingest.registry.presence import PresenceReader, QueryRefused

log = get_logger("obsingest.presence")

INT64_MAX = 2**63 - 1
#: largest detector id of any instrument (the instrument's own range is checked per request)
MAX_DETECTOR = max(max(i.detector_ids) for i in camera.INSTRUMENTS.values())
RETRY_AFTER_SECONDS = 5

Instrument = enum.Enum(  # type: ignore[misc]
    "Instrument", {name: name for name in camera.INSTRUMENTS}, type=str
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": InvalidRequest, "description": "a parameter out of its type or range"},
    503: {"model": ApiError, "description": "the registry cannot answer now: retry later"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ApiError,
        "description": "nothing by that id: an unknown detector, dataset or exposure, or an id "
        "no exposure or night can have (its day_obs is not a date)",
    }
}

ExposureId = Annotated[int, Path(ge=1, le=INT64_MAX, description="day_obs * 100000 + sequence number")]


#: route template -> the catalogue's ``route`` label (never the ids in the path)
ROUTES = {
    "/v1/ccds/{instrument}/{exposure}/{detector}": "ccd",
    "/v1/datasets/{dataset_id}": "dataset",
    "/v1/exposures/{instrument}/{exposure}": "exposure",
    "/v1/nights/{instrument}/{day_obs}": "night",
    "/healthz": "health",
    "/metrics": "health",
    "/openapi.json": "openapi",
    "/docs": "openapi",
}


def create_app(
    reader: PresenceReader, settings: PresenceSettings | None = None, metrics: Metrics | None = None
) -> FastAPI:
    """The API on ``reader``; ``metrics`` counts requests (default: the app's own registry)."""
    from prometheus_client import generate_latest

    settings = settings or PresenceSettings()
    stats = metrics or private_metrics()
    stats.start("presence")
    app = FastAPI(
        title="obsingest presence API",
        version="1",
        description="Is a CCD registered, how complete and how late is an exposure, what did a "
        "night bring: read-only, from the dataset registry. Latency is readout -> registered; "
        f"the budget is {reader.budget_seconds:g} s per CCD.",
        # metrics are Prometheus: OpenTelemetry hooks would cost a check per request for nothing
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.reader, app.state.stats, app.state.settings = reader, stats, settings
    _install_errors(app)
    ask = _asker(reader)
    app.add_middleware(_observe, stats=stats)

    @app.get(
        "/v1/ccds/{instrument}/{exposure}/{detector}",
        response_model=CcdPresence,
        responses={**_NOT_FOUND, **_ERRORS},
        summary="Is this CCD registered? (by data id)",
    )
    async def ccd_by_data_id(
        instrument: Instrument, exposure: ExposureId, detector: Annotated[int, Path(ge=0, le=MAX_DETECTOR)]
    ) -> Response:
        return _dumped(_CCD, await ask(reader.ccd, instrument.value, exposure, detector))

    @app.get(
        "/v1/datasets/{dataset_id}",
        response_model=CcdPresence,
        responses={**_NOT_FOUND, **_ERRORS},
        summary="Is this CCD registered? (by dataset id)",
    )
    async def ccd_by_dataset_id(dataset_id: uuid.UUID) -> Response:
        found = await ask(reader.dataset, dataset_id)
        if found is None:
            raise QueryRefused("unknown-dataset", f"no dataset with id {dataset_id}", 404)
        return _dumped(_CCD, found)

    @app.get(
        "/v1/exposures/{instrument}/{exposure}",
        response_model=ExposurePresence,
        responses={**_NOT_FOUND, **_ERRORS},
        summary="An exposure: expected, registered, missing, latencies, status",
    )
    async def exposure(instrument: Instrument, exposure: ExposureId) -> Response:
        found = await ask(reader.exposure, instrument.value, exposure)
        if found is None:
            raise QueryRefused(
                "unknown-exposure",
                f"the registry has no manifest and no dataset of {instrument.value} exposure {exposure}",
                404,
            )
        return _dumped(_EXPOSURE, found)

    @app.get(
        "/v1/nights/{instrument}/{day_obs}",
        response_model=Night,
        responses={**_NOT_FOUND, **_ERRORS},
        summary="A night's exposures with their counts, paginated",
    )
    def night(
        instrument: Instrument,
        day_obs: Annotated[int, Path(ge=19900101, le=22001231, description="YYYYMMDD")],
        limit: Annotated[int | None, Query(ge=1, le=settings.max_page_size)] = None,
        after: Annotated[
            int | None, Query(ge=0, le=INT64_MAX, description="next_after of the page before")
        ] = None,
    ) -> Response:
        size = limit or settings.page_size
        page = reader.night(instrument.value, day_obs, size, after)
        return _dumped(
            _NIGHT,
            Night(
                instrument=page.instrument,
                day_obs=page.day_obs,
                limit=size,
                exposures=[NightExposure.model_validate(e) for e in page.exposures],
                next_after=page.next_after,
            ),
        )

    @app.get("/healthz", response_model=Health, responses=_ERRORS, summary="Can it answer?")
    def healthz() -> Health:
        reader.ping()
        return Health(status="ok", registry=reader.engine.url.render_as_string(hide_password=True))

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        summary="Prometheus metrics",
        operation_id="metrics_metrics_get",  # the id the handler's former name gave
    )
    def prometheus_metrics() -> Response:
        return Response(
            generate_latest(stats.registry), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return app


def _asker(reader: PresenceReader) -> Callable[..., Awaitable[Any]]:
    """How a handler calls the reader: SQLite directly (a thread hop costs more than the query),
    PostgreSQL on the thread pool so concurrent round trips overlap."""
    if reader.engine.dialect.name != "sqlite":
        return run_in_threadpool

    async def direct(fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    return direct


_CCD, _EXPOSURE, _NIGHT = TypeAdapter(CcdPresence), TypeAdapter(ExposurePresence), TypeAdapter(Night)


def _dumped(adapter: TypeAdapter[Any], found: Any) -> Response:
    """``found`` as JSON, serialised once by pydantic (FastAPI would validate it again first)."""
    return Response(adapter.dump_json(found), media_type="application/json")


def _install_errors(app: FastAPI) -> None:
    def error(status: int, reason: str, message: str, headers: Any = None, **extra: Any) -> JSONResponse:
        return JSONResponse({"error": reason, "message": message, **extra}, status, headers)

    @app.exception_handler(QueryRefused)
    async def refused(_: Request, exc: QueryRefused) -> JSONResponse:
        return error(exc.status, exc.reason, str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        issues = [ValidationIssue.model_validate(e).model_dump() for e in exc.errors()]
        message = "; ".join(f"{' '.join(str(p) for p in i['loc'])}: {i['msg']}" for i in issues)
        return error(422, "invalid-request", message or "invalid request", detail=issues)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        reason = {404: "no-such-route", 405: "method-not-allowed"}.get(exc.status_code, "http")
        return error(exc.status_code, reason, str(exc.detail), headers=exc.headers)

    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        log_event(log, "presence.unavailable", logging.WARNING, error=f"{type(exc).__name__}")
        return error(
            503,
            "registry-unavailable",
            f"the registry cannot answer now ({type(exc).__name__}); retry later",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    for kind in (RetriableError, OperationalError, DBAPIError, PoolTimeout):
        app.add_exception_handler(kind, unavailable)  # type: ignore[arg-type]

    @app.exception_handler(Exception)
    async def bug(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error serving a presence request", exc_info=exc)
        return error(500, "internal-error", f"internal error: {type(exc).__name__}")


def _observe(app: Any, stats: Metrics) -> Any:
    """Pure ASGI middleware: every request's route template, status and duration, counted."""

    async def observed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            stats.presence_request(ROUTES.get(route, "other"), status[0], time.perf_counter() - started)

    return observed
