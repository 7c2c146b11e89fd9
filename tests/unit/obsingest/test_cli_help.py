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
