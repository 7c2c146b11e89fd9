"""Every error class crosses a process boundary intact: type, message, reason, attributes.

Worker pools pickle what a worker raised; an error that cannot be rebuilt on the other side
breaks the pool (``RetriesExhausted.__init__() missing 3 required positional arguments``).
"""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import socket
from datetime import UTC, datetime

import pytest

from obsingest.errors import ObsIngestError, RetriableError
from obsingest.retry import RetriesExhausted
from obsingest.store.base import ObjectConflict, StoredObject
from producers.edge.ccd import Outcome, SendFailed

pytestmark = pytest.mark.unit

PACKAGES = ("obsingest", "producers", "functions")
#: modules whose import needs more than the unit tests have (none today); never silently skipped
SKIP_MODULES: frozenset[str] = frozenset()


def _import_all() -> None:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name in SKIP_MODULES or info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def _all_error_classes() -> list[type[ObsIngestError]]:
    _import_all()
    seen: list[type[ObsIngestError]] = []
    todo = [ObsIngestError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(set(seen), key=lambda c: f"{c.__module__}.{c.__qualname__}")


_OBJ = StoredObject("b", "raw/x", 1, "AAAAAA==", "", 1, datetime(2026, 1, 1, tzinfo=UTC))

#: instances of classes whose constructor takes more than a message
SPECIAL: dict[str, ObsIngestError] = {
    "obsingest.retry.RetriesExhausted": RetriesExhausted(
        "put: gave up", "connection", 4, ConnectionResetError("reset by peer")
    ),
    "obsingest.store.base.ObjectConflict": ObjectConflict("different bytes", _OBJ, "BBBBBB=="),
    "producers.edge.ccd.SendFailed": SendFailed(
        RetriesExhausted("put: gave up", "timeout", 6, TimeoutError("read timed out")),
        Outcome(key="LSSTCam/2026112200001/000", state="retry", spooled="/spool/ccd/x.fits.fz"),
    ),
}


def _instance(cls: type[ObsIngestError]) -> ObsIngestError:
    name = f"{cls.__module__}.{cls.__qualname__}"
    if name in SPECIAL:
        return SPECIAL[name]
    try:
        return cls(f"{cls.__name__} happened")
    except TypeError:
        pass
    # constructors of the (service, message) / (reason, message) shape
    return cls("first", "second")  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__qualname__)
def test_every_error_class_round_trips_through_pickle(cls: type[ObsIngestError]) -> None:
    error = _instance(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert copy.args == error.args
    assert str(copy) == str(error)
    assert copy.reason == error.reason
    assert copy.retriable == error.retriable
    for key, value in vars(error).items():
        if isinstance(value, BaseException):
            assert type(vars(copy)[key]) is type(value) and str(vars(copy)[key]) == str(value)
        else:
            assert vars(copy)[key] == value


def test_the_classes_found_include_those_of_every_unit() -> None:
    names = {c.__qualname__ for c in _all_error_classes()}
    assert {"RetriesExhausted", "ObjectConflict", "ChunkDeliveryFailed", "CorruptFile"} <= names


def test_retries_exhausted_keeps_its_fields_and_last_error() -> None:
    error = SPECIAL["obsingest.retry.RetriesExhausted"]
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, RetriableError) and isinstance(copy, RetriesExhausted)
    assert (copy.kind, copy.attempts) == ("connection", 4)
    assert isinstance(copy.last, ConnectionResetError)


def test_an_unpicklable_attribute_is_replaced_by_a_stand_in_not_an_error() -> None:
    with socket.socket() as sock:
        error = RetriesExhausted("gave up", "connection", 1, ConnectionResetError("x"))
        error.sock = sock  # type: ignore[attr-defined]
        copy = pickle.loads(pickle.dumps(error))
    assert "socket" in copy.sock
    assert copy.attempts == 1


class _TwoArgumentError(Exception):
    """A library error whose ``__init__`` takes more than its message: it pickles, then fails to
    unpickle in the receiving process."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def test_an_attribute_that_does_not_unpickle_is_replaced_and_the_error_keeps_its_kind() -> None:
    """An edge worker's transient failure must reach the service as retriable, not as a crash."""
    error = RetriesExhausted("gave up", "connection", 2, ConnectionResetError("x"))
    error.cause = _TwoArgumentError("reset by peer", 104)  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(error))
    assert copy.retriable and copy.attempts == 2
    assert isinstance(copy.cause, RuntimeError) and "reset by peer" in str(copy.cause)
