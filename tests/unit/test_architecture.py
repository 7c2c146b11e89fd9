"""The layering rule of ARCHITECTURE.md, enforced by reading every import of every module.

Imports inside functions count as much as those at the top: a lazy import is still a
dependency. Failing here means a module reached across a boundary; the message names the file,
the line and the rule, so the fix is to move code to the layer it belongs to, not to hide the
import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import cast

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "obsingest",
    "obsingest_cli",
    "obsingest_testing",
    "producers",
    "functions",
    "beam_jobs",
    "schemas",
    "infra",
    "benchmarks",
    "tests",
)

#: layer -> the layers its modules may import (always including itself)
ALLOWED: dict[str, frozenset[str]] = {
    "schemas": frozenset({"schemas"}),
    "kernel": frozenset({"kernel", "schemas"}),
    "producers": frozenset({"producers", "kernel", "schemas"}),
    "functions": frozenset({"functions", "kernel", "schemas"}),
    "beam_jobs": frozenset({"beam_jobs", "kernel", "schemas"}),
    "infra.local": frozenset({"infra.local", "kernel", "schemas"}),
    # the facility as containers: images, service containers, the pipeline's components
    "infra.containers": frozenset({"infra.containers", "infra.local", "kernel", "schemas"}),
    # the downstream testing kit (pytest plugin) on the containerised facility
    "testing": frozenset({"testing", "infra.containers", "infra.local", "kernel", "schemas"}),
    # the Cloud Functions archive packages the register function
    "infra": frozenset({"infra", "functions", "kernel", "schemas"}),
    "cli": frozenset({"cli", "producers", "functions", "beam_jobs", "infra.local", "kernel", "schemas"}),
    # benchmarks run commands as processes and may use the composition root's library, not
    # its command modules
    "benchmarks": frozenset(
        {"benchmarks", "cli", "producers", "functions", "beam_jobs", "infra.local", "kernel", "schemas"}
    ),
    "tests": frozenset(
        {
            "tests",
            "benchmarks",
            "cli",
            "producers",
            "functions",
            "beam_jobs",
            "infra",
            "infra.local",
            "infra.containers",
            "testing",
            "kernel",
            "schemas",
        }
    ),
}

#: module names too generic to mean one thing: each may exist at most once in the project
GENERIC_NAMES = {"codec", "sender", "core", "factory", "build", "utils", "helpers", "common"}

#: longest module, unless its docstring says why it is one cohesive concept
MAX_LINES = 500


def layer(module: str) -> str:
    top = module.split(".")[0]
    if top == "obsingest":
        return "kernel"
    if top == "obsingest_cli":
        return "cli"
    if top == "obsingest_testing":
        return "testing"
    if module == "infra.local" or module.startswith("infra.local."):
        return "infra.local"
    if module == "infra.containers" or module.startswith("infra.containers."):
        return "infra.containers"
    return top


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    path: Path
    line: int


@cache
def modules() -> dict[str, Path]:
    """Every project module, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
        # C extensions (``producers/compress/_rice.c`` builds ``producers.compress._rice``)
        for path in sorted((ROOT / package).rglob("*.c")):
            found[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return found


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """Project-internal imports of ``module``; ``from pkg import mod`` counts as ``pkg.mod``."""
    known = modules()
    if path.suffix != ".py":
        return
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                yield Import(module, target, path, cast(ast.stmt, node).lineno)


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(imp for mod, path in modules().items() for imp in imports_of(mod, path))


def python_modules() -> dict[str, Path]:
    return {name: path for name, path in modules().items() if path.suffix == ".py"}


def test_the_scan_sees_the_project() -> None:
    mods = modules()
    assert "obsingest.registry.registry" in mods and "obsingest_cli.main" in mods
    assert any(i.source == "obsingest_cli.demo.run" for i in all_imports())


def test_layers_import_only_what_they_may() -> None:
    bad = []
    for imp in all_imports():
        src, dst = layer(imp.source), layer(imp.target)
        if dst not in ALLOWED[src]:
            bad.append(f"{imp.path.relative_to(ROOT)}:{imp.line}: {src} may not import {dst} ({imp.target})")
        elif src == "benchmarks" and imp.target.startswith("obsingest_cli.commands"):
            bad.append(f"{imp.path.relative_to(ROOT)}:{imp.line}: benchmarks use CLI commands")
    assert not bad, "layering violations (see ARCHITECTURE.md):\n" + "\n".join(bad)


def test_the_kernel_imports_no_deployment_unit_not_even_lazily() -> None:
    units = ("producers", "functions", "beam_jobs", "benchmarks", "obsingest_cli", "infra")
    bad = [
        f"{i.path.relative_to(ROOT)}:{i.line}: {i.target}"
        for i in all_imports()
        if i.source.split(".")[0] == "obsingest" and i.target.split(".")[0] in units
    ]
    assert not bad, "the kernel imports a deployment unit:\n" + "\n".join(bad)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    edges: dict[str, set[str]] = {}
    known = modules()
    for imp in all_imports():
        if imp.target in known and imp.target != imp.source:
            edges.setdefault(imp.source, set()).add(imp.target)
    assert not _cycles(edges), f"modules that import each other: {_cycles(edges)}"


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def test_no_module_over_500_lines_without_a_reason() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in python_modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
        and "one cohesive concept" not in _docstring(path).lower()
    ]
    assert not long, "split these, or say in the docstring why each is one cohesive concept:\n" + "\n".join(
        long
    )


def test_generic_module_names_are_unique() -> None:
    seen: dict[str, list[str]] = {}
    for name, path in python_modules().items():
        if path.stem in GENERIC_NAMES and not name.startswith("tests."):
            seen.setdefault(path.stem, []).append(name)
    clashes = {stem: names for stem, names in seen.items() if len(names) > 1}
    assert not clashes, f"one generic name, several meanings: {clashes}"


def test_no_log_event_field_overwrites_a_log_record_attribute() -> None:
    """``log_event``'s fields become LogRecord attributes: ``name=`` (or ``msg=``, ``module=``...)
    raises KeyError, but only when the level is enabled, so a test at WARNING never sees it."""
    import logging

    reserved = set(logging.LogRecord("n", 0, "p", 0, "m", (), None).__dict__) | {"message", "asctime"}
    bad = []
    for path in modules().values():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            func = node.func if isinstance(node, ast.Call) else None
            if getattr(func, "id", getattr(func, "attr", None)) == "log_event":
                call = cast(ast.Call, node)
                bad += [
                    f"{path.relative_to(ROOT)}:{call.lineno}: {k.arg}"
                    for k in call.keywords
                    if k.arg in reserved
                ]
    assert not bad, bad
