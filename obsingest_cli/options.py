"""Options several commands share, defined once. Standard library only: every command module
imports this, and ``obsingest --help`` must load nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

REGISTRY_HELP = (
    "registry URL: sqlite:///FILE, postgresql://USER@HOST:PORT/DB or butler:REPO "
    "(default: $OBSINGEST_REGISTRY_URL)"
)


def registry_option(parser: argparse.ArgumentParser, help: str = REGISTRY_HELP) -> None:
    """``--registry URL``: the registry a command reads or writes (None: the command's default,
    usually ``$OBSINGEST_REGISTRY_URL``)."""
    parser.add_argument("--registry", help=help)


def project_option(parser: argparse.ArgumentParser) -> None:
    """``--project``: the Pub/Sub project (None: the bus settings')."""
    parser.add_argument("--project", help="Pub/Sub project (default: OBSINGEST_BUS_PUBSUB_PROJECT)")


def budget_option(
    parser: argparse.ArgumentParser, help: str | None = None, *, from_settings: bool = False
) -> None:
    """``--budget SECONDS`` per CCD, readout -> announced: ``obsingest.defaults``' budget, or
    with ``from_settings`` None, for the command's settings (``$OBSINGEST_BUDGET_SECONDS``)."""
    from obsingest import defaults

    if from_settings:
        help = help or "seconds per CCD (default 5, $OBSINGEST_BUDGET_SECONDS)"
    default = None if from_settings else defaults.BUDGET_SECONDS
    help = help or "seconds, readout -> announced (default %(default)s)"
    parser.add_argument("--budget", type=float, default=default, help=help)


def calls(target: str, *, options: bool = False) -> Callable[[argparse.Namespace], int]:
    """A command's ``func``: ``"module:function"`` imported only when the command runs (``--help``
    loads nothing heavy), called with the parsed arguments (``options``: ``call_with_options``)."""
    module, _, name = target.partition(":")

    def run(args: argparse.Namespace) -> int:
        function = getattr(importlib.import_module(module), name)
        return int(call_with_options(function, args) if options else function(args))

    return run


def call_with_options(target: Callable[..., T], args: argparse.Namespace, **given: Any) -> T:
    """``target(...)`` with every option whose dest names one of its parameters, plus ``given``:
    a command's dests are its script's parameter names, so no command copies them one by one."""
    import inspect

    accepted = inspect.signature(target).parameters
    options = {k: v for k, v in vars(args).items() if k in accepted and k not in given}
    return target(**options, **given)
