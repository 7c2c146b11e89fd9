"""Compare obsingest's header translation with Rubin's own translators, header by header.

    python -m tests.world.check_obs_lsst --obs-lsst DIR [--via-fits] [--verbose]

``DIR`` is a checkout of lsst/obs_lsst (``python/``, ``policy/``, ``corrections/`` and
``tests/headers/`` are read; nothing of it is copied here). Its translators are the oracle: they
are imported from the checkout without the ``lsst.obs.lsst`` package's ``__init__`` (which needs
the whole science-pipelines stack) by registering stub parent packages whose ``__path__`` points
into the checkout, and their detector table is read from the checkout's ``policy/`` (the combined
camera files are a build product a plain checkout lacks). Every LSSTCam, LSSTComCam and LATISS
header of ``tests/headers/`` (test stands, simulators, H-controller and synthetic "future" files
aside) goes through both, with the checkout's ``corrections/`` as the correction search path of
both, and every field the registry keeps is compared exactly. Prints a table and the number of
differing fields; exit 1 when any differs.

Not collected by pytest (a local verification against a checkout this repository does not ship).
"""

from __future__ import annotations

import argparse
import copy
import importlib.machinery
import json
import math
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from astro_metadata_translator import MetadataTranslator

#: the headers compared: the camera's on-sky and calibration files of the three instruments
PREFIXES = ("lsstCam-", "lsstCam_", "comCam-", "latiss-")
#: left aside: H-controller (simulated) and synthetic files
SKIPPED = ("_H_", "future", "faked")
#: identity fields (ours from Translation.identity) and ObservationInfo fields compared
IDENTITY = (
    "instrument",
    "exposure_id",
    "detector_num",
    "detector_group",
    "detector_name",
    "observing_day",
    "observation_counter",
    "observation_id",
    "exposure_group",
)
INFO = (
    "physical_filter",
    "datetime_begin",
    "datetime_end",
    "exposure_time",
    "dark_time",
    "observation_type",
    "observation_reason",
    "science_program",
    "object",
    "boresight_rotation_angle",
    "can_see_sky",
    "has_simulated_content",
    "tracking_radec",
    "altaz_begin",
)


def headers(checkout: Path) -> list[Path]:
    folder = checkout / "tests" / "headers"
    return sorted(
        p for p in folder.iterdir() if p.name.startswith(PREFIXES) and not any(s in p.name for s in SKIPPED)
    )


class _Loader(yaml.SafeLoader):
    """YAML with the ``lsst.daf.base.PropertyList`` dumps of older headers: a list of
    ``[card, type, value, comment]`` (a repeated card keeps its last value)."""


def _property_list(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
    items = loader.construct_sequence(node, deep=True)
    return {item[0]: item[2] for item in items}


_Loader.add_constructor("tag:yaml.org,2002:lsst.daf.base.PropertyList", _property_list)
_Loader.add_constructor("lsst.daf.base.PropertyList", _property_list)


def read_header(path: Path) -> dict[str, Any]:
    with path.open() as fh:
        return json.load(fh) if path.suffix == ".json" else yaml.load(fh, Loader=_Loader)


def load_oracle(checkout: Path) -> dict[str, type[MetadataTranslator]]:
    """obs_lsst's translators from ``checkout``, by instrument, registered with the library."""
    from obsingest.translate import rubin

    rubin.rubin_translators_installed()  # decided (False) before the oracle is importable
    root = checkout / "python" / "lsst" / "obs"
    for name, path in (("lsst.obs", root), ("lsst.obs.lsst", root / "lsst")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        module.__spec__.submodule_search_locations = [str(path)]
        sys.modules[name] = module
    from lsst.obs.lsst.translators import LatissTranslator, LsstCamTranslator, LsstComCamTranslator  # type: ignore[import-not-found]

    for cls, camera in ((LsstCamTranslator, "lsstCam"), (LsstComCamTranslator, "comCam")):
        cls.detectorMapping = detector_table(checkout / "policy" / camera)
    for cls in (LsstCamTranslator, LsstComCamTranslator, LatissTranslator):
        # corrections come from the checkout's folder on the search path, as ours do (the
        # package-resource copy is the same folder, and the stub package has no resources)
        cls.default_resource_package = None
    return {"LSSTCam": LsstCamTranslator, "LSSTComCam": LsstComCamTranslator, "LATISS": LatissTranslator}


def detector_table(policy: Path) -> dict[str, tuple[int, str]]:
    """``R22_S11 -> (id, serial)`` from a camera's policy folder: each raft's ``id0`` in
    ``rafts.yaml`` plus the sensor's place in its raft file's ``ccdSerials``."""
    own = policy / "rafts.yaml"  # comCam has its own; lsstCam's is the policy folder's
    rafts = yaml.safe_load((own if own.exists() else policy.parent / "rafts.yaml").read_text())
    rafts = rafts["rafts"]
    table: dict[str, tuple[int, str]] = {}
    for raft, spec in rafts.items():
        serials = yaml.safe_load((policy / f"{raft}.yaml").read_text())[raft]["ccdSerials"]
        for i, (slot, serial) in enumerate(serials.items()):
            table[f"{raft.removesuffix('W')}_{slot}"] = (spec["id0"] + i, serial)
    return table


def shown(value: Any) -> Any:
    """A comparable, printable form of a translated value."""
    if value is None:
        return None
    if hasattr(value, "isot") and hasattr(value, "scale"):
        return f"{value.isot} {value.scale}"
    if hasattr(value, "ra") and hasattr(value, "dec") and not hasattr(value, "alt"):
        return (float(value.ra.deg), float(value.dec.deg))
    if hasattr(value, "alt") and hasattr(value, "az"):
        return (float(value.alt.deg), float(value.az.deg))
    if hasattr(value, "unit") and hasattr(value, "value"):
        number = float(value.value)
        return "nan" if math.isnan(number) else f"{number!r} {value.unit}"
    return value


def compare(
    path: Path, oracle: dict[str, type[MetadataTranslator]], corrections: list[str], via_fits: bool = False
) -> tuple[str, str | None, list[tuple[str, Any, Any]]]:
    """(our translator, theirs, [(field, ours, theirs) for every field that differs])."""
    from astro_metadata_translator import ObservationInfo

    from obsingest import translate

    header = read_header(path)
    # the library's choice among registered translators would be ours: ask obs_lsst's directly
    theirs_class = next(cls for cls in oracle.values() if cls.can_translate(header))
    assert theirs_class.__module__.startswith("lsst.obs.lsst."), theirs_class
    theirs = ObservationInfo(copy.deepcopy(header), translator_class=theirs_class, search_path=corrections)
    if via_fits:  # ours reads the header as the register function does: a FITS primary HDU
        from tests.unit.obsingest.translate.real_headers import fits_primary

        ours = translate.observation(translate.HduHeader(fits_primary(copy.deepcopy(header))))
    else:
        ours = translate.observation(copy.deepcopy(header))
    assert ours.info.translator_name is not None
    assert ours.translator != theirs.translator_name and "obsingest" in ours.info.translator_name
    diffs = []
    for field in IDENTITY:
        a, b = getattr(ours.identity, field), getattr(theirs, field)
        if a != b:
            diffs.append((field, a, b))
    for field in INFO:
        a, b = shown(getattr(ours.info, field)), shown(getattr(theirs, field))
        if a != b:
            diffs.append((field, a, b))
    return ours.info.translator_name, theirs.translator_name, diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--obs-lsst", required=True, type=Path, help="an obs_lsst checkout")
    parser.add_argument("--verbose", action="store_true", help="log the translators' warnings")
    parser.add_argument(
        "--via-fits", action="store_true", help="ours reads each header written as FITS cards"
    )
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
    from obsingest import translate

    corrections = [str(args.obs_lsst / "corrections")]
    oracle = load_oracle(args.obs_lsst)
    translate.configure(corrections)
    files = headers(args.obs_lsst)
    total = 0
    fields = len(IDENTITY) + len(INFO)
    print(f"{'header':50} {'ours':24} {'obs_lsst':14} {'differing':>9}")
    for path in files:
        try:
            ours, theirs, diffs = compare(path, oracle, corrections, args.via_fits)
        except Exception as exc:  # one header that breaks either side is a finding, not a stop
            print(f"{path.name:50} {'ERROR':>49}  {type(exc).__name__}: {exc}")
            total += fields
            continue
        total += len(diffs)
        print(f"{path.name:50} {ours:24} {theirs:14} {len(diffs):>9}")
        for field, ours, theirs in diffs:
            print(f"    {field}: ours {ours!r} != obs_lsst {theirs!r}")
    print(f"{len(files)} headers, {fields} fields each, {total} differing fields")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
