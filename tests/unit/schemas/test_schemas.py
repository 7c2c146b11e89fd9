import copy
import io
import json
import uuid
from datetime import UTC, datetime

import fastavro
import pytest
from fastavro.schema import fingerprint

import schemas
from obsingest import avro
from obsingest.errors import BadMessage
from obsingest.messages import ArrivalEvent, CcdChunk, ExposureIngested, ExposureManifest, ExposureSummary
from schemas.compat import check_full_compatibility

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 22, 3, 4, 5, 123456, tzinfo=UTC)


def test_all_contracts_load_and_validate():
    labels = {sv.label for sv in schemas.validate_all()}
    assert {f"{name}.v1" for name in schemas.CONTRACTS} <= labels


def test_timestamps_are_micros_and_ids_are_uuid():
    arrival = schemas.latest("ArrivalEvent").raw
    types = {f["name"]: f["type"] for f in arrival["fields"]}
    assert types["readout_time"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert types["dataset_id"] == {"type": "string", "logicalType": "uuid"}


def test_fingerprint_matches_fastavro_and_spec_vector():
    # Avro spec test vector: CRC-64-AVRO of the schema "int" is 0x7275d51a3f395c8f.
    assert schemas.crc64_avro(b'"int"') == 0x7275D51A3F395C8F
    for name in schemas.CONTRACTS:
        sv = schemas.latest(name)
        assert sv.fingerprint.hex() == fingerprint(sv.canonical, "CRC-64-AVRO")


def _examples():
    did = uuid.UUID("12345678-1234-5678-1234-567812345678")
    return [
        ExposureManifest("LSSTCam", 2026112200001, 20261122, [0, 1, 2], NOW, 30.0, "r", NOW),
        CcdChunk(
            "LSSTCam",
            2026112200001,
            5,
            20261122,
            0,
            3,
            100,
            "crc32c:00000001",
            "crc32c:00000002",
            NOW,
            b"\x00\x01payload",
            NOW,
            "edge-1",
        ),
        ArrivalEvent(
            did,
            "raw",
            "LSSTCam/raw/all",
            "LSSTCam",
            2026112200001,
            5,
            20261122,
            "gs://b/o",
            100,
            "crc32c:00000001",
            "kafka",
            NOW,
            NOW,
            NOW,
            NOW,
            None,
        ),
        ExposureSummary(
            "LSSTCam",
            2026112200001,
            2,
            5.0,
            "INCOMPLETE",
            NOW,
            20261122,
            3,
            2 / 3,
            1.0,
            1.5,
            1.6,
            [],
            [2],
            NOW,
            NOW,
            0,
            "deadline",
        ),
        ExposureIngested(
            did,
            "LSSTCam",
            2026112200001,
            20261122,
            "raw",
            "LSSTCam/raw/all",
            3,
            3,
            [0, 1, 2],
            [],
            [2],
            NOW,
            5.0,
            "over_budget",
            True,
            NOW,
            NOW,
            1.0,
            1.5,
            6.2,
        ),
    ]


def test_exposure_ingested_ids_and_times_follow_the_conventions():
    types = {f["name"]: f["type"] for f in schemas.latest("ExposureIngested").raw["fields"]}
    assert types["event_id"] == {"type": "string", "logicalType": "uuid"}
    for name in ("last_registered", "published_time"):
        assert types[name] == {"type": "long", "logicalType": "timestamp-micros"}
    assert types["first_readout"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]


@pytest.mark.parametrize("message", _examples(), ids=lambda m: type(m).__name__)
def test_single_object_round_trip(message):
    data = message.encode()
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == schemas.latest(message.SCHEMA).fingerprint
    assert type(message).decode(data) == message


def test_plain_fastavro_decodes_single_object_messages():
    """Interop: a consumer with only the .avsc file and fastavro reads our messages."""
    message = _examples()[1]
    data = message.encode()
    raw = json.loads(schemas.latest("CcdChunk").path.read_text())
    record = fastavro.schemaless_reader(io.BytesIO(data[10:]), fastavro.parse_schema(raw))
    assert record["payload"] == message.payload and record["chunk_index"] == 0


def test_decode_rejects_garbage_and_unknown_fingerprints():
    with pytest.raises(BadMessage, match="magic"):
        avro.decode(b"hello world")
    with pytest.raises(BadMessage, match="unknown schema fingerprint"):
        avro.decode(b"\xc3\x01" + bytes(8) + b"xx")
    good = _examples()[0].encode()
    with pytest.raises(BadMessage, match="expected a ArrivalEvent"):
        ArrivalEvent.decode(good)
    with pytest.raises(BadMessage, match="undecodable"):
        avro.decode(good[:14])


def test_encode_rejects_records_that_do_not_match():
    with pytest.raises(BadMessage, match=r"ExposureManifest\.v1"):
        avro.encode("ExposureManifest", {"instrument": "LSSTCam"})


def test_container_round_trip(tmp_path):
    records = [m.to_record() for m in _examples()[:1]]
    avro.write_container(tmp_path / "m.avro", "ExposureManifest", records)
    assert list(avro.read_container(tmp_path / "m.avro", "ExposureManifest")) == records


# compatibility ---------------------------------------------------------------------------------

BASE = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
}


def _with(fields):
    schema = copy.deepcopy(BASE)
    schema["fields"] = fields
    return schema


def test_adding_an_optional_field_with_default_is_compatible():
    new = _with([*BASE["fields"], {"name": "c", "type": ["null", "long"], "default": None}])
    assert check_full_compatibility(BASE, new) == []


def test_adding_a_field_without_default_breaks_new_readers():
    new = _with([*BASE["fields"], {"name": "c", "type": "long"}])
    problems = check_full_compatibility(BASE, new)
    assert problems == ["new reader: R.c: the writer has no field 'c' and the reader's field has no default"]


def test_removing_a_field_without_default_breaks_old_readers():
    new = _with([BASE["fields"][0]])
    problems = check_full_compatibility(BASE, new)
    assert problems == ["old reader: R.b: the writer has no field 'b' and the reader's field has no default"]


def test_type_change_breaks_and_promotion_is_one_way():
    changed = _with([{"name": "a", "type": "string"}, BASE["fields"][1]])
    assert check_full_compatibility(BASE, changed)
    promoted = _with([{"name": "a", "type": "long"}, BASE["fields"][1]])
    problems = check_full_compatibility(BASE, promoted)
    assert problems == ["old reader: R.a: a long cannot be read as an int"]


def test_validate_all_fails_on_an_incompatible_new_version(tmp_path):
    v1 = schemas.latest("ExposureManifest").raw
    v2 = copy.deepcopy(v1)
    v2["fields"].append({"name": "mandatory", "type": "string"})
    (tmp_path / "ExposureManifest.v1.avsc").write_text(json.dumps(v1))
    (tmp_path / "ExposureManifest.v2.avsc").write_text(json.dumps(v2))
    with pytest.raises(schemas.SchemaError, match=r"ExposureManifest\.v2 is not compatible"):
        schemas.validate_all(tmp_path)


def test_validate_all_rejects_version_gaps_and_bad_names(tmp_path):
    v1 = schemas.latest("ExposureManifest").raw
    (tmp_path / "ExposureManifest.v1.avsc").write_text(json.dumps(v1))
    (tmp_path / "ExposureManifest.v3.avsc").write_text(json.dumps(v1))
    with pytest.raises(schemas.SchemaError, match="without gaps"):
        schemas.validate_all(tmp_path)
