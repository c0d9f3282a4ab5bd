"""Media kind, MIME, byte bounds and path validation (§7)."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given, settings

from tests.policies.strategies_memory import (
    ROOT,
    adversarial_paths,
    make_resolve,
    symlink_maps,
)
from turnledger.policies.media import (
    DEFAULT_MAX_MEDIA_BYTES,
    MIB,
    MediaAccepted,
    MediaConfigError,
    MediaRefused,
    admit_media_file,
    guess_mime_type,
    make_media_checker,
    media_kind,
)

AUDIO = ["flac", "mp3", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm"]
IMAGE = ["png", "jpg", "jpeg", "gif", "bmp", "webp", "heic", "tiff", "svg"]
VIDEO = ["mp4", "mkv", "avi", "mov", "wmv", "flv"]


class TestMediaKind:
    @pytest.mark.parametrize(
        ("extension", "kind"),
        [(ext, "audio") for ext in AUDIO]
        + [(ext, "image") for ext in IMAGE]
        + [(ext, "video") for ext in VIDEO],
    )
    def test_extension_table(self, extension, kind):
        """Every extension of the reference table maps to its kind, any case."""
        assert media_kind(f"clip.{extension}") == kind
        assert media_kind(f"CLIP.{extension.upper()}") == kind

    @pytest.mark.parametrize(
        ("mime", "kind"),
        [
            ("audio/x-custom", "audio"),
            ("IMAGE/PNG", "image"),
            (" video/quicktime", "video"),
        ],
    )
    def test_mime_prefix_wins_over_extension(self, mime, kind):
        """A media MIME prefix decides, case-insensitively."""
        assert media_kind("file.txt", mime) == kind

    def test_non_media_mime_falls_through_to_extension(self):
        """application/octet-stream says nothing; the extension decides."""
        assert media_kind("a.mp3", "application/octet-stream") == "audio"

    @pytest.mark.parametrize(
        "name",
        ["README", "archive.tar.gz", "dir.mp3/file", "dir\\x.png\\file", ".", ""],
    )
    def test_unknown(self, name):
        """No dot, an unknown extension or a dotted directory give unknown."""
        assert media_kind(name) == "unknown"

    def test_extension_of_last_component(self):
        """Only the last path component's extension counts."""
        assert media_kind("a.b/c\\photo.JPG") == "image"


class TestGuessMimeType:
    @pytest.mark.parametrize(
        ("name", "mime"),
        [
            ("a.pdf", "application/pdf"),
            (
                "a.xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
            (
                "a.docx",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            ),
            ("a.csv", "text/csv"),
            ("a.png", "image/png"),
            ("a.jpg", "image/jpeg"),
            ("a.jpeg", "image/jpeg"),
            ("a.txt", "text/plain"),
            ("PHOTO.PNG", "image/png"),
            ("a.mp3", "application/octet-stream"),
            ("noext", "application/octet-stream"),
        ],
    )
    def test_table_case_insensitive(self, name, mime):
        """The from_file table, fixed to ignore case."""
        assert guess_mime_type(name) == mime


class TestMediaChecker:
    def test_accepts_within_bounds_and_guesses_mime(self):
        """A non-empty file under its bound is accepted with its figures."""
        check = make_media_checker()
        assert check("a.png", 10, None) == MediaAccepted(
            file_name="a.png", kind="image", mime_type="image/png", size=10
        )
        assert check("a.bin", 3, "audio/ogg") == MediaAccepted(
            file_name="a.bin", kind="audio", mime_type="audio/ogg", size=3
        )

    def test_empty_is_refused(self):
        """Zero bytes is a refusal, not an attachment."""
        assert make_media_checker()("a.png", 0, None) == MediaRefused(
            reason="empty", detail="'a.png' has no bytes"
        )

    def test_image_bound_defaults_to_five_mib(self):
        """Images are bounded by max_image_size_mb (5 MiB by default)."""
        check = make_media_checker()
        assert isinstance(check("a.png", 5 * MIB, None), MediaAccepted)
        assert check("a.png", 5 * MIB + 1, None) == MediaRefused(
            reason="too_large",
            detail="'a.png' has 5242881 bytes; the image limit is 5242880 bytes",
        )

    def test_other_media_bounded_by_max_bytes(self):
        """Non-images are bounded by max_bytes."""
        check = make_media_checker()
        assert isinstance(check("a.mp4", DEFAULT_MAX_MEDIA_BYTES, None), MediaAccepted)
        refused = check("a.mp4", DEFAULT_MAX_MEDIA_BYTES + 1, None)
        assert isinstance(refused, MediaRefused)
        assert refused.reason == "too_large"

    @pytest.mark.parametrize(
        ("setting", "bound"), [(0, MIB), (-3, MIB), (50, 20 * MIB)]
    )
    def test_image_setting_clamped_to_1_to_20(self, setting, bound):
        """max_image_size_mb is clamped to 1..20 like the reference."""
        check = make_media_checker(max_bytes=100 * MIB, max_image_size_mb=setting)
        assert isinstance(check("a.gif", bound, None), MediaAccepted)
        assert isinstance(check("a.gif", bound + 1, None), MediaRefused)

    def test_image_bound_never_exceeds_max_bytes(self):
        """The smaller of the two bounds applies to images."""
        check = make_media_checker(max_bytes=100)
        assert isinstance(check("a.png", 101, None), MediaRefused)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"max_bytes": 0}, "Expected max_bytes to be an int >= 1, found 0"),
            ({"max_bytes": True}, "Expected max_bytes to be an int, found True"),
            (
                {"max_image_size_mb": 1.5},
                "Expected max_image_size_mb to be an int, found 1.5",
            ),
        ],
    )
    def test_bad_config(self, kwargs, message):
        """Bad bounds are typed errors naming expected and found."""
        with pytest.raises(MediaConfigError, match=message):
            make_media_checker(**kwargs)

    @pytest.mark.parametrize("size", [-1, True, 1.0])
    def test_bad_size(self, size):
        """A size that is not an int >= 0 is a typed error."""
        with pytest.raises(MediaConfigError, match="Expected size to be an int >= 0"):
            make_media_checker()("a.png", size, None)


def _sizes(size: int | None):
    return lambda _path: size


class TestAdmitMediaFile:
    def test_accepts_with_resolved_path(self):
        """An accepted file carries the resolved path to read."""
        resolve = make_resolve({f"{ROOT}/in": f"{ROOT}/real"})
        decision = admit_media_file(
            "in/cat.PNG",
            root=ROOT,
            resolve=resolve,
            size_of=_sizes(10),
            check=make_media_checker(),
        )
        assert decision == MediaAccepted(
            file_name="cat.PNG",
            kind="image",
            mime_type="image/png",
            size=10,
            path=f"{ROOT}/real/cat.PNG",
        )

    def test_path_refusal_is_a_media_refusal(self):
        """A path outside the root is refused with the path reason."""
        decision = admit_media_file(
            "../secret.png",
            root=ROOT,
            resolve=make_resolve({}),
            size_of=_sizes(10),
            check=make_media_checker(),
        )
        assert decision == MediaRefused(
            reason="parent_escape",
            detail="Path '../secret.png' is outside the root '/ws'",
        )

    def test_missing_file(self):
        """size_of returning None means missing or unreadable."""
        decision = admit_media_file(
            "a.png",
            root=ROOT,
            resolve=make_resolve({}),
            size_of=_sizes(None),
            check=make_media_checker(),
        )
        assert decision == MediaRefused(
            reason="missing", detail="'a.png' is missing or not a readable file"
        )

    def test_size_refusal_passes_through(self):
        """A too-large file is refused by the checker."""
        decision = admit_media_file(
            "a.png",
            root=ROOT,
            resolve=make_resolve({}),
            size_of=_sizes(100),
            check=make_media_checker(max_bytes=10),
        )
        assert isinstance(decision, MediaRefused)
        assert decision.reason == "too_large"

    def test_nameless_path_is_called_attachment(self):
        """A path with no last component is named 'attachment'."""
        decision = admit_media_file(
            "/",
            root="/",
            resolve=make_resolve({}),
            size_of=_sizes(4),
            check=make_media_checker(),
            mime_type="video/mp4",
        )
        assert decision == MediaAccepted(
            file_name="attachment",
            kind="video",
            mime_type="video/mp4",
            size=4,
            path="/",
        )

    @settings(max_examples=100)
    @given(adversarial_paths, symlink_maps)
    def test_never_admits_a_file_outside_the_root(self, path, links):
        """An admitted attachment's path always resolves inside the root."""
        resolve = make_resolve(links)
        decision = admit_media_file(
            path,
            root=ROOT,
            resolve=resolve,
            size_of=_sizes(1),
            check=make_media_checker(),
        )
        if isinstance(decision, MediaAccepted):
            assert decision.path is not None
            real_root = resolve(ROOT)
            assert decision.path == resolve(posixpath.join(ROOT, path))
            assert decision.path == real_root or decision.path.startswith(
                real_root.rstrip("/") + "/"
            )
