"""Which CCD a hand-off file is: read from its primary header with its sidecar's cards over it,
never from its name (producers/edge/README.md, "Identity from the header").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path

from obsingest.dataid import DataId, Identity, identity_from_header, name_claim, parse_obs_id
from obsingest.errors import BadObjectName, CorruptFile, HeaderMismatch
from obsingest.fits import BLOCK, FitsFormatError, parse_primary
from producers.edge.errors import SourceUnreadable, SourceVanished

#: the cards the identity is computed from: a sidecar setting any of them is checked
IDENTITY_CARDS = ("INSTRUME", "OBSID", "DAYOBS", "SEQNUM", "CONTRLLR", "RAFTBAY", "CCDSLOT")
#: the camera's file name: observation id, raft, sensor
CAMERA_NAME = re.compile(
    r"^(?P<obs_id>[A-Z]{2}_[A-Z]_[0-9]{8}_[0-9]{6})_R[0-9X]{2}_S(?:[0-9]{2}|[GW][0-9])"
    r"\.fits(?:\.fz)?$"
)
#: the hand-off name of earlier versions: ``{instrument}_{exposure}_{detector:03d}.fits``
LEGACY_NAME = re.compile(
    r"^(?P<instrument>[A-Za-z][A-Za-z0-9]*)_(?P<exposure>[0-9]{1,18})_(?P<detector>[0-9]{3})"
    r"\.fits(?:\.fz)?$"
)
#: a primary header longer than this is not one the camera writes: refused as corrupt
MAX_HEADER_BYTES = 4 * 1024 * 1024

Cards = Callable[[str], object]
_SECOND = timedelta(seconds=1)


def read_primary_cards(path: Path) -> Cards:
    """The file's primary header (only its blocks are read) as a card getter. SourceVanished,
    SourceUnreadable, or CorruptFile if it is not FITS or ends before its END card."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16 * BLOCK)
            while True:
                try:
                    return parse_primary(head).str_value
                except FitsFormatError as exc:  # 107: no END card yet, read on (up to a limit)
                    more = fh.read(16 * BLOCK) if exc.status == 107 and len(head) < MAX_HEADER_BYTES else b""
                    if not more:
                        raise CorruptFile(f"{path}: {exc}") from None
                    head += more
    except FileNotFoundError:
        raise SourceVanished(f"{path}: vanished before its header was read") from None
    except OSError as exc:
        raise SourceUnreadable(f"{path}: cannot read its header: {exc.strerror or exc}") from None


def with_sidecar(cards: Cards, sidecar: Mapping[str, object]) -> Cards:
    """``cards`` with the sidecar's set over them, as the merged header will read."""
    return lambda key: sidecar[key] if key in sidecar else cards(key)


def check_sidecar_identity(
    cards: Cards, sidecar: Mapping[str, object], data_id: DataId, path: Path | str
) -> None:
    """A sidecar that sets identity cards must, over the file's header, say ``data_id``;
    HeaderMismatch naming both CCDs otherwise (NoIdentity if it blanks a card out)."""
    if not any(key in sidecar for key in IDENTITY_CARDS):
        return
    found = identity_from_header(with_sidecar(cards, sidecar), f"{path}: with its header sidecar")
    if found.data_id != data_id:
        raise _sidecar_mismatch(path, found, data_id)


def _sidecar_mismatch(path: Path | str, sidecar_says: Identity, file_says: DataId) -> HeaderMismatch:
    return HeaderMismatch(
        f"{path}: header sidecar says {sidecar_says.data_id.key} ({sidecar_says.obs_id} "
        f"{sidecar_says.raft}_{sidecar_says.sensor}), the file's header says {file_says.key}"
    )


def handoff_identity(path: Path, sidecar: Mapping[str, object] | None = None) -> Identity:
    """The identity of the hand-off file at ``path`` (module doc), with its sidecar's cards."""
    return handoff_identity_and_readout(path, sidecar)[0]


def handoff_identity_and_readout(
    path: Path, sidecar: Mapping[str, object] | None = None
) -> tuple[Identity, float | None]:
    """``handoff_identity`` and ``readout_end`` of the merged cards, from one header read."""
    cards = read_primary_cards(path)
    sidecar = sidecar or {}
    identity = _identity(path, cards, sidecar)
    return identity, readout_end(with_sidecar(cards, sidecar) if sidecar else cards)


def readout_end(cards: Cards) -> float | None:
    """The end of the CCD's readout (epoch seconds, UTC) from its header's DATE-END in the scale
    TIMESYS names (the camera's TAI); None without a DATE-END or with one that is no time."""
    value = cards("DATE-END")
    if value is None or str(value).strip() == "":
        return None
    timesys = cards("TIMESYS")
    try:
        return _instant(str(value).strip(), str(timesys) if timesys is not None else None)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def _instant(value: str, timesys: str | None) -> float:
    """Cached: an exposure's CCDs share their DATE-END, or nearly. A TAI or UTC ISO time goes
    through ``obsingest.timescales``' leap-second table, far cheaper than astropy; anything else
    (an MJD, another scale, a leap second, outside the table) through astropy."""
    from obsingest.timescales import header_instant, tai_to_utc

    scale = (timesys or "").strip().upper() or "UTC"
    if scale in ("TAI", "UTC"):
        try:
            naive = datetime.fromisoformat(value.removesuffix("Z"))
        except ValueError:
            naive = None
        if naive is not None and naive.tzinfo is None and naive.year >= 1972:
            if scale == "UTC":
                return naive.replace(tzinfo=UTC).timestamp()
            utc, second_later = tai_to_utc(naive), tai_to_utc(naive + timedelta(seconds=1))
            # a TAI instant inside a leap second has no UTC datetime: astropy says so below
            if utc is not None and second_later is not None and second_later - utc == _SECOND:
                return utc.timestamp()
    return header_instant(value, timesys).timestamp()


def _identity(path: Path, cards: Cards, sidecar: Mapping[str, object]) -> Identity:
    # a .fz is sent as it is: the file's own header is what gets stored, the sidecar must agree
    precompressed = path.name.endswith(".fz")
    identity = identity_from_header(cards if precompressed else with_sidecar(cards, sidecar), str(path))
    if precompressed:
        check_sidecar_identity(cards, sidecar, identity.data_id, path)
    elif any(key in sidecar for key in IDENTITY_CARDS):
        try:
            own = identity_from_header(cards, str(path)).data_id
        except (HeaderMismatch, BadObjectName):  # the file alone says no CCD: the sidecar does
            own = None
        if own is not None and own != identity.data_id:
            raise _sidecar_mismatch(path, identity, own)
    _check_name(path, identity)
    return identity


def _check_name(path: Path, identity: Identity) -> None:
    """A name that claims a CCD must claim this one (HeaderMismatch with both)."""
    claim = name_of_file(path.name)
    if claim is None:
        return
    named, obs_id = claim
    if named != identity.data_id or obs_id not in (None, identity.obs_id):
        raise HeaderMismatch(
            f"{path}: the header says {identity.data_id.key} ({identity.obs_id} "
            f"{identity.raft}_{identity.sensor}) but the file name says {named.key}"
            + (f" ({obs_id})" if obs_id else "")
        )


def name_of_file(name: str) -> tuple[DataId, str | None] | None:
    """What a file name claims: (data id, observation id) for the camera's names, (data id,
    None) for the earlier hand-off names, None for any other; BadObjectName for a name of either
    form that no CCD can have."""
    match = CAMERA_NAME.match(name)
    if match:
        try:
            instrument, _controller, day_obs, _seq = parse_obs_id(match["obs_id"])
        except ValueError:
            return None  # a camera code we do not know: not a claim, just a name
        return name_claim(f"{instrument}/{day_obs}/{match['obs_id']}/{name}", prefix="")
    match = LEGACY_NAME.match(name)
    if match:
        try:
            data_id = DataId(match["instrument"], int(match["exposure"]), int(match["detector"]))
        except BadObjectName as exc:
            raise type(exc)(f"{name}: {exc}") from None
        return data_id, None
    return None
