"""Record-level facts of one chunk: the chunk size it was cut with tells copies of a CCD apart."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from functions.assembler.chunks import chunk_key, chunk_stride
from obsingest.dataid import DataId
from producers.kafka.chunker import iter_chunks

pytestmark = pytest.mark.unit

DATA_ID = DataId("LSSTComCam", 2026112200001, 1)
READOUT = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(("size", "chunk"), [(10_000, 4096), (10_000, 4000), (8192, 4096)])
def test_every_chunk_of_an_equal_cut_tells_its_chunk_size(size, chunk):
    chunks = list(iter_chunks(DATA_ID, bytes(size), READOUT, None, "edge", chunk))
    assert [chunk_stride(c) for c in chunks] == [chunk] * len(chunks)


def test_a_single_chunk_or_a_last_chunk_that_fits_no_equal_cut_tells_nothing():
    [whole] = iter_chunks(DATA_ID, bytes(3000), READOUT, None, "edge", 4096)
    assert chunk_stride(whole) is None
    *_, last = iter_chunks(DATA_ID, bytes(10_000), READOUT, None, "edge", 4096)
    assert chunk_stride(last) == 4096  # 2 x 4096 + 1808
    assert chunk_stride(dataclasses.replace(last, total_size=10_001)) is None  # 8193 / 2
    assert chunk_stride(dataclasses.replace(last, payload=bytes(5000))) is None  # last > others


def test_chunk_key_names_even_an_invalid_data_id():
    [whole] = iter_chunks(DATA_ID, bytes(10), READOUT, None, "edge", 4096)
    assert chunk_key(dataclasses.replace(whole, instrument="HSC", detector=7)) == ("HSC/2026112200001/007")
