"""``[runtime] max_input_bytes``: a configured bound on every input file (issue #17).

The real CLI in-process on a real SQLite ledger and a real ``turnledger.toml``:
a file one byte over a small configured limit is refused in one line with exit
2 and nothing written; a file exactly at the limit is read. A bad value of the
key is refused at config load, naming key and value. The configuration file
itself is bounded by ``DEFAULT_MAX_INPUT_BYTES`` (it is read before the key
exists).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnledger.ledger.store import open_store
from turnledger.pipeline.audit import audit_file
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import load_config
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.formats import read_transcript
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, InputFileError
from turnledger.pipeline.providers.factory import make_provider
from turnledger.pipeline.providers.scripted import ScriptedProvider

LIMIT = 400

TRANSCRIPT = json.dumps(
    [
        {"role": "user", "content": "When is the release?"},
        {"role": "assistant", "content": "On Friday."},
    ]
)
SCRIPT = json.dumps({"steps": [{"text": "On Friday."}]})


def padded(path: Path, text: str, size: int) -> Path:
    """Write ``text`` padded with trailing spaces to exactly ``size`` bytes."""
    data = text.encode()
    assert len(data) <= size
    path.write_bytes(data + b" " * (size - len(data)))
    assert path.stat().st_size == size
    return path


@pytest.fixture(name="work")
def _work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", "TURNLEDGER_CIPHER_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "turnledger.toml").write_text(
        f"[runtime]\nmax_input_bytes = {LIMIT}\n", encoding="utf-8"
    )
    return tmp_path


def events(db: Path) -> int:
    if not db.exists():
        return 0
    with open_store(str(db)) as store:
        return sum(1 for _ in store.iter_all())


def cli(capsys, db: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_refusal(capsys, db: Path, *args: str) -> str:
    before = events(db)
    code, out, err = cli(capsys, db, *args)
    assert code == 2, (args, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("turnledger: ")
    assert "Traceback" not in err
    assert events(db) == before
    return lines[0]


def test_the_default_is_the_constant():
    """With no key, the bound is the constant it always was."""
    assert load_config(None).runtime.max_input_bytes == DEFAULT_MAX_INPUT_BYTES


@pytest.mark.parametrize("value", ["0", "-1", str((1 << 40) + 1)])
def test_a_bad_value_is_refused_at_load_naming_key_and_value(capsys, work, value):
    (work / "turnledger.toml").write_text(
        f"[runtime]\nmax_input_bytes = {value}\n", encoding="utf-8"
    )
    padded(work / "t.json", TRANSCRIPT, 200)
    line = one_line_refusal(capsys, work / "l.db", "import", "t.json")
    assert "runtime.max_input_bytes" in line
    assert f"found {value}" in line
    assert not (work / "l.db").exists()


def test_a_non_integer_value_is_refused_naming_the_key(capsys, work):
    (work / "turnledger.toml").write_text(
        '[runtime]\nmax_input_bytes = "big"\n', encoding="utf-8"
    )
    line = one_line_refusal(capsys, work / "l.db", "import", "t.json")
    assert "max_input_bytes" in line


def test_import_one_byte_over_the_limit_is_refused(capsys, work):
    padded(work / "t.json", TRANSCRIPT, LIMIT + 1)
    line = one_line_refusal(capsys, work / "l.db", "import", "t.json")
    assert line == (
        f"turnledger: Expected a transcript of at most {LIMIT} bytes at 't.json',"
        f" found {LIMIT + 1} bytes"
    )


def test_import_at_the_limit_is_read(capsys, work):
    padded(work / "t.json", TRANSCRIPT, LIMIT)
    code, out, err = cli(
        capsys, work / "l.db", "import", "t.json", "--agent", "ops", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["sessions"]
    assert events(work / "l.db") > 0


def test_audit_one_byte_over_the_limit_is_refused(capsys, work):
    padded(work / "t.json", TRANSCRIPT, LIMIT + 1)
    line = one_line_refusal(capsys, work / "l.db", "audit", "t.json")
    assert f"at most {LIMIT} bytes" in line
    assert f"found {LIMIT + 1} bytes" in line


def test_audit_at_the_limit_is_read(capsys, work):
    padded(work / "t.json", TRANSCRIPT, LIMIT)
    code, out, err = cli(capsys, work / "l.db", "audit", "t.json", "--json")
    assert code == 0, err
    assert json.loads(out)["conversations"] == 1


def test_run_script_one_byte_over_the_limit_is_refused(capsys, work):
    padded(work / "s.json", SCRIPT, LIMIT + 1)
    line = one_line_refusal(
        capsys, work / "l.db", "run", "s.json", "--agent", "ops", "--turn", "hi"
    )
    assert line == (
        f"turnledger: Expected a provider script of at most {LIMIT} bytes at"
        f" 's.json', found {LIMIT + 1} bytes"
    )


def test_run_script_at_the_limit_is_read(capsys, work):
    padded(work / "s.json", SCRIPT, LIMIT)
    code, out, err = cli(
        capsys, work / "l.db", "run", "s.json", "--agent", "ops", "--turn", "hi"
    )
    assert code == 0, err
    assert "On Friday." in out
    assert events(work / "l.db") > 0


def test_chat_provider_script_over_the_limit_is_refused(capsys, work, monkeypatch):
    """A configured scripted provider's file is bounded by the same key."""
    padded(work / "s.json", SCRIPT, LIMIT + 1)
    (work / "turnledger.toml").write_text(
        f"[runtime]\nmax_input_bytes = {LIMIT}\n\n"
        '[providers.play]\nkind = "scripted"\nscript = "s.json"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("hi\n"))
    line = one_line_refusal(capsys, work / "l.db", "chat", "--agent", "ops")
    assert f"found {LIMIT + 1} bytes" in line


def test_the_python_api_takes_the_bound(tmp_path):
    """read_transcript, audit_file, ScriptedProvider.from_file, make_provider."""
    over = padded(tmp_path / "t.json", TRANSCRIPT, LIMIT + 1)
    script = padded(tmp_path / "s.json", SCRIPT, LIMIT + 1)
    with pytest.raises(InputFileError, match=f"at most {LIMIT} bytes"):
        read_transcript(over, max_bytes=LIMIT)
    with pytest.raises(InputFileError, match=f"at most {LIMIT} bytes"):
        audit_file(over, max_bytes=LIMIT)
    with pytest.raises(InputFileError, match=f"at most {LIMIT} bytes"):
        ScriptedProvider.from_file(script, max_bytes=LIMIT)
    with pytest.raises(InputFileError, match=f"at most {LIMIT} bytes"):
        make_provider("scripted", script=str(script), max_bytes=LIMIT)
    assert read_transcript(over, max_bytes=LIMIT + 1).conversations
    assert audit_file(over, max_bytes=LIMIT + 1).conversations == 1
    ScriptedProvider.from_file(script, max_bytes=LIMIT + 1)
    assert issubclass(InputFileError, PipelineError)
