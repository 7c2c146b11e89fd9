"""``obsingest compress`` as an fpack drop-in: each flag, many files, -O/-D/-F/-S, and the exit
codes and messages for missing, non-FITS and refused input, compared with what the installed
fpack does on the same files (both run as processes here)."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from obsingest_cli.main import main as cli_main
from producers.compress import compress_fits, decompress_fits, fpack_cli, tiled_rice
from producers.daq.simulator import generate_raw_ccd
from tests.unit.producers.test_compress import SPEC  # the same small ComCam CCD

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(
        not (shutil.which("fpack") and shutil.which("funpack")),
        reason="fpack/funpack (Debian libcfitsio-bin) not installed; `make setup` installs it",
    ),
]

ROOT = Path(__file__).resolve().parents[3]
NOOP = "Input and output files are unchanged.\n"


@pytest.fixture(scope="module")
def raw() -> bytes:
    return generate_raw_ccd(SPEC)


@pytest.fixture
def ccd(raw, tmp_path) -> Path:
    path = tmp_path / "ccd.fits"
    path.write_bytes(raw)
    return path


def ours(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``python -m producers.compress`` as a process (the library path of the command)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "producers.compress", *args]
    return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, env=env, check=False)


def fpack(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["fpack", *args], cwd=cwd, capture_output=True, check=False)


def funpack_data(fz: Path, tmp_path: Path) -> list[np.ndarray | None]:
    """Pixel data of every HDU after a funpack round trip."""
    out = tmp_path / f"{fz.name}.funpacked.fits"
    out.unlink(missing_ok=True)
    subprocess.run(["funpack", "-O", str(out), str(fz)], check=True, capture_output=True)
    with fits.open(out) as hdus:
        return [None if h.data is None else np.array(h.data) for h in hdus]


def raw_data(raw: bytes) -> list[np.ndarray | None]:
    with fits.open(io.BytesIO(raw)) as hdus:
        return [None if h.data is None else np.array(h.data) for h in hdus]


def assert_same_data(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if x is None:
            assert y is None
        else:
            np.testing.assert_array_equal(x, y)


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.endswith(".funpacked.fits"))


# --- missing, non-FITS, existing outputs: fpack's codes and messages -------------------------


def test_missing_input_same_exit_code_and_message_as_fpack(ccd, tmp_path) -> None:
    mine, theirs = (run("ccd.fits", "missing.fits", cwd=tmp_path) for run in (ours, fpack))
    assert mine.returncode == theirs.returncode == 255
    expected = b"Error: can't find or read input file missing.fits\n" + NOOP.encode()
    assert mine.stdout == theirs.stdout == expected
    assert files(tmp_path) == ["ccd.fits"]  # preflight: not even the good file is written


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"not fits at all\n", id="short-text"),
        pytest.param(b"GARBAGE" * 1000, id="long-text"),
        pytest.param(b"SIMPLE  = " + b" " * 1990, id="short-fits-start"),
        pytest.param(None, id="directory"),
    ],
)
def test_non_fits_input_same_status_as_fpack(tmp_path, content) -> None:
    bad = tmp_path / "bad.fits"
    if content is None:
        bad.mkdir()
    else:
        bad.write_bytes(content)
    mine, theirs = ours("bad.fits", cwd=tmp_path), fpack("bad.fits", cwd=tmp_path)
    assert mine.returncode == theirs.returncode != 0
    # CFITSIO's report starts with a blank line and the status line; ours then names the reason
    assert mine.stderr.splitlines()[:2] == theirs.stderr.splitlines()[:2]
    assert mine.stderr.splitlines()[2].startswith(b"bad.fits: ")
    assert not (tmp_path / "bad.fits.fz").exists()


def test_output_exists_same_as_fpack(ccd, tmp_path) -> None:
    (tmp_path / "ccd.fits.fz").write_bytes(b"keep me")
    mine, theirs = ours("ccd.fits", cwd=tmp_path), fpack("ccd.fits", cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 255
    expected = b"Error: output file already exists:\n ccd.fits.fz\n " + NOOP.encode()
    assert mine.stdout == theirs.stdout == expected
    assert (tmp_path / "ccd.fits.fz").read_bytes() == b"keep me"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("-O", "a.fz", "ccd.fits", "ccd.fits"), id="-O with two files"),
        pytest.param(("-O", "a.fz", "-S", "ccd.fits"), id="-O with -S"),
        pytest.param(("-r", "-r", "ccd.fits"), id="two compression flags"),
        pytest.param(("-w", "-t", "10", "ccd.fits"), id="two tile flags"),
        pytest.param(("-t", "10x5", "ccd.fits"), id="bad -t"),
        pytest.param(("-t", "1,1,1,1,1,1,1", "ccd.fits"), id="-t too many dims"),
        pytest.param(("-Z", "ccd.fits"), id="unknown flag"),
        pytest.param(("ccd.fits", "-v"), id="flag after file"),
        pytest.param(("ccd.fits[1]",), id="extension syntax"),
        pytest.param(("-v",), id="no files"),
        pytest.param(("-O",), id="-O without value"),
        pytest.param(("ccd.fits.fz",), id="input has .fz suffix"),
        pytest.param((), id="no arguments"),
    ],
)
def test_command_line_errors_same_as_fpack(ccd, tmp_path, args) -> None:
    if "ccd.fits.fz" in args:
        (tmp_path / "ccd.fits.fz").write_bytes(b"x")
    before = files(tmp_path)
    mine, theirs = ours(*args, cwd=tmp_path), fpack(*args, cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 255
    # the same first line (the error), or both start with their usage line
    first, expected = mine.stdout.splitlines()[0], theirs.stdout.splitlines()[0]
    if expected.startswith(b"usage: fpack "):
        assert first.startswith(b"usage: obsingest compress ")
    else:
        assert first == expected
    assert files(tmp_path) == before


@pytest.mark.parametrize(
    "args",
    [
        ("-h",),
        ("-g",),
        ("-g1",),
        ("-g2",),
        ("-p",),
        ("-d",),
        ("-q", "4"),
        ("-q0", "4"),
        ("-qz", "4"),
        ("-qt", "4"),
        ("-q12", "4"),
        ("-h", "-s", "1"),
        ("-n", "1"),
        ("-i2f",),
        ("-n3ratio", "2"),
        ("-n3min", "6"),
        ("-T",),
        ("-L",),
        ("-table",),
        ("-tableonly",),
    ],
    ids=lambda args: " ".join(args),
)
def test_flags_that_cannot_apply_are_refused_clearly(ccd, tmp_path, args) -> None:
    theirs = fpack(*args, "-S", "ccd.fits", cwd=tmp_path)
    assert theirs.returncode == 0, "fpack accepts this flag: it is real, not a typo"
    mine = ours(*args, "ccd.fits", cwd=tmp_path)
    assert mine.returncode == 255
    message = mine.stdout.decode()
    assert message.startswith(f"Error: `{args[0]}': ")
    assert any(word in message for word in ("not supported", "lossy", "fpack's own"))
    assert files(tmp_path) == ["ccd.fits"]


# --- the flags that apply --------------------------------------------------------------------


def test_default_writes_name_fz_and_funpack_restores_the_data(raw, ccd, tmp_path) -> None:
    result = ours("ccd.fits", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert files(tmp_path) == ["ccd.fits", "ccd.fits.fz"]
    assert (tmp_path / "ccd.fits.fz").read_bytes() == compress_fits(raw)
    assert_same_data(funpack_data(tmp_path / "ccd.fits.fz", tmp_path), raw_data(raw))


def test_verbose_prints_what_fpack_prints(ccd, tmp_path) -> None:
    mine = ours("-v", "ccd.fits", cwd=tmp_path)
    (tmp_path / "ccd.fits.fz").unlink()
    theirs = fpack("-v", "ccd.fits", cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 0
    assert mine.stdout == theirs.stdout == b"ccd.fits -> ccd.fits.fz\n"


@pytest.mark.parametrize(
    ("args", "ztile"),
    [
        ((), (32, 64)),
        (("-r",), (32, 64)),
        (("-w",), (32, 64)),
        (("-Y",), (32, 64)),
        (("-t", "0,1"), (32, 1)),  # fpack's default: row by row
        (("-t", "16"), (16, 1)),
        (("-t", "20,7"), (20, 7)),  # tiles narrower than the image, partial last ones
        (("-t", "1000,1000"), (32, 64)),  # clipped to the image
        (("--threads", "1"), (32, 64)),
        (("--threads=3", "-t", "5,3"), (5, 3)),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) and all(isinstance(x, str) for x in v) else str(v),
)
def test_tiling_and_type_flags_round_trip(raw, ccd, tmp_path, args, ztile) -> None:
    assert ours(*args, "ccd.fits", cwd=tmp_path).returncode == 0
    fz = tmp_path / "ccd.fits.fz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(fz, checksum=True, disable_image_compression=True) as packed:
            for hdu in packed[1:]:
                _ = hdu.data  # checksums verified on read
                assert (hdu.header["ZTILE1"], hdu.header["ZTILE2"]) == ztile
                assert hdu.header["ZCMPTYPE"] == "RICE_1"
    assert_same_data(funpack_data(fz, tmp_path), raw_data(raw))
    assert decompress_fits(fz.read_bytes()) == raw


def test_no_checksum_flag_like_fpack(ccd, tmp_path) -> None:
    assert ours("-C", "-O", "mine.fz", "ccd.fits", cwd=tmp_path).returncode == 0
    assert fpack("-C", "-O", "theirs.fz", "ccd.fits", cwd=tmp_path).returncode == 0
    for name in ("mine.fz", "theirs.fz"):
        assert b"CHECKSUM=" not in (tmp_path / name).read_bytes()


def test_version_and_help_exit_zero(tmp_path) -> None:
    for flag in ("-V", "-H", "--help"):
        result = ours(flag, cwd=tmp_path)
        assert result.returncode == 0 and result.stdout
    assert b"-D" in ours("-H", cwd=tmp_path).stdout


# --- many files ------------------------------------------------------------------------------


def _variants(raw: bytes, count: int) -> list[bytes]:
    """Distinct files: the same CCD with a COMMENT card in place of a primary-header blank."""
    cards = [raw[i : i + 80] for i in range(0, raw.index(b"END".ljust(80)), 80)]
    at = 80 * cards.index(b" " * 80)
    return [raw[:at] + f"COMMENT variant {i}".ljust(80).encode() + raw[at + 80 :] for i in range(count)]


def test_many_files_in_one_call_each_like_alone(raw, tmp_path) -> None:
    contents = _variants(raw, 5)
    names = []
    for i, data in enumerate(contents):
        (tmp_path / f"sub{i % 2}").mkdir(exist_ok=True)
        names.append(f"sub{i % 2}/c{i}.fits")
        (tmp_path / names[-1]).write_bytes(data)
    result = ours("-v", "--threads", "2", *names, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [f"{n} -> {n}.fz" for n in names]
    for name, data in zip(names, contents, strict=True):
        fz = tmp_path / f"{name}.fz"
        assert fz.read_bytes() == compress_fits(data)
        assert decompress_fits(fz.read_bytes()) == data


def test_bad_file_among_good_ones(raw, tmp_path) -> None:
    """fpack stops at the bad file; we report it the same way (status, message) and still
    compress the others. Nothing is written for the bad file."""
    for name in ("a.fits", "c.fits"):
        (tmp_path / name).write_bytes(raw)
    (tmp_path / "b.fits").write_bytes(b"GARBAGE" * 1000)
    mine = ours("a.fits", "b.fits", "c.fits", cwd=tmp_path)
    assert files(tmp_path) == ["a.fits", "a.fits.fz", "b.fits", "c.fits", "c.fits.fz"]
    for name in ("a.fits.fz", "c.fits.fz"):
        (tmp_path / name).unlink()
    theirs = fpack("a.fits", "b.fits", "c.fits", cwd=tmp_path)
    assert files(tmp_path) == ["a.fits", "a.fits.fz", "b.fits", "c.fits"]
    assert mine.returncode == theirs.returncode == 252
    assert mine.stderr.splitlines()[:2] == theirs.stderr.splitlines()[:2]


# --- -O, -S, -D, -F ---------------------------------------------------------------------------


def test_O_names_the_output_and_keeps_the_input(raw, ccd, tmp_path) -> None:
    (tmp_path / "out").mkdir()
    assert ours("-O", "out/x.fz", "ccd.fits", cwd=tmp_path).returncode == 0
    assert (tmp_path / "out" / "x.fz").read_bytes() == compress_fits(raw)
    assert ccd.read_bytes() == raw


def test_S_writes_the_files_to_stdout_in_order(raw, tmp_path) -> None:
    contents = _variants(raw, 3)
    for i, data in enumerate(contents):
        (tmp_path / f"c{i}.fits").write_bytes(data)
    result = ours("-S", "c0.fits", "c1.fits", "c2.fits", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == b""
    assert result.stdout == b"".join(compress_fits(data) for data in contents)
    assert files(tmp_path) == ["c0.fits", "c1.fits", "c2.fits"]


def test_S_with_D_keeps_the_input_like_fpack(raw, ccd, tmp_path) -> None:
    result = ours("-S", "-D", "ccd.fits", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == compress_fits(raw)
    assert b"inputs are kept" in result.stderr
    assert ccd.read_bytes() == raw


def _read_100_bytes_then_close(argv: list[str], cwd: Path) -> tuple[int, bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(), err


def test_S_into_a_closed_pipe_ends_like_fpack(raw, tmp_path) -> None:
    names = [f"c{i}.fits" for i in range(40)]  # more than a pipe buffer of output
    for name in names:
        (tmp_path / name).write_bytes(raw)
    mine = _read_100_bytes_then_close([sys.executable, "-m", "producers.compress", "-S", *names], tmp_path)
    theirs = _read_100_bytes_then_close(["fpack", "-S", *names], tmp_path)
    assert theirs == (-13, b"")  # killed by SIGPIPE, nothing said
    assert mine == (141, b"")  # 128 + SIGPIPE, as a shell reports fpack's, no traceback


def test_stdin_input(raw, tmp_path) -> None:
    result = ours("-S", "-", cwd=tmp_path, stdin=raw)
    assert result.returncode == 0 and result.stdout == compress_fits(raw)
    assert ours("-", cwd=tmp_path, stdin=raw).returncode == 0
    assert (tmp_path / "input.fits.fz").read_bytes() == compress_fits(raw)  # fpack's name


def test_gzipped_input_like_fpack(raw, tmp_path) -> None:
    (tmp_path / "g.fits.gz").write_bytes(gzip.compress(raw))
    assert ours("g.fits.gz", cwd=tmp_path).returncode == 0
    assert (tmp_path / "g.fits.fz").read_bytes() == compress_fits(raw)
    (tmp_path / "g.fits.fz").unlink()
    assert ours("g.fits", cwd=tmp_path).returncode == 0  # the .gz is found under the plain name
    assert (tmp_path / "g.fits.fz").read_bytes() == compress_fits(raw)


def test_D_deletes_the_input_after_a_verified_write(raw, ccd, tmp_path) -> None:
    result = ours("-D", "-v", "ccd.fits", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == b"ccd.fits -> ccd.fits.fz\n"
    assert files(tmp_path) == ["ccd.fits.fz"]
    assert_same_data(funpack_data(tmp_path / "ccd.fits.fz", tmp_path), raw_data(raw))


def test_F_overwrites_the_input_in_place(raw, ccd, tmp_path) -> None:
    inode = ccd.stat().st_ino
    result = ours("-F", "-v", "ccd.fits", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == b"ccd.fits -> ccd.fits\n"
    assert files(tmp_path) == ["ccd.fits"]  # no temp file left behind
    assert ccd.read_bytes() == compress_fits(raw)
    assert ccd.stat().st_ino != inode  # a new file renamed over the old one: atomic
    assert_same_data(funpack_data(ccd, tmp_path), raw_data(raw))


def test_F_with_O_deletes_the_input_like_fpack(raw, ccd, tmp_path) -> None:
    assert ours("-F", "-O", "x.fz", "ccd.fits", cwd=tmp_path).returncode == 0
    assert fpack("-F", "-O", "y.fz", "x.fz", cwd=tmp_path).returncode == 255  # .fz refused
    assert files(tmp_path) == ["x.fz"]
    assert (tmp_path / "x.fz").read_bytes() == compress_fits(raw)


@pytest.fixture
def corrupting_coder(monkeypatch):
    """The coder flips one heap byte: what -D/-F's verification must catch."""
    real = tiled_rice._rice.pack_image

    def corrupt(*args):
        table, heap, longest = real(*args)
        return table, heap[:10] + bytes([heap[10] ^ 0x55]) + heap[11:], longest

    monkeypatch.setattr(tiled_rice._rice, "pack_image", corrupt)


@pytest.mark.parametrize("flag", ["-D", "-F"])
def test_D_and_F_keep_the_input_when_the_written_file_does_not_restore_it(
    raw, ccd, tmp_path, capsys, corrupting_coder, flag
) -> None:
    status = fpack_cli.main([flag, str(ccd)])
    assert status == fpack_cli.COMPRESSION_FAILED
    assert "does not restore" in capsys.readouterr().out
    assert files(tmp_path) == ["ccd.fits"]
    assert ccd.read_bytes() == raw


def test_obsingest_cli_passes_everything_through(raw, ccd, tmp_path, capsys) -> None:
    assert cli_main(["compress", "-v", "-t", "64,4", str(ccd)]) == 0
    assert capsys.readouterr().out == f"{ccd} -> {ccd}.fz\n"
    assert decompress_fits((tmp_path / "ccd.fits.fz").read_bytes()) == raw
    assert cli_main(["compress", "-h", str(ccd)]) == 255  # -h is Hcompress, as for fpack
    assert "Hcompress" in capsys.readouterr().out


def test_command_path_imports_neither_numpy_nor_astropy(ccd, tmp_path) -> None:
    """Start-up is most of a one-CCD call: the command's own modules load only the standard
    library, the C coder and numpy-free FITS code (the rest of the CLI is the lead's)."""
    code = (
        "import sys\n"
        "import obsingest_cli.commands.compress as wrapper\n"
        "assert not [m for m in sys.modules if m.startswith('producers')], 'wrapper is not thin'\n"
        "from producers.compress.fpack_cli import main\n"
        "status = main(['-D', 'ccd.fits'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'astropy', "
        "'fitsio', 'pydantic', 'requests', 'apache_beam', 'matplotlib'})\n"
        # site's .pth files create the bare `google` / `google.cloud` namespaces in every process
        "heavy += [m for m in sys.modules if m.startswith('google.') and m != 'google.cloud']\n"
        "print(status, heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, env=env, check=False
    )
    assert result.stdout.decode().strip().splitlines()[-1] == "0 []", result.stderr
    assert files(tmp_path) == ["ccd.fits.fz"]
