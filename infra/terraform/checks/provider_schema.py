"""Check infra/terraform/*.tf against the Google provider's own schema, without the provider.

`terraform validate` needs the provider binary, unreachable here; its schema is in the jsii
assembly of @cdktf/provider-google (pinned in tools.py). This checks what validate checks
statically: arguments and blocks exist, required ones are present, single blocks appear once,
references resolve. ``convert`` compacts the assembly into a schema JSON; ``check`` prints the
problems of the .tf files (parsed with python-hcl2) as JSON; ``dump`` the parsed configuration.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

META_ARGUMENTS = (
    {"count", "for_each", "depends_on", "provider"}
    | {"lifecycle", "provisioner", "connection"}
    | {"__start_line__", "__end_line__"}
)
LINK = re.compile(r"/docs/(resources|data-sources)/([a-z0-9_]+)#([a-z0-9_]+)")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _docs(prop: dict[str, Any]) -> str:
    docs = prop.get("docs", {})
    return f"{docs.get('remarks', '')} {docs.get('summary', '')}"


def _struct_of(type_ref: dict[str, Any], types: dict[str, Any]) -> tuple[str, bool] | None:
    """(fqn, is_list) when a property's type is a nested block, else None (an attribute)."""
    if "fqn" in type_ref:
        fqn = type_ref["fqn"]
        kind = types.get(fqn, {}).get("kind")
        return (fqn, False) if kind == "interface" and types[fqn].get("datatype") else None
    for member in type_ref.get("union", {}).get("types", []):
        element = member.get("collection", {}).get("elementtype", {})
        fqn = element.get("fqn")
        if fqn and types.get(fqn, {}).get("datatype"):
            return fqn, True
    return None


def _body(fqn: str, types: dict[str, Any], seen: tuple[str, ...] = ()) -> dict[str, Any]:
    attrs: dict[str, bool] = {}
    blocks: dict[str, Any] = {}
    for prop in types[fqn].get("properties", []):
        found = LINK.search(_docs(prop))
        name = found.group(3) if found else _snake(prop["name"])
        required = not prop.get("optional", False)
        nested = _struct_of(prop["type"], types)
        if nested is None:
            attrs[name] = required
        elif nested[0] not in seen:
            blocks[name] = {
                "required": required,
                "list": nested[1],
                "schema": _body(nested[0], types, (*seen, fqn)),
            }
    return {"attrs": attrs, "blocks": blocks}


def convert(jsii_path: Path, out: Path) -> None:
    """Compact schema {"resource"|"data": {type: body}} from a cdktf provider's jsii assembly."""
    types = json.loads(jsii_path.read_text())["types"]
    schema: dict[str, dict[str, Any]] = {"resource": {}, "data": {}}
    for fqn, spec in types.items():
        if "cdktf.TerraformMetaArguments" not in spec.get("interfaces", []):
            continue  # a nested block's struct, not a resource's or data source's arguments
        links = {LINK.search(_docs(p)) for p in spec.get("properties", [])}
        kinds = {(m.group(1), m.group(2)) for m in links if m}
        if len(kinds) != 1:
            continue  # the provider's own configuration, or not a resource
        kind, name = kinds.pop()
        body = _body(fqn, types)
        # Every attribute an expression may read (arguments and computed ones): the getters of
        # the resource's class, e.g. ServiceAccount.member, SqlDatabaseInstance.privateIpAddress.
        getters = types.get(fqn[: -len("Config")], {}).get("properties", [])
        readable = {_snake(p["name"]) for p in getters if not p.get("static")}
        body["readable"] = sorted(
            n for n in readable if not (n.endswith("_input") and n[: -len("_input")] in readable)
        )
        schema["resource" if kind == "resources" else "data"][f"google_{name}"] = body
    out.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True))


def _check_body(where: str, body: dict[str, Any], spec: dict[str, Any], top: bool) -> list[str]:
    problems: list[str] = []
    present: dict[str, list[dict[str, Any]]] = {}
    for key, value in body.items():
        if top and key in META_ARGUMENTS:
            continue
        if key in ("__start_line__", "__end_line__"):
            continue
        if key == "dynamic":
            for dyn in value:
                for name, dspec in dyn.items():
                    present.setdefault(name, []).extend(dspec.get("content", []))
            continue
        if key in spec["attrs"]:
            continue
        if key in spec["blocks"]:
            present.setdefault(key, []).extend(v for v in value if isinstance(v, dict))
            continue
        problems.append(f"{where}: unsupported argument or block {key!r}")
    for name, required in spec["attrs"].items():
        if required and name not in body:
            problems.append(f"{where}: missing required argument {name!r}")
    for name, block in spec["blocks"].items():
        instances = present.get(name, [])
        if block["required"] and not instances:
            problems.append(f"{where}: missing required block {name!r}")
        if not block["list"] and len(instances) > 1:
            problems.append(f"{where}: block {name!r} may appear once, found {len(instances)}")
        for instance in instances:
            problems += _check_body(f"{where}.{name}", instance, block["schema"], False)
    return problems


def parse(tf_dir: Path) -> dict[str, list[Any]]:
    """Every .tf file of a directory, as python-hcl2 parses it, merged by top-level key."""
    import hcl2  # in checkov's environment

    merged: dict[str, list[Any]] = {}
    for path in sorted(tf_dir.glob("*.tf")):
        with path.open() as handle:
            for key, value in hcl2.load(handle).items():
                merged.setdefault(key, []).extend(
                    {**item, "__file__": path.name} if isinstance(item, dict) else item for item in value
                )
    return merged


REFERENCE = re.compile(r"(?<![\w.])(data\.)?(google_[a-z0-9_]+)\.([a-z0-9_]+)(?:\[[^\]]*\])?\.([a-z0-9_]+)")
NAMED = re.compile(r"(?<![\w.])(var|local)\.([a-z0-9_]+)")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _blocks(config: dict[str, list[Any]], section: str) -> Iterator[tuple[str, str, str, Any]]:
    """(file, type, name, body) of every block of ``section`` (resource or data)."""
    for item in config.get(section, []):
        for rtype, named in item.items():
            if rtype != "__file__":
                yield from ((item.get("__file__", "?"), rtype, name, body) for name, body in named.items())


def check_references(schema: dict[str, Any], config: dict[str, list[Any]]) -> list[str]:
    """References to undeclared resources, variables, locals, or attributes a type lacks."""
    declared = {s: {(rtype, name) for _, rtype, name, _ in _blocks(config, s)} for s in ("resource", "data")}
    names = {
        "var": {n for item in config.get("variable", []) for n in item if n != "__file__"},
        "local": {n for item in config.get("locals", []) for n in item if n != "__file__"},
    }
    problems: list[str] = []
    for section in ("resource", "data", "output", "locals", "module"):
        for item in config.get(section, []):
            where = item.get("__file__", "?")
            for text in _strings({k: v for k, v in item.items() if k != "__file__"}):
                for ref in REFERENCE.finditer(text):
                    kind = "data" if ref.group(1) else "resource"
                    rtype, name, attr = ref.group(2), ref.group(3), ref.group(4)
                    if (rtype, name) not in declared[kind]:
                        problems.append(f"{where}: reference to undeclared {kind} {rtype}.{name}")
                    elif attr not in schema[kind].get(rtype, {}).get("readable", [attr]):
                        problems.append(f"{where}: {rtype} has no attribute {attr!r}")
                for ref in NAMED.finditer(text):
                    if ref.group(2) not in names[ref.group(1)]:
                        problems.append(f"{where}: reference to undeclared {ref.group(0)}")
    return sorted(set(problems))


def check(schema_path: Path, tf_dir: Path) -> list[str]:
    """Problems found in the .tf files of ``tf_dir``, as 'file: type.name.block: what' lines."""
    schema = json.loads(schema_path.read_text())
    config = parse(tf_dir)
    problems: list[str] = []
    for kind in ("resource", "data"):
        for filename, rtype, name, body in _blocks(config, kind):
            where = f"{filename}: {rtype}.{name}"
            spec = schema[kind].get(rtype)
            if spec is None:
                problems.append(f"{where}: unknown {kind} type {rtype!r}")
            else:
                problems += _check_body(where, body, spec, True)
    return problems + check_references(schema, config)


def main(argv: list[str]) -> int:
    if argv[:1] == ["convert"] and len(argv) == 3:
        convert(Path(argv[1]), Path(argv[2]))
        return 0
    if argv[:1] == ["check"] and len(argv) == 3:
        print(json.dumps(check(Path(argv[1]), Path(argv[2])), indent=1))
        return 0
    if argv[:1] == ["dump"] and len(argv) == 2:
        print(json.dumps(parse(Path(argv[1]))))
        return 0
    print("usage: provider_schema.py convert JSII OUT | check SCHEMA TF_DIR | dump TF_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
