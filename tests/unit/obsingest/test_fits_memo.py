"""The memoised card and keyword helpers and the table-driven checksum encoding answer exactly
what computing afresh does."""

import random

import pytest
from astropy.io import fits

from obsingest.fits import _encode_byte, card_key, encode_checksum, make_card, parse_fits

pytestmark = pytest.mark.unit


def _reference_encoding(value: int) -> str:
    """The checksum encoding computed byte by byte, as the proposal describes it."""
    asc = [0] * 16
    for i in range(4):
        ch = _encode_byte((value >> (24 - 8 * i)) & 0xFF)
        for j in range(4):
            asc[4 * j + i] = ch[j]
    return bytes(asc[15:] + asc[:15]).decode("ascii")


def test_the_checksum_encoding_table_matches_the_algorithm() -> None:
    rng = random.Random(7)
    for value in [0, 0xFFFFFFFF, 0x80000000, *(rng.getrandbits(32) for _ in range(2000))]:
        assert encode_checksum(value) == _reference_encoding(value)


def test_the_checksum_encoding_agrees_with_astropy() -> None:
    from astropy.io.fits.hdu.base import _ValidHDU

    hdu = fits.PrimaryHDU()
    for value in (0, 1, 0xDEADBEEF, 0x7FFFFFFF, 0xFFFFFFFF):
        assert encode_checksum(value) == _ValidHDU._char_encode(hdu, value)


@pytest.mark.parametrize(("first", "second"), [(True, 1), (False, 0), (1, 1.0), (0.0, -0.0), ("1", 1)])
def test_equal_values_of_other_types_or_signs_make_their_own_cards(first: object, second: object) -> None:
    one, other = make_card("KEY", first, "c"), make_card("KEY", second, "c")
    assert one != other
    assert make_card("KEY", first, "c") == one and make_card("KEY", second, "c") == other


def test_a_memoised_card_is_the_card_and_errors_are_not_memoised() -> None:
    assert make_card("BITPIX", 32, "int32") == make_card("BITPIX", 32, "int32")
    assert make_card("BITPIX", 32, "int32").startswith(b"BITPIX  =                   32 / int32")
    for _ in range(2):
        with pytest.raises(ValueError, match="card too long"):
            make_card("LONG", "x" * 80)
        with pytest.raises(TypeError):
            make_card("BAD", [1])


def test_card_key_and_repeated_int_values() -> None:
    assert card_key(b"NAXIS1  = 5".ljust(80)) == "NAXIS1"
    assert card_key(b"        blank".ljust(80)) == ""
    cards = [make_card("SIMPLE", True), make_card("BITPIX", 8), make_card("NAXIS", 0)]
    raw = b"".join([*cards, b"END".ljust(80)])
    hdu = parse_fits(raw + b" " * (2880 - len(raw)))[0]
    assert hdu.int_value("BITPIX") == hdu.int_value("BITPIX") == 8
    assert hdu.int_value("PCOUNT", 0) == 0 and "PCOUNT" not in hdu.ints


def _image_extension(naxis1: bytes, bitpix: bytes = b"16") -> bytes:
    """A primary header and one 2-axis image extension whose NAXIS1 value field is ``naxis1``."""
    primary = [make_card("SIMPLE", True), make_card("BITPIX", 8), make_card("NAXIS", 0)]
    head = [
        make_card("XTENSION", "IMAGE"),
        b"BITPIX  = " + bitpix.rjust(20).ljust(70),
        make_card("NAXIS", 2),
        b"NAXIS1  = " + naxis1.ljust(70),
        make_card("NAXIS2", 3),
        make_card("PCOUNT", 0),
        make_card("GCOUNT", 1),
    ]

    def unit(cards: list[bytes], data: int) -> bytes:
        raw = b"".join([*cards, b"END".ljust(80)])
        return raw + b" " * (-len(raw) % 2880) + b"\0" * (data + -data % 2880)

    return unit(primary, 0) + unit(head, 2 * 3 * 2)


@pytest.mark.parametrize(
    ("naxis1", "bitpix"),
    [
        (b"2", b"16"),
        (b"                   2 / width", b"16"),
        (b"+2", b"16"),
        (b"0_2", b"16"),
        (b"'2'", b"16"),
        (b"2.0", b"16"),
        (b"-2", b"16"),
        (b"\x1c2", b"16"),
        (b"2", b"12"),
        (b"2", b"-32"),
    ],
)
def test_the_sizing_fast_path_reads_what_int_value_reads(
    naxis1: bytes, bitpix: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """parse_fits sizes a standard 2-axis extension from one regex match: the same sizes and
    integer values, or the same error, as reading each keyword with ``Hdu.int_value``."""
    from obsingest import fits as fits_module

    def outcome() -> object:
        try:
            hdu = parse_fits(_image_extension(naxis1, bitpix))[1]
        except fits_module.FitsFormatError as error:
            return (str(error), error.status)
        return (hdu.data_size, hdu.shape, hdu.int_value("BITPIX"), hdu.int_value("PCOUNT"))

    fast = outcome()
    monkeypatch.setattr(fits_module, "_standard_table", lambda *args: None)
    assert fast == outcome()
