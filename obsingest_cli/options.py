"""Options several commands share, defined once (as daf_butler's ``cli/opt`` ``repo_argument``).

Standard library only: every command module imports this at module level, and
``obsingest --help`` must load nothing heavy.
"""

from __future__ import annotations

import argparse

REGISTRY_HELP = (
    "registry URL: sqlite:///FILE, postgresql://USER@HOST:PORT/DB or butler:REPO "
    "(default: $OBSINGEST_REGISTRY_URL)"
)


def registry_option(parser: argparse.ArgumentParser, help: str = REGISTRY_HELP) -> None:
    """``--registry URL``: the registry a command reads or writes (None: the command's default,
    usually ``$OBSINGEST_REGISTRY_URL``)."""
    parser.add_argument("--registry", default=None, help=help)
