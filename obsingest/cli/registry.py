"""`obsingest registry ...`: look into the dataset registry."""

from __future__ import annotations

import argparse
import json

from obsingest.settings import RegistrySettings


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "registry",
        help="inspect the dataset registry (registered datasets, quarantine)",
        description="Inspect the dataset registry: what was registered, what was refused, why.",
    )
    sub = p.add_subparsers(dest="registry_command", metavar="SUBCOMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--registry",
        default=None,
        help="SQLAlchemy URL, e.g. sqlite:///demo-output/registry.sqlite3 or "
        "postgresql://user@host:port/db (default: $OBSINGEST_REGISTRY_URL)",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    ls = sub.add_parser(
        "list",
        parents=[common],
        help="list registered datasets",
        description="List registered datasets with their datastore records.",
    )
    ls.add_argument("--instrument", help="only this instrument")
    ls.add_argument("--exposure", type=int, help="only this exposure id")
    ls.set_defaults(func=_list)

    q = sub.add_parser(
        "quarantine",
        parents=[common],
        help="list refused inputs and the reasons",
        description="List quarantined inputs: object, reason, message, occurrences.",
    )
    q.set_defaults(func=_quarantine)

    m = sub.add_parser(
        "migrate",
        parents=[common],
        help="create or upgrade the registry schema",
        description="Apply pending schema migrations (idempotent).",
    )
    m.set_defaults(func=_migrate)

    x = sub.add_parser(
        "export",
        parents=[common],
        help="write the registry as an export `butler import` loads",
        description="Write dimension records, runs, the dataset type and every dataset (same ids, "
        "same URIs) as a Butler export file (needs obsingest[butler]).",
    )
    x.add_argument("--format", choices=["butler"], default="butler", help="export format")
    x.add_argument("file", help="output file, e.g. export.yaml")
    x.set_defaults(func=_export)


def _open(args: argparse.Namespace):
    from obsingest.registry import Registry

    settings = RegistrySettings(url=args.registry) if args.registry else RegistrySettings()
    return Registry.open(settings)


def _list(args: argparse.Namespace) -> int:
    registry = _open(args)
    rows = registry.datasets(args.instrument, args.exposure)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'instrument':<12} {'exposure':>14} {'det':>4} {'size':>10}  dataset id / uri")
        for r in rows:
            print(
                f"{r['instrument']:<12} {r['exposure']:>14} {r['detector']:>4} {r['size']:>10}  "
                f"{r['id']}  {r['uri']}"
            )
        print(f"{len(rows)} datasets")
    registry.close()
    return 0


def _quarantine(args: argparse.Namespace) -> int:
    registry = _open(args)
    rows = registry.quarantined()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['reason']:<20} x{r['occurrences']:<3} {r['object_uri']}\n    {r['message']}")
        print(f"{len(rows)} quarantined")
    registry.close()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    registry = _open(args)
    print(
        f"registry schema up to date at {registry.engine.url.render_as_string(hide_password=True)}"
    )
    registry.close()
    return 0


def _export(args: argparse.Namespace) -> int:
    from obsingest.registry.butler_export import export_butler

    registry = _open(args)
    try:
        counts = export_butler(registry, args.file)
    finally:
        registry.close()
    print(json.dumps(counts) if args.json else f"wrote {args.file}: {counts}")
    return 0
