"""The one atomic-write helper: every writer leaves the old file and no temp file when it fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentrl_recipe import atomic_io as io


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_atomic_path_leaves_old_file_on_error(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    io.atomic_write_parquet(path, [{"a": 1}])
    with pytest.raises(RuntimeError), io.atomic_path(path) as tmp:
        pq.write_table(pa.table({"a": [2]}), tmp)
        raise RuntimeError("killed mid-write")
    assert pq.read_table(path).to_pylist() == [{"a": 1}]
    assert _names(tmp_path) == ["out.parquet"]  # no temp file left behind


class _Unserializable:
    def __repr__(self) -> str:
        raise RuntimeError("cannot render")


@pytest.mark.parametrize(
    "write",
    [
        lambda p: io.atomic_write_json(p, {"x": _Unserializable()}, default=repr),
        lambda p: io.atomic_write_jsonl(p, [{"ok": 1}, {"x": _Unserializable()}], default=repr),
        lambda p: io.atomic_write_text(p, 12345),  # type: ignore[arg-type]
        lambda p: io.atomic_write_bytes(p, "not bytes"),  # type: ignore[arg-type]
        lambda p: io.atomic_write_parquet(p, []),
    ],
    ids=["json", "jsonl", "text", "bytes", "parquet-empty"],
)
def test_a_failing_writer_leaves_the_old_file(tmp_path: Path, write) -> None:
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        write(path)
    assert path.read_text() == "old\n"
    assert _names(tmp_path) == ["out.txt"]


def test_writers_create_folders_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.json"
    io.atomic_write_json(path, {"b": 1, "a": "é"})
    assert path.read_text(encoding="utf-8") == '{\n  "b": 1,\n  "a": "é"\n}\n'
    io.atomic_write_json(path, {"b": 1, "a": Path("x")}, sort_keys=True)
    assert path.read_text() == '{\n  "a": "x",\n  "b": 1\n}\n'
    io.atomic_write_jsonl(path.with_suffix(".jsonl"), [{"a": 1}, {"b": "é"}], ensure_ascii=True)
    assert path.with_suffix(".jsonl").read_text() == '{"a": 1}\n{"b": "\\u00e9"}\n'
    io.atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert _names(path.parent) == ["out.json", "out.jsonl"]


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    reference = tmp_path / "plain.txt"
    reference.write_text("x")
    io.atomic_write_text(tmp_path / "atomic.txt", "x")
    assert (tmp_path / "atomic.txt").stat().st_mode == reference.stat().st_mode


def test_save_figure_writes_a_png_and_closes_the_figure(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = tmp_path / "f.png"
    io.save_figure(fig, path, dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
    assert _names(tmp_path) == ["f.png"]


def test_importing_it_pulls_in_no_heavy_module() -> None:
    code = (
        "import sys, agentrl_recipe.atomic_io as m; "
        "print(json.dumps(sorted(k for k in ('pyarrow', 'matplotlib', 'numpy', 'pandas') if k in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []
