"""The autosave gate (§4.6)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.policies.autosave import (
    IMAGE_OMITTED_PLACEHOLDER,
    AutosaveDecision,
    AutosaveKeyError,
    autosave_key,
    decide_autosave,
    is_autosave_key,
    noise_reason,
    should_skip_autosave_content,
    strip_inline_images,
)

LONG = "please remember that the deploy target is prod-cluster-3"
KEY = "user_msg_1"


class TestDecideAutosave:
    @pytest.mark.parametrize("origin", ["interactive", "channel", "agent_direct"])
    def test_user_facing_user_message_is_saved(self, origin):
        """A long user message of a user-facing turn is saved as conversation."""
        decision = decide_autosave(LONG, origin=origin, key=KEY, session="s 1")
        assert decision == AutosaveDecision(
            save=True,
            reason=None,
            key=KEY,
            content=LONG,
            category="conversation",
            session="s 1",  # the exact key: scopes never merge (issue #17)
        )

    @pytest.mark.parametrize("origin", ["cron", "daemon", "sub_turn"])
    def test_other_origins_are_refused_first(self, origin):
        """Autonomous and sub-turn origins are never saved, whatever the text."""
        decision = decide_autosave("[cron:x]", origin=origin, key=KEY, session=None)
        assert decision.reason == "origin"
        assert not decision.save

    @pytest.mark.parametrize(
        ("kwargs", "reason"),
        [
            ({"enabled": False}, "disabled"),
            ({"role": "assistant"}, "not_user"),
            ({"role": "system"}, "not_user"),
            ({"session": None}, "no_session"),
            ({"session": ""}, "no_session"),
            ({"text": "x" * 19}, "too_short"),
            (
                {"text": "[Memory context]\n- a: b\n[/Memory context]\n\nhello there"},
                "synthetic",
            ),
            ({"text": "   [CRON:nightly] summarize the logs please"}, "synthetic"),
        ],
    )
    def test_skip_reasons(self, kwargs, reason):
        """Each gate refuses with its own reason and stores nothing."""
        arguments = {
            "text": LONG,
            "origin": "interactive",
            "key": KEY,
            "session": "s",
        } | kwargs
        decision = decide_autosave(**arguments)
        assert (decision.save, decision.reason, decision.content) == (False, reason, "")

    def test_twenty_chars_is_enough(self):
        """The bound is inclusive: exactly 20 characters are saved."""
        decision = decide_autosave("x" * 20, origin="channel", key=KEY, session="s")
        assert decision.save

    def test_inline_images_replaced(self):
        """Inline image bytes become the placeholder before saving."""
        text = "look at this chart [IMAGE:data:image/png;base64,iVBORw0KGgo=] ok"
        decision = decide_autosave(text, origin="channel", key=KEY, session="s")
        assert decision.save
        assert decision.content == f"look at this chart {IMAGE_OMITTED_PLACEHOLDER} ok"

    def test_image_only_message_is_not_saved(self):
        """A message that is only inline images stores nothing."""
        text = "[IMAGE:data:image/png;base64," + "A" * 100 + "]"
        decision = decide_autosave(text, origin="channel", key=KEY, session="s")
        assert (decision.save, decision.reason, decision.content) == (
            False,
            "image_only",
            "",
        )

    @settings(max_examples=100)
    @given(
        st.text(max_size=80),
        st.sampled_from(
            ["interactive", "channel", "agent_direct", "cron", "daemon", "sub_turn"]
        ),
        st.sampled_from(["user", "assistant", "system", "tool"]),
    )
    def test_never_saves_synthetic_or_foreign_text(self, text, origin, role):
        """A saved message is a long, non-synthetic user-facing user message."""
        decision = decide_autosave(text, origin=origin, key=KEY, session="s", role=role)
        if decision.save:
            assert origin in {"interactive", "channel", "agent_direct"}
            assert role == "user"
            assert len(text) >= 20
            assert not should_skip_autosave_content(text)
            assert "data:image/" not in decision.content.lower()
        else:
            assert decision.content == ""


class TestContentAndKeys:
    @pytest.mark.parametrize(
        "content",
        [
            "",
            "  \n ",
            "[cron:daily] run",
            "[Heartbeat Task] ping",
            "[distilled_x] y",
            "[MEMORY CONTEXT]\n- a",
            "foo distilled_index_sig: 1",
        ],
    )
    def test_synthetic_content(self, content):
        """Empty, cron, heartbeat, distilled and recall blocks are synthetic."""
        assert should_skip_autosave_content(content)

    def test_ordinary_content_is_not_synthetic(self):
        """Ordinary text, even mentioning cron, is not synthetic."""
        assert not should_skip_autosave_content("the cron: job ran [fine]")

    @pytest.mark.parametrize(
        ("key", "expected"),
        [
            ("user_msg", True),
            (" USER_MSG_abc ", True),
            ("assistant_resp", True),
            ("assistant_resp_9", True),
            ("user_msgs", False),
            ("my_user_msg_1", False),
            ("alpha", False),
        ],
    )
    def test_autosave_keys(self, key, expected):
        """user_msg / assistant_resp keys, bare or with a suffix, any case."""
        assert is_autosave_key(key) is expected

    def test_autosave_key_shapes(self):
        """Every autosave key is a sanitized user_msg_ key."""
        assert autosave_key("42") == "user_msg_42"
        assert (
            autosave_key("m.1", channel="slack", thread="1.2", sender="bob smith")
            == "user_msg_slack_1_2_bob_smith_m_1"
        )
        assert autosave_key("m1", channel="tg", sender="ann") == "user_msg_tg_ann_m1"
        assert is_autosave_key(autosave_key("x", channel="c"))

    def test_autosave_key_needs_an_id(self):
        """An empty message id is a typed error."""
        with pytest.raises(AutosaveKeyError, match="non-empty message_id"):
            autosave_key("")

    @pytest.mark.parametrize(
        ("key", "content", "reason"),
        [
            ("user_msg_1", "fact", "autosave_key"),
            ("k", "[cron:x] y", "synthetic"),
            ("chat_HISTORY ", "fact", "history_key"),
            ("k", "see [IMAGE:/a.png]", "image"),
            ("k", "old <tool_result name='x'>", "tool_result"),
            ("k", "deploy target is prod", None),
        ],
    )
    def test_noise_reason(self, key, content, reason):
        """The recall skip set, with the first matching reason."""
        assert noise_reason(key, content) == reason


class TestStripInlineImages:
    def test_marker_and_bare_data_url(self):
        """Both marker and bare data URLs are replaced; path markers stay."""
        text = (
            "a [IMAGE:data:image/jpeg;base64,/9j/4AAQ==] b "
            "data:image/png;base64,iVBORw0KGgo= c [IMAGE:/tmp/x.png]"
        )
        assert strip_inline_images(text) == (
            f"a {IMAGE_OMITTED_PLACEHOLDER} b {IMAGE_OMITTED_PLACEHOLDER} "
            "c [IMAGE:/tmp/x.png]"
        )

    def test_unclosed_marker_is_removed_to_the_end(self):
        """A truncated data marker still holds bytes and is removed."""
        assert (
            strip_inline_images("x [IMAGE:data:image/png;base64,AAAA")
            == f"x {IMAGE_OMITTED_PLACEHOLDER}"
        )
