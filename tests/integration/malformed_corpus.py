"""The malformed-notification corpus: every kind of bad request the register function must
answer 2xx or 4xx, with what must come of each (tests/integration/test_register_malformed.py).

Kinds: not a push envelope at all; envelopes whose message is not a GCS notification (bad
base64, non-JSON, wrong types, missing fields, deep nesting); object resources with one field of
the wrong type or an impossible value; well-formed notifications the pipeline refuses (foreign
bucket, names outside the prefix, NUL bytes, path traversal, unknown instruments, over-long
reasons, missing objects, checksum and metadata mismatches); other GCS event types; CloudEvents
that are not CloudEvents or carry no notification; bodies over the size limit, declared or
streamed. The good CCD is sent among them, twice.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from obsingest.dataid import DataId
from obsingest.store.base import StoredObject
from obsingest.store.notifications import (
    PUBSUB_PUBLISHED,
    STORAGE_FINALIZED,
    object_resource,
    storage_cloudevent,
)

GOOD = DataId("LSSTComCam", 2026112200001, 3)
MISSING = DataId("LSSTComCam", 2026112200001, 4)
MB = 1024 * 1024
DEEP = 100_000
CE_JSON = {"Content-Type": "application/cloudevents+json"}


@dataclass(frozen=True)
class Case:
    """One request and what must come of it: ``4xx:<status>``, ``q:<reason>`` (2xx and a
    quarantine record with that reason), ``ignored``, ``registered`` or ``duplicate``."""

    name: str
    endpoint: str  # "push" | "ce"
    expect: str
    body: Any = b""  # bytes, or a callable giving a streamed body
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    method: str = "POST"


def b64json(value: Any) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def push(name: str, expect: str, resource: Any = None, **message: Any) -> Case:
    """A push delivery whose message id is the case name (so its record is its own)."""
    body = {
        "messageId": name,
        "attributes": {"eventType": "OBJECT_FINALIZE"},
        "data": b64json(resource),
        **message,
    }
    body = {k: v for k, v in body.items() if v is not ...}
    return Case(name, "push", expect, json.dumps({"message": body, "subscription": "s"}).encode())


def ce(name: str, expect: str, event: Any, headers: dict[str, str] | None = None) -> Case:
    raw = event if isinstance(event, bytes) else json.dumps(event).encode()
    return Case(name, "ce", expect, raw, headers or CE_JSON)


def structured(name: str, expect: str, event_type: str, data: Any) -> Case:
    event = {"specversion": "1.0", "id": name, "source": "//test", "type": event_type}
    return ce(name, expect, {**event, "data": data})


def corpus(good: StoredObject) -> list[Case]:
    res = object_resource(good)
    cases = [
        # -- push: not a push delivery at all -> 4xx, nothing recorded
        Case("n-empty", "push", "4xx:400", b""),
        Case("n-not-json", "push", "4xx:400", b"not json"),
        Case("n-array", "push", "4xx:400", b"[1, 2]"),
        Case("n-string", "push", "4xx:400", b'"message"'),
        Case("n-number", "push", "4xx:400", b"42"),
        Case("n-null", "push", "4xx:400", b"null"),
        Case("n-nan", "push", "4xx:400", b"NaN"),
        Case("n-no-message", "push", "4xx:400", b"{}"),
        Case("n-message-string", "push", "4xx:400", b'{"message": "x"}'),
        Case("n-message-array", "push", "4xx:400", b'{"message": [1]}'),
        Case("n-message-null", "push", "4xx:400", b'{"message": null}'),
        Case("n-bad-utf8", "push", "4xx:400", b'{"message": "\xff\xfe"}'),
        Case("n-unterminated", "push", "4xx:400", b'{"message": "abc'),
        Case("n-deep-arrays", "push", "4xx:400", b"[" * DEEP + b"]" * DEEP),
        Case("n-deep-objects", "push", "4xx:400", b'{"a":' * DEEP + b"1" + b"}" * DEEP),
        Case("n-deep-33", "push", "4xx:400", b'{"message":' * 33 + b"1" + b"}" * 33),
        Case("n-text-plain", "push", "4xx:400", push("x", "").body, {"Content-Type": "text/plain"}),
        Case("n-get", "push", "4xx:405", method="GET"),
        Case("n-put", "push", "4xx:405", b"{}", method="PUT"),
        Case("n-2mib", "push", "4xx:413", b"{" + b" " * (2 * MB) + b"}"),
        Case("n-2mib-chunked", "push", "4xx:413", lambda: chunks(2 * MB)),
        # -- push: a delivery, but not a GCS notification -> quarantined bad-message
        push("p-data-not-base64", "q:bad-message", data="!!"),
        push("p-data-not-json", "q:bad-message", data=base64.b64encode(b"not json").decode()),
        push("p-data-array", "q:bad-message", [1, 2]),
        push("p-data-string-json", "q:bad-message", "just a string"),
        push("p-data-deep", "q:bad-message", data=base64.b64encode(b"[" * DEEP).decode()),
        push("p-data-number", "q:bad-message", data=12),
        push("p-data-list", "q:bad-message", data=["a"]),
        push("p-data-absent", "q:bad-message", data=...),
        push("p-data-non-ascii", "q:bad-message", data="é€"),
        push("p-attributes-list", "q:bad-message", res, attributes=[1]),
        push("p-attributes-string", "q:bad-message", res, attributes="eventType"),
        push("p-attributes-absent", "q:bad-message", res, attributes=...),
        push("p-event-type-number", "q:bad-message", res, attributes={"eventType": 7}),
        push("p-event-type-long", "q:bad-message", res, attributes={"eventType": "E" * 1000}),
        push("p-id-absent", "q:bad-message", data="!!", messageId=...),
        push("p-id-object", "q:bad-message", data="!?", messageId={"a": 1}),
        push("p-id-" + "i" * 10_000, "q:bad-message", data="!!"),
    ]
    # -- push: the object resource with one field wrong -> quarantined bad-message
    mutations: list[tuple[str, Any]] = [
        ("bucket", ...),
        ("bucket", 5),
        ("bucket", ""),
        ("bucket", "b" * 300),
        ("bucket", "a\x00b"),
        ("name", ...),
        ("name", 42),
        ("name", ["x"]),
        ("name", ""),
        ("name", "quarantine/" + "n" * 3000),
        ("name", "raw/a\nb.fits.fz"),
        ("name", "raw/\ud800"),
        ("size", ...),
        ("size", [1]),
        ("size", "-1"),
        ("size", "abc"),
        ("size", str(2**64)),
        ("size", True),
        ("size", 1.5),
        ("generation", {"a": 1}),
        ("generation", "-3"),
        ("timeCreated", ...),
        ("timeCreated", 1700000000),
        ("timeCreated", "yesterday"),
        ("timeCreated", "2026-13-45T00:00:00Z"),
        ("metadata", [1]),
        ("metadata", {"k": {"n": 1}}),
        ("metadata", "m"),
        ("metadata", {"k": 5}),
        ("crc32c", "AAAA"),
        ("crc32c", 12),
        ("crc32c", "!!!"),
        ("md5Hash", ["x"]),
        ("md5Hash", "m" * 100),
    ]
    for i, (key, value) in enumerate(mutations):
        mutated = {k: v for k, v in {**res, key: value}.items() if v is not ...}
        cases.append(push(f"r-{i:02d}-{key}", "q:bad-message", mutated))
    obj = {k: v for k, v in res.items() if k not in ("name", "metadata", "crc32c", "size")}
    crc, size = res["crc32c"], res["size"]

    def named(case: str, expect: str, name: str, **over: Any) -> Case:
        meta = {**res["metadata"], **over.pop("metadata", {})}
        resource = {**obj, "name": name, "crc32c": crc, "size": size, "metadata": meta, **over}
        return push(case, expect, resource)

    cases += [
        # -- push: a well-formed notification the pipeline refuses -> quarantined, its reason
        named("s-foreign-bucket", "q:foreign-bucket", good.name, bucket="someone-elses-bucket"),
        named("s-outside-prefix", "q:bad-object-name", "elsewhere/s2.txt"),
        named("s-nul-name", "q:bad-object-name", "raw/s3\x00.fits.fz"),
        named("s-detector", "q:bad-object-name", good.name.replace("_S10.fits", "_S99.fits")),
        named("s-instrument", "q:unknown-instrument", GOOD.object_name().replace("LSSTComCam", "Nonesuch")),
        named("s-traversal", "q:bad-object-name", "raw/../secrets/x.fits.fz"),
        # any name below the prefix is taken (the header says which CCD): this one is not there
        named("s-long-unicode", "q:object-missing", "raw/" + "é" * 510),
        named("s-nul-parked", "q:quarantined-by-producer", "quarantine/" + "\x00" * 1000),
        named(
            "s-long-reason",
            "q:" + "r" * 300,
            "quarantine/s9",
            metadata={"obsingest-quarantine-reason": "r" * 300},
        ),
        named(
            "s-nul-reason",
            "q:bad\x00reason",
            "quarantine/s10",
            metadata={"obsingest-quarantine-reason": "bad\x00reason"},
        ),
        named("s-missing-object", "q:object-missing", MISSING.object_name()),
        named("s-crc-mismatch", "q:checksum-mismatch", good.name, crc32c="AAAAAA=="),
        named("s-transport", "q:bad-metadata", good.name, metadata={"obsingest-transport": "t" * 100}),
        named(
            "s-producer-checksum",
            "q:checksum-mismatch",
            good.name,
            metadata={"obsingest-checksum": "crc32c:deadbeef"},
        ),
        named("s-size-mismatch", "q:checksum-mismatch", good.name, size="1", crc32c=""),
        push("s-delete", "ignored", res, attributes={"eventType": "OBJECT_DELETE"}),
        push("s-archive", "ignored", res, attributes={"eventType": "OBJECT_ARCHIVE"}),
        # -- the good CCD, in the middle of it all
        push("good", "registered", res),
        named("s-readout-garbage", "duplicate", good.name, metadata={"obsingest-readout-time": "not a time"}),
        # -- CloudEvents that are not CloudEvents -> 4xx
        ce("c-not-json", "4xx:400", b"{"),
        ce("c-array", "4xx:400", [1]),
        ce("c-empty-object", "4xx:400", {}),
        ce("c-no-id", "4xx:400", {"specversion": "1.0", "source": "s", "type": STORAGE_FINALIZED}),
        ce("c-specversion", "4xx:400", {"specversion": 7, "id": "x", "source": "s", "type": "t"}),
        ce(
            "c-binary-no-id",
            "4xx:400",
            b"{}",
            {
                "ce-specversion": "1.0",
                "ce-source": "s",
                "ce-type": STORAGE_FINALIZED,
                "Content-Type": "application/json",
            },
        ),
        ce("c-deep", "4xx:400", b'{"a":' * DEEP + b"1" + b"}" * DEEP),
        ce("c-binary-deep", "4xx:400", b"[" * DEEP, _binary("c-binary-deep")),
        ce("c-2mib", "4xx:413", b"[" + b" " * (2 * MB) + b"]"),
        Case("c-get", "ce", "4xx:405", method="GET"),
        # -- CloudEvents carrying no usable notification -> quarantined bad-message
        structured("c-type", "q:bad-message", "com.example.other", res),
        structured("c-pubsub-no-message", "q:bad-message", PUBSUB_PUBLISHED, {"x": 1}),
        structured(
            "c-pubsub-bad-data",
            "q:bad-message",
            PUBSUB_PUBLISHED,
            {"message": {"data": "!!", "attributes": {"eventType": "OBJECT_FINALIZE"}}},
        ),
        structured(
            "c-pubsub-deep",
            "q:bad-message",
            PUBSUB_PUBLISHED,
            {
                "message": {
                    "data": base64.b64encode(b"{" * DEEP).decode(),
                    "attributes": {"eventType": "OBJECT_FINALIZE"},
                }
            },
        ),
        structured("c-data-string", "q:bad-message", STORAGE_FINALIZED, "abc"),
        structured("c-data-null", "q:bad-message", STORAGE_FINALIZED, None),
        structured("c-data-array", "q:bad-message", STORAGE_FINALIZED, [1]),
        structured("c-size", "q:bad-message", STORAGE_FINALIZED, {**res, "size": [1]}),
        structured("c-long-name", "q:bad-message", STORAGE_FINALIZED, {**res, "name": "x" * 3000}),
        structured("c-time", "q:bad-message", STORAGE_FINALIZED, {**res, "timeCreated": 17}),
        ce("c-binary-not-json", "q:bad-message", b"not json", _binary("c-binary-not-json")),
        structured(
            "c-nul-name", "q:bad-object-name", STORAGE_FINALIZED, {**res, "name": "raw/c\x00.fits.fz"}
        ),
        structured("c-foreign", "q:foreign-bucket", STORAGE_FINALIZED, {**res, "bucket": "other-bucket"}),
        # -- the good CCD again, as a CloudEvent: a duplicate, nothing changes
        ce("c-good", "duplicate", storage_cloudevent(good)),
    ]
    return cases


def _binary(event_id: str) -> dict[str, str]:
    return {
        "ce-specversion": "1.0",
        "ce-id": event_id,
        "ce-source": "//test",
        "ce-type": STORAGE_FINALIZED,
        "Content-Type": "application/json",
    }


def chunks(size: int) -> Iterator[bytes]:
    """A body of unknown length: requests sends it chunked."""
    block = b" " * (64 * 1024)
    for _ in range(size // len(block)):
        yield block


class Blank:
    """A file-like body of ``size`` spaces with a length: requests sends Content-Length."""

    def __init__(self, size: int) -> None:
        self.left = size

    def __len__(self) -> int:
        return self.left

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return b" " * n
