"""``obsingest registry``'s work: open the registry from a URL or settings, print what it holds."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import closing

from obsingest.registry import Registry, open_registry
from obsingest.settings import RegistrySettings


def _open(url: str | None) -> closing[Registry]:
    """The registry at ``url`` (or the settings'), closed when the ``with`` block ends."""
    return closing(open_registry(RegistrySettings(url=url) if url else RegistrySettings()))


def list_datasets(registry: str | None, instrument: str | None, exposure: int | None, as_json: bool) -> int:
    """Registered datasets with their datastore records, as a table or JSON."""
    head = f"{'instrument':<12} {'exposure':>14} {'det':>4} {'size':>10}  dataset id / uri"
    row = "{instrument:<12} {exposure:>14} {detector:>4} {size:>10}  {id}  {uri}"
    with _open(registry) as db:
        return _print(db.iter_datasets(instrument, exposure), as_json, [head], row, "datasets")


def list_quarantine(registry: str | None, as_json: bool) -> int:
    """Refused inputs: object, reason, message, occurrences."""
    row = "{reason:<20} x{occurrences:<3} {object_uri}\n    {message}"
    with _open(registry) as db:
        return _print(db.iter_quarantined(), as_json, [], row, "quarantined")


def _print(rows: Iterable[dict], as_json: bool, head: list[str], row: str, what: str) -> int:
    """``rows`` as a JSON array (``json.dumps(rows, indent=2)``'s text), or ``head``, one
    ``row.format`` line each and the count ``what``; written row by row, so a night's history is
    never held."""
    count = 0
    if not as_json:
        for line in head:
            print(line)
    for r in rows:
        if as_json:
            print(
                "[" if count == 0 else ",",
                "  " + json.dumps(r, indent=2).replace("\n", "\n  "),
                sep="\n",
                end="",
            )
        else:
            print(row.format(**r))
        count += 1
    if as_json:
        print("\n]" if count else "[]")
    else:
        print(f"{count} {what}")
    return 0


def migrate(registry: str | None) -> int:
    """Apply pending schema migrations (opening the registry does)."""
    with _open(registry) as db:
        print(f"registry schema up to date at {db.engine.url.render_as_string(hide_password=True)}")
    return 0


def export(
    registry: str | None,
    path: str,
    as_json: bool,
    target: str = "rubin",
    formatter: Sequence[str] = (),
    storage_class: str | None = None,
) -> int:
    """Write the registry as what ``butler import`` loads (``--format`` has one choice), for the
    environment ``target`` names (``registry.butler_export``); ``formatter``: INSTRUMENT=CLASS."""
    from obsingest.registry.butler_export import export_butler

    formatters = dict(item.split("=", 1) for item in formatter)
    with _open(registry) as db:
        counts = export_butler(db, path, storage_class=storage_class, target=target, formatters=formatters)
    print(json.dumps(counts) if as_json else f"wrote {path}: {counts}")
    return 0
