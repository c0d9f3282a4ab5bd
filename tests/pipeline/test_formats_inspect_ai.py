"""Issue #11 item 4 (one format of it): Inspect AI eval logs, `.json` and zipped `.eval`.

Public files: Inspect AI's own eval-log fixtures (``tests/fixtures/inspect_ai``,
MIT, with ``PROVENANCE.md``), counted by the chat pairing rule.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import count_pairing, parse_transcript, read_transcript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inspect_ai"


def _counts(parsed) -> tuple[int, int, int, int, int]:
    c = count_pairing(parsed)
    return (
        c.conversations,
        c.tool_calls,
        c.tool_results,
        c.unpaired_calls,
        c.unpaired_results,
    )


def test_a_tool_error_log_counts_its_results_and_their_errors():
    """11 tool messages with parsing errors and no call: 11 unpaired results."""
    parsed = read_transcript(FIXTURES / "log_tool_call_error.json")
    assert parsed.format == "inspect-ai"
    assert _counts(parsed) == (1, 0, 11, 0, 11)
    results = [r for m in parsed.conversations[0].messages for r in m.tool_results]
    assert all(r.is_error for r in results)
    assert {r.name for r in results} == {"bash"}


def test_the_json_and_the_zipped_eval_log_read_the_same():
    """The `.eval` archive's samples are the `.json` log's samples."""
    from_json = read_transcript(FIXTURES / "log_formats.json")
    from_eval = read_transcript(FIXTURES / "log_formats.eval")
    assert (from_json.format, from_eval.format) == ("inspect-ai", "inspect-ai")
    roles = [m.role for m in from_json.conversations[0].messages]
    assert roles == ["system", "user", "assistant"]
    assert [c.messages for c in from_eval.conversations] == [
        c.messages for c in from_json.conversations
    ]
    assert _counts(from_eval) == (1, 0, 0, 0, 0)


def test_an_inspect_log_imports_with_its_system_prompt(capsys, tmp_path):
    """Imported, the sample's system message is a system_prompt.set; audit exit 1."""
    db = str(tmp_path / "l.db")
    assert (
        main(["--db", db, "import", str(FIXTURES / "log_formats.eval"), "--json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    session = report["sessions"][0]["session"]
    assert main(["--db", db, "history", session, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history[0]["role"] == "system"
    code = main(["audit", str(FIXTURES / "log_tool_call_error.json"), "--json"])
    assert code == 1
    assert json.loads(capsys.readouterr().out)["unpaired_results"] == 11


def test_a_truncated_eval_archive_is_refused_whole():
    """An archive we cannot read fully is refused, never half-read."""
    data = (FIXTURES / "log_formats.eval").read_bytes()
    with pytest.raises(ValueError, match="an archive that cannot be read"):
        parse_transcript(data[: len(data) // 2], path="cut.eval")


def test_a_sample_entry_that_is_not_json_is_refused():
    """One bad sample refuses the archive."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("header.json", "{}")
        archive.writestr("samples/1_epoch_1.json", "{not json")
    with pytest.raises(ValueError, match="a sample that is not JSON"):
        parse_transcript(buffer.getvalue(), path="bad.eval")


def test_a_zip_that_is_no_eval_log_is_refused():
    """Any other zip archive (a .docx, say) is refused, not read as zero samples."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", "<w/>")
    with pytest.raises(ValueError, match=r"a zip archive without `header\.json`"):
        parse_transcript(buffer.getvalue(), path="report.docx")
