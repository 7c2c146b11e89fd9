"""``infra/containers/test-containers.sh`` removes the containers its own run left behind and no
one else's: other sessions on the same Docker engine (another checkout's ``make test``, a
developer's facility) keep theirs.

The script runs as it is, on a stand-in ``docker`` (a shell script over a table of containers
and their labels) and a stand-in Python (the image check and the pytest run; the pytest run
"starts" a container labelled as ``infra.containers.names.labels`` labels it and, in one case,
leaves it behind). No engine is needed or touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.containers.names import RUN_ENV, RUN_LABEL, SESSION_LABEL, labels

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]

#: docker: `info` answers; `ps -a[q] --filter label=K=V [--format F]` lists the table's matches;
#: `rm -f ID...` removes them; every call is logged
DOCKER = r"""#!/usr/bin/env bash
echo "$*" >>"$STATE/calls"
case $1 in
  info|network) exit 0 ;;
  ps)
    filter=${4#label=}
    while read -r id session run; do
      case $filter in
        org.obsingest.session) hit=1 ;;
        org.obsingest.session=*) [[ $filter == "org.obsingest.session=$session" ]] && hit=1 ;;
        org.obsingest.run=*) [[ $filter == "org.obsingest.run=$run" ]] && hit=1 ;;
      esac
      [[ -n ${hit:-} ]] && echo "$id"
      hit=
    done <"$STATE/containers"
    ;;
  rm)
    shift 2
    for id in "$@"; do
      echo "$id" >>"$STATE/removed"
      grep -v "^$id " "$STATE/containers" >"$STATE/c.tmp"; mv "$STATE/c.tmp" "$STATE/containers"
    done
    ;;
esac
"""

#: python: `-m infra.containers.images` succeeds; `-m pytest ...` starts one container of its
#: own with the labels the project gives it (its run id from the environment), and leaves it
#: behind when $LEAVE is set
PYTHON = r"""#!/usr/bin/env bash
if [[ $2 == pytest ]]; then
  echo "$OBSINGEST_TC_RUN" >"$STATE/run"
  echo "mine obsingest-mysession ${OBSINGEST_TC_RUN:--}" >>"$STATE/containers"
  if [[ -z ${LEAVE:-} ]]; then
    grep -v '^mine ' "$STATE/containers" >"$STATE/c.tmp"
    mv "$STATE/c.tmp" "$STATE/containers"
  fi
fi
exit 0
"""


def _run(tmp_path: Path, leave: bool) -> tuple[int, Path, str]:
    work, state, bin_dir = tmp_path / "checkout", tmp_path / "state", tmp_path / "bin"
    (work / "infra" / "containers").mkdir(parents=True)
    state.mkdir()
    bin_dir.mkdir()
    for script in ("test-containers.sh", "engine.sh"):
        shutil.copy(ROOT / "infra" / "containers" / script, work / "infra" / "containers")
    for name, text in (("docker", DOCKER), ("python", PYTHON)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    # another session's containers on the same engine: one of another run, one of none
    (state / "containers").write_text("theirs obsingest-other run-elsewhere-1\nplain obsingest-dev -\n")
    env = {
        **{k: v for k, v in os.environ.items() if k != RUN_ENV},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STATE": str(state),
        "LEAVE": "1" if leave else "",
        "OBSINGEST_ENGINE_BEFORE": "running, not ours",
    }
    result = subprocess.run(
        ["bash", "infra/containers/test-containers.sh", str(bin_dir / "python")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, state, result.stderr


def test_a_leftover_of_this_run_is_removed_and_fails_the_run_others_stay(tmp_path: Path) -> None:
    code, state, stderr = _run(tmp_path, leave=True)
    assert code == 1, stderr
    assert "containers left behind" in stderr
    assert (state / "removed").read_text().split() == ["mine"]
    remaining = (state / "containers").read_text()
    assert "theirs " in remaining and "plain " in remaining
    run = (state / "run").read_text().strip()
    assert run.startswith("run-")
    filters = [c.split()[3] for c in (state / "calls").read_text().splitlines() if c.startswith("ps")]
    assert filters and set(filters) == {f"label={RUN_LABEL}={run}"}


def test_a_clean_run_removes_nothing_and_passes(tmp_path: Path) -> None:
    code, state, stderr = _run(tmp_path, leave=False)
    assert code == 0, stderr
    assert not (state / "removed").exists()
    assert len((state / "containers").read_text().splitlines()) == 2


def test_containers_carry_the_run_label_only_when_a_run_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_ENV, raising=False)
    assert labels("obsingest-s1") == {SESSION_LABEL: "obsingest-s1"}
    monkeypatch.setenv(RUN_ENV, "run-x")
    assert labels("obsingest-s1") == {SESSION_LABEL: "obsingest-s1", RUN_LABEL: "run-x"}
