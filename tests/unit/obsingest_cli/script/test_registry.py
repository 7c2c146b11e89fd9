import json
import tracemalloc
from datetime import UTC, datetime

import pytest

from obsingest.dataid import DataId
from obsingest.registry import FileRecord, QuarantineEntry, Registry, tables
from obsingest.settings import RegistrySettings
from obsingest_cli.script import registry as script

pytestmark = pytest.mark.unit
N = 3_000  # refused inputs in the memory test: three batches


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    reg = Registry.open(RegistrySettings(url=url))
    try:
        for detector in (4, 2):
            data_id = DataId("LSSTComCam", 2026112200001, detector)
            readout = datetime(2026, 11, 22, tzinfo=UTC)
            reg.register(FileRecord(data_id, f"file:///d{detector}", 100, "crc32c:1", readout_time=readout))
        reg.quarantine(QuarantineEntry("file:///bad", "corrupt-file", "line\none é", "crc32c:1", data_id, 5))
        reg.quarantine(QuarantineEntry("file:///worse", "header-mismatch", "other"))
    finally:
        reg.close()
    return url


@pytest.mark.parametrize("as_json", [True, False])
def test_a_listing_prints_what_it_printed_from_a_whole_list(url, as_json, capsys):
    """The listings are written row by row now; the text is the same as the whole list gave:
    ``json.dumps(rows, indent=2)``, or the head, one line per row and the count."""
    reg = Registry.open(RegistrySettings(url=url))
    try:
        datasets, quarantined = reg.datasets(), reg.quarantined()
    finally:
        reg.close()
    assert [d["detector"] for d in datasets] == [2, 4] and len(quarantined) == 2
    for rows, listing in (
        (datasets, lambda: script.list_datasets(url, None, None, as_json)),
        (quarantined, lambda: script.list_quarantine(url, as_json)),
        ([], lambda: script.list_datasets(url, "LATISS", None, as_json)),
    ):
        assert listing() == 0
        out = capsys.readouterr().out
        if as_json:
            assert out == json.dumps(rows, indent=2) + "\n"
        else:
            assert out.count("\n") > len(rows) and out.endswith(
                f"\n{len(rows)} {'quarantined' if rows is quarantined else 'datasets'}\n"
            )
            for row in rows:
                assert (row.get("uri") or row["object_uri"]) in out


def test_a_listing_holds_a_batch_not_the_history(tmp_path, capsys):
    """``registry list --json`` built every row and the whole JSON text before printing: 67 MiB
    at 20,000 datasets, 134 MiB at 40,000, growing with history. Now rows are read a batch at a
    time and written as they come: the listing's peak is a fraction of what the rows hold."""
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    reg = Registry.open(RegistrySettings(url=url))
    now = datetime(2026, 11, 22, tzinfo=UTC)
    row = {"reason": "corrupt-file", "message": "x" * 200, "first_seen": now, "last_seen": now}
    try:
        with reg.engine.begin() as conn:
            conn.execute(tables.quarantine.insert(), [row | {"object_uri": f"file:///{i}"} for i in range(N)])
        tracemalloc.start()
        rows = json.dumps(reg.quarantined(), indent=2)
        held = tracemalloc.get_traced_memory()[1]
        del rows
    finally:
        tracemalloc.stop()
        reg.close()
    tracemalloc.start()
    try:
        assert script.list_quarantine(url, True) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(json.loads(capsys.readouterr().out)) == N
    assert peak < held / 4, (peak, held)
