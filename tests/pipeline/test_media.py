"""Media: validated, bounded, content-addressed attachments; never bytes in the ledger."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

import turnledger.pipeline.media as media_module
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MediaAttached
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.media import MediaRef, MediaStore, attachment_event
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.media import MIB, MediaRefused

PAYLOAD = b"\x89PNG\r\n\x1a\nUNIQUE-MEDIA-PAYLOAD-7f3a" * 8


@pytest.fixture(name="setup")
def _setup(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "photo.png").write_bytes(PAYLOAD)
    (root / "copy.png").write_bytes(PAYLOAD)
    (root / "empty.png").write_bytes(b"")
    (root / "report.pdf").write_bytes(b"%PDF-1.4 report")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(b"secret")
    (root / "link.png").symlink_to(outside / "secret.png")
    return MediaStore(tmp_path / "data"), root, tmp_path


def stored_files(store: MediaStore) -> list[str]:
    return (
        sorted(p.name for p in store.media_dir.iterdir())
        if store.media_dir.exists()
        else []
    )


def test_load_hashes_and_stores_content_addressed(setup):
    store, root, tmp = setup
    ref = store.load("photo.png", root=root)
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    assert ref == MediaRef(
        file_name="photo.png",
        mime="image/png",
        kind="image",
        size_bytes=len(PAYLOAD),
        sha256=sha,
        storage_ref=f"media/{sha}",
    )
    assert (tmp / "data" / "media" / sha).read_bytes() == PAYLOAD
    assert store.path_of(ref.storage_ref) == tmp / "data" / "media" / sha


def test_same_bytes_share_one_file(setup):
    store, root, _ = setup
    first = store.load("photo.png", root=root)
    second = store.load("copy.png", root=root)
    third = store.ingest("inline.png", PAYLOAD)
    assert isinstance(first, MediaRef)
    assert first.sha256 == second.sha256 == third.sha256
    assert second.file_name == "copy.png"
    assert stored_files(store) == [first.sha256]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("empty.png", "empty"),
        ("nope.png", "missing"),
        ("../outside/secret.png", "parent_escape"),
        ("{tmp}/outside/secret.png", "outside_root"),
        ("link.png", "symlink_escape"),
        ("", "empty"),
    ],
)
def test_refusals_say_why_and_store_nothing(setup, path, reason):
    store, root, tmp = setup
    refused = store.load(path.format(tmp=tmp), root=root)
    assert isinstance(refused, MediaRefused)
    assert refused.reason == reason
    assert refused.detail
    assert stored_files(store) == []


def test_size_is_bounded_before_any_byte_is_read(setup, monkeypatch):
    store, root, _ = setup

    def never_open(*args, **kwargs):
        raise AssertionError("a too-large file must not be opened")

    monkeypatch.setattr(media_module.os, "open", never_open)
    refused = store.load("photo.png", root=root, max_bytes=10)
    assert refused == MediaRefused(
        reason="too_large",
        detail=f"'photo.png' has {len(PAYLOAD)} bytes; the image limit is 10 bytes",
    )


def test_images_have_their_own_bound(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big.png").write_bytes(b"\0" * (MIB + 1))
    (root / "big.bin").write_bytes(b"\0" * (MIB + 1))
    store = MediaStore(tmp_path / "data")
    image = store.load("big.png", root=root, max_image_size_mb=1)
    assert isinstance(image, MediaRefused)
    assert image.reason == "too_large"
    other = store.load("big.bin", root=root, max_image_size_mb=1)
    assert isinstance(other, MediaRef)
    assert (other.kind, other.mime) == ("unknown", "application/octet-stream")


def test_documents_and_given_mime_types(setup):
    store, root, _ = setup
    pdf = store.load("report.pdf", root=root)
    assert isinstance(pdf, MediaRef)
    assert (pdf.kind, pdf.mime) == ("document", "application/pdf")
    audio = store.ingest("voice", b"OggS...", mime_type="audio/ogg")
    assert isinstance(audio, MediaRef)
    assert (audio.kind, audio.mime, audio.file_name) == ("audio", "audio/ogg", "voice")
    assert store.ingest("x.png", b"") == MediaRefused(
        reason="empty", detail="'x.png' has no bytes"
    )


def test_path_of_accepts_only_stored_media_references(setup):
    store, root, _ = setup
    ref = store.load("photo.png", root=root)
    assert isinstance(ref, MediaRef)
    assert store.path_of(ref.storage_ref) is not None
    assert store.path_of("media/" + "0" * 64) is None
    assert store.path_of("media/../l.db") is None
    assert store.path_of(f"other/{ref.sha256}") is None


def test_the_ledger_gets_metadata_and_a_reference_never_bytes(setup):
    store, root, tmp = setup
    ref = store.load("photo.png", root=root)
    assert isinstance(ref, MediaRef)
    event = attachment_event(ref, turn_id="t1")
    assert event == MediaAttached(
        turn_id="t1",
        file_name="photo.png",
        mime="image/png",
        kind="image",
        size_bytes=len(PAYLOAD),
        sha256=ref.sha256,
        storage_ref=ref.storage_ref,
    )
    ledger_path = tmp / "l.db"
    ledger = open_store(str(ledger_path))
    stream = session_stream_id("agent", "s1")
    ledger.append(stream, [event], expected_version=0)
    [recorded] = ledger.read_stream(stream)
    ledger.close()
    assert isinstance(recorded, Recorded)
    assert recorded.event == event
    marker = b"UNIQUE-MEDIA-PAYLOAD"
    assert marker not in msgspec.json.encode(event)
    written = b"".join(p.read_bytes() for p in tmp.glob("l.db*"))
    assert marker not in written
    assert ref.sha256.encode() in written


def test_summary_instead_of_reference(setup):
    store, root, _ = setup
    ref = store.load("photo.png", root=root)
    assert isinstance(ref, MediaRef)
    event = attachment_event(ref, turn_id="t1", summary="a cat", keep_reference=False)
    assert (event.storage_ref, event.summary) == (None, "a cat")
    with pytest.raises(ValueError, match="Expected a summary"):
        attachment_event(ref, turn_id="t1", keep_reference=False)


def test_the_store_bound_applies_when_a_call_gives_none(tmp_path):
    """``[runtime] max_media_bytes`` reaches every load and ingest through the store."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.bin").write_bytes(b"x" * 11)
    store = MediaStore(tmp_path / "data", max_bytes=10)
    loaded = store.load("a.bin", root=root)
    assert isinstance(loaded, MediaRefused)
    assert loaded.reason == "too_large"
    ingested = store.ingest("b.bin", b"y" * 11)
    assert isinstance(ingested, MediaRefused)
    assert ingested.reason == "too_large"
    assert isinstance(store.ingest("c.bin", b"z" * 10), MediaRef)
    assert isinstance(store.load("a.bin", root=root, max_bytes=11), MediaRef)
    assert (
        not (tmp_path / "data" / "media").exists()
        or len(list((tmp_path / "data" / "media").iterdir())) == 2
    )


async def test_bootstrap_media_honours_max_media_bytes(tmp_path):
    """``[runtime] max_media_bytes`` bounds the runtime's media store; a turn records it."""
    config = parse_config(
        f'ledger = "{tmp_path / "l.db"}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[runtime]\nmax_media_bytes = 10\n[memory]\nautosave = false\n"
    )
    provider = ScriptedProvider([ChatResponse(text="A small picture.")])
    async with bootstrap(config, provider=provider) as runtime:
        refused = runtime.media.ingest("big.png", b"x" * 11)
        assert isinstance(refused, MediaRefused)
        assert refused.reason == "too_large"
        ref = runtime.media.ingest("small.bin", b"y" * 10)
        assert isinstance(ref, MediaRef)
        outcome = await runtime.engine.run_turn(
            "a", "s", "look", attachments=[attachment_event(ref, turn_id="")]
        )
        assert outcome.completed
        store = runtime.store
        recorded = [
            r.event
            for r in store.read_stream(session_stream_id("a", "s"))
            if isinstance(r.event, MediaAttached)
        ]
        assert [e.sha256 for e in recorded] == [ref.sha256]
