"""The Cloud Functions source archive is self-sufficient: its main.py imports the register
entry points from the archive's own packages, with only the pinned runtime dependencies."""

import importlib.util
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_archive_imports_the_entry_points_from_its_own_files(tmp_path):
    spec = importlib.util.spec_from_file_location("gcf_build", ROOT / "infra" / "gcf" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    archive = build.build(tmp_path / "fn.zip")
    out = tmp_path / "src"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(out)
        names = set(zf.namelist())
    assert {"main.py", "requirements.txt", "functions/register/main.py", "schemas/__init__.py"} <= names
    assert any(n.endswith(".avsc") for n in names)
    requirements = (out / "requirements.txt").read_text().splitlines()
    assert all("==" in line for line in requirements)
    assert not any(line.startswith(("apache-beam", "astropy")) for line in requirements)
    # -S: no .pth files, so the project's editable install cannot stand in for the archive
    site = sysconfig.get_paths()["purelib"]
    code = (
        f"import sys; sys.path[:0] = [{str(out)!r}, {site!r}]; import main, functions, schemas; "
        f"assert main.__file__.startswith({str(out)!r}), main.__file__; "
        f"assert functions.__file__.startswith({str(out)!r}); "
        "assert callable(main.on_push) and callable(main.on_object_finalized); "
        "schemas.validate_all()"
    )
    subprocess.run([sys.executable, "-S", "-c", code], check=True, cwd=tmp_path, timeout=120)
