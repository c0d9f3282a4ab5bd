"""The erasure events: the receipt an erasure leaves, and what an erased event reads as.

``ErasureRecorded`` is the receipt ``turnledger erase`` appends to the ledger's
erasure stream (:data:`ERASURE_STREAM`) after it destroyed a subject's data keys:
what was erased (the subject's kind, its agent alias, a digest of its id, the
streams whose keys went), how many keys, and by which command; never content,
never the id itself. The time is the envelope's. Part of the catalogue whose
public home is :mod:`ledger.events`; the tag is stable stored data.

``Erased`` is not recorded: it is what the store hands out, in place of the
event, for a row sealed under a data key that was destroyed
(:mod:`ledger.erasable`). It says which type the row was; its content is gone.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal, TypeAlias
from uuid import UUID

from turnledger.ledger.events.base import Event, NonNegative, Sha256Hex

ErasureSubject: TypeAlias = Literal["session", "agent", "user", "memory"]
"""What an erasure names: one session, an agent, a user key, a memory key."""

ERASURE_STREAM: UUID = UUID("6f1c1a8e-6b0e-5b6e-9a43-657261737572")
"""The stream every erasure receipt is appended to."""


def subject_digest(kind: ErasureSubject, agent: str, subject: str) -> str:
    """Return the receipt's digest of a subject's id (SHA-256, lowercase hex).

    Over ``kind``, the agent alias and the id, joined by the unit separator. The
    id (a session or user key, a memory key) may be personal, so the receipt
    holds this digest: whoever knows the id can find its receipt; the receipt
    alone does not name it (an id drawn from a small set can be guessed by
    trying them all).
    """
    text = f"{kind}\x1f{agent}\x1f{subject}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ErasureRecorded(
    Event, tag="erasure.recorded", frozen=True, kw_only=True, gc=False
):
    """A subject was erased: its data keys destroyed, its views rebuilt without it.

    Attributes:
        subject: The subject's kind.
        agent: The agent alias (``""`` for a user key, which spans agents).
        subject_digest: :func:`subject_digest` of the subject's id.
        streams: The stream ids (UUID text) whose events can no longer be read.
        keys_destroyed: How many data keys were destroyed.
        command: The command that erased (its name and option, no values).
    """

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent",)

    subject: ErasureSubject
    agent: str = ""
    subject_digest: Sha256Hex
    streams: tuple[str, ...] = ()
    keys_destroyed: NonNegative = 0
    command: str = ""


class Erased(Event, tag="erased", frozen=True, kw_only=True, gc=False):
    """What an event sealed under a destroyed data key reads as (never recorded).

    Attributes:
        original_type: The stored tag of the event that was erased.
    """

    original_type: str
