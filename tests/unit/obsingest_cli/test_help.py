"""Every command and subcommand explains itself in --help."""

import argparse

import pytest

from obsingest_cli.main import COMMAND_MODULES, build_parser

pytestmark = pytest.mark.unit


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def test_every_command_module_is_wired():
    parser = build_parser()
    commands = {path[0] for path, _ in _walk(parser) if path}
    assert set(COMMAND_MODULES) <= commands


def test_every_subcommand_has_a_description_and_an_action():
    for path, sub in _walk(build_parser()):
        text = sub.format_help()
        assert sub.description, f"obsingest {' '.join(path)} has no description"
        assert "usage:" in text
        has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
        if path and not has_subcommands:
            assert callable(sub.get_default("func")), f"obsingest {' '.join(path)} does nothing"


def _help_of(*path: str) -> str:
    parser = build_parser()
    for found, sub in _walk(parser):
        if found == path:
            return " ".join(sub.format_help().split())
    raise AssertionError(f"no command obsingest {' '.join(path)}")


def test_relay_help_shows_the_settings_defaults():
    """--help states the defaults the relay actually runs with (one source: the settings)."""
    from infra.local.relay.settings import RelaySettings

    settings = RelaySettings()
    text = _help_of("relay")
    assert f"pushes before dead-lettering (default {settings.max_attempts})" in text
    assert f"pushes in flight at once (default {settings.concurrency})" in text
    assert f"(default: {settings.push_url})" in text


def test_daq_night_help_shows_the_cadence():
    from producers.daq.night import NightPlan

    parser = build_parser()
    args = parser.parse_args(["daq", "night", "/tmp/x"])
    assert args.interval == NightPlan(handoff=args.handoff).interval == 17.0
    assert "(default: 17.0, the summit's cadence)" in _help_of("daq", "night")


#: What ``--help`` must never load: a unit's heavy dependencies (the goal is < 0.25 s per call,
#: measured as whole processes by ``benchmarks/cli_startup.py``, not here: no timing in unit tests)
HEAVY = (
    "apache_beam",
    "astropy",
    "matplotlib",
    "numpy",
    "requests",
    "pydantic",
    "pydantic_settings",
    "fastavro",
    "sqlalchemy",
    "psycopg",
    "confluent_kafka",
    "fitsio",
    "cloudevents",
    "functions_framework",
    "google.cloud.storage",
    "google.cloud.pubsub_v1",
    "google.auth",
    "google.api_core",
    "google.protobuf",
    "grpc",
)

_PROBE = """
import argparse, contextlib, io, json, sys
from obsingest_cli.main import build_parser

def walk(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from walk(sub)

for parser in walk(build_parser()):
    parser.format_help()
print(json.dumps(sorted(sys.modules)))
"""


def test_help_of_every_command_loads_no_heavy_module():
    """A fresh interpreter builds every parser and renders every --help, then lists what it
    imported: nothing of a deployment unit's heavy dependencies may be among it."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "obsingest_cli.commands.demo" in loaded  # the probe did build the parsers
    heavy = sorted({h for h in HEAVY for m in loaded if m == h or m.startswith(h + ".")})
    assert not heavy, f"--help loads heavy modules: {heavy}"
