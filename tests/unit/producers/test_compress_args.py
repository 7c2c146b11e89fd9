"""fpack's command line as ``obsingest compress`` reads it (producers/compress/fpack_args.py):
each flag, fpack's output names and tile rules, and publishing through a checked temp file
(``fpack_cli.publish``). In-process and fast; the comparisons with the real fpack
binary are in test_compress_cli."""

from __future__ import annotations

from pathlib import Path

import pytest

from producers.compress.fpack_args import CommandLineError, Options, output_name, parse_args, preflight
from producers.compress.fpack_cli import publish
from producers.compress.tiled_rice import rows_tiling, tile_shape

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["a.fits"], Options(files=["a.fits"])),
        (["-r", "-v", "a", "b"], Options(files=["a", "b"], verbose=True)),
        (["-F", "-Y", "a"], Options(files=["a"], clobber=True)),
        (["-D", "a"], Options(files=["a"], delete_input=True)),
        (["-S", "-C", "a"], Options(files=["a"], to_stdout=True, checksum=False)),
        (["-O", "x.fz", "a"], Options(files=["a"], outfile="x.fz")),
        (["-w", "a"], Options(files=["a"], tiling=None)),
        (["-t", "100,5", "a"], Options(files=["a"], tiling=(100, 5))),
        (["-t", "0", "a"], Options(files=["a"], tiling=(0,))),
        (["-t", ",", "a"], Options(files=["a"], tiling=(0,))),
        (["--threads", "3", "a"], Options(files=["a"], threads=3)),
        (["--threads=1", "a"], Options(files=["a"], threads=1)),
        (["-v", "-", "a"], Options(files=["-", "a"], verbose=True)),  # "-" is stdin, a file
        (["-H", "whatever"], Options(show="help")),
        (["--help"], Options(show="help")),
        (["-V"], Options(show="version")),
    ],
)
def test_flags(argv, expected) -> None:
    assert parse_args(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "usage: obsingest compress"),
        (["-v"], "Error: no FITS files to compress"),
        (["-Z", "a"], "Error: unknown command line flag `-Z'"),
        (["-r", "-r", "a"], "Error: multiple compression flags"),
        (["-t", "5", "-w", "a"], "Error: multiple tile specifications"),
        (["-t", "5x5", "a"], "Error: `-t' requires comma separated tile dims"),
        (["-t", "1,2,3,4,5,6,7", "a"], "Error: too many dimensions for `-t', max=6"),
        (["-t"], "usage: obsingest compress"),
        (["-O"], "usage: obsingest compress"),
        (["-O", "x", "-S", "a"], "Error: -O option may not be used with -S or -T"),
        (["--threads", "0", "a"], "Error: --threads needs a whole number >= 1"),
        (["--threads=two", "a"], "Error: --threads needs a whole number >= 1"),
        (["-h", "a"], "Error: `-h': Hcompress is not supported"),
        (["-g2", "a"], "Error: `-g2': GZIP_2 tiles are not supported"),
        (["-q0", "4", "a"], "Error: `-q0': quantising floating-point images is lossy"),
        (["-i2f", "a"], "Error: `-i2f': quantising integer images is lossy"),
        (["-L", "a"], "Error: `-L': listing is not supported"),
        (["-tableonly", "a"], "Error: `-tableonly': table compression is not supported"),
    ],
)
def test_command_line_errors_exit_255_with_fpacks_message(argv, message) -> None:
    with pytest.raises(CommandLineError) as err:
        parse_args(argv)
    assert err.value.code == 255
    assert err.value.message.startswith(message)


@pytest.mark.parametrize(
    ("name", "clobber", "expected"),
    [
        ("a.fits", False, "a.fits.fz"),
        ("a.fits", True, "a.fits"),
        ("dir/a.fits.gz", False, "dir/a.fits.fz"),
        ("a.fits.bz2", False, "a.fits.fz"),
        ("a.imh", False, "a.fits.fz"),
        ("-", False, "input.fits.fz"),
    ],
)
def test_output_names_are_fpacks(name, clobber, expected) -> None:
    assert output_name(name, clobber) == expected


def test_preflight_resolves_gz_and_refuses_before_touching_anything(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.fits").write_bytes(b"x")
    Path("b.fits.gz").write_bytes(b"x")
    opts = parse_args(["a.fits", "b.fits", "-"])
    assert preflight(opts) == [
        ("a.fits", "a.fits", "a.fits.fz"),
        ("b.fits", "b.fits.gz", "b.fits.fz"),
        ("-", "-", "input.fits.fz"),
    ]
    assert preflight(parse_args(["-S", "a.fits"])) == [("a.fits", "a.fits", "-")]
    Path("b.fits.fz").write_bytes(b"x")
    with pytest.raises(CommandLineError, match="output file already exists"):
        preflight(parse_args(["a.fits", "b.fits"]))
    assert preflight(parse_args(["-F", "a.fits"])) == [("a.fits", "a.fits", "a.fits")]


@pytest.mark.parametrize(
    ("tiling", "axes", "expected"),
    [
        (None, (576, 2048), (576, 2048)),  # -w: whole image
        ((0,), (576, 2048), (576, 1)),  # fpack's default: row by row
        ((0, 1), (576, 2048), (576, 1)),
        ((100,), (576, 2048), (100, 1)),
        ((100, 0), (576, 2048), (100, 1)),  # 0 on a later axis means 1
        ((100, 50), (576, 2048), (100, 50)),
        ((5000, 5000), (576, 2048), (576, 2048)),  # clipped to the image
        ((7, 3), (40,), (7, 1)),  # 1-D image
        (rows_tiling(8), (576, 2048), (576, 8)),
    ],
)
def test_tile_shapes_follow_fpack(tiling, axes, expected) -> None:
    assert tile_shape(tiling, axes) == expected


def test_publish_replaces_atomically_and_cleans_up_on_failure(tmp_path) -> None:
    target = tmp_path / "out.fz"
    publish(target, [b"ab", b"cd"], durable=True)
    assert target.read_bytes() == b"abcd"
    seen = []

    def refuse(path: Path) -> None:
        seen.append(path.read_bytes())
        raise ValueError("does not restore")

    with pytest.raises(ValueError, match="does not restore"):
        publish(target, [b"new"], check=refuse)
    assert seen == [b"new"]  # the check saw the written temp file
    assert target.read_bytes() == b"abcd"  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fz"]  # no temp file left
    with pytest.raises(FileNotFoundError):
        publish(tmp_path / "missing" / "x.fz", [b"x"])
