"""SQLite recall (issue #28): statistics of the caller's scope, and no empty hits.

One agent's rows never change another agent's ranking or scores; an unrelated
question injects nothing and no row scored 0 is ever returned; a row sharing
only a word common in the scope stays under the floor.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from tests.projections.test_memory_sqlite import HashingEmbedder
from turnledger.policies.recall import make_recall_selector
from turnledger.policies.recall_scope import RecallCandidate, resolve_inject_policy
from turnledger.policies.relevance import UNRELATED_SCORE
from turnledger.projections.memory.embedding.static import StaticEmbedder
from turnledger.projections.memory.protocol import MemoryEntry, NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
FILLER = (
    "the weekly report went out on time",
    "lunch was pasta again today",
    "the build server restarted overnight",
    "standup moved to the small room",
    "the printer on floor two is jammed",
    "reviewed the quarterly budget draft",
)


def put(memory: SQLiteMemory, key: str, content: str, agent: str = "ops") -> None:
    memory.store(
        NewMemory(
            agent=agent, key=key, content=content, entry_id=f"{agent}-{key}", at=T0
        )
    )


def block(found: list[MemoryEntry]) -> str:
    """The ``[Memory context]`` block a user-facing turn would get."""
    candidates = [
        RecallCandidate(
            id=e.id, key=e.key, content=e.content, category=e.category, score=e.score
        )
        for e in found
    ]
    policy = resolve_inject_policy("interactive", sessions=["s1"])
    return make_recall_selector()(candidates, policy).block


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    own=st.lists(texts, min_size=1, max_size=8),
    other=st.lists(texts, min_size=1, max_size=8),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    interleave=st.booleans(),
)
def test_other_agents_rows_change_nothing(own, other, query, interleave):
    """Alice's ranking and scores are the same with or without Bob's rows."""
    alone = SQLiteMemory(":memory:")
    shared = SQLiteMemory(":memory:")
    for i, text in enumerate(own):
        put(alone, f"k{i}", text, agent="alice")
        if interleave:
            put(shared, f"b{i}", other[i % len(other)], agent="bob")
        put(shared, f"k{i}", text, agent="alice")
    for i, text in enumerate(other):
        put(shared, f"x{i}", text, agent="bob")
    try:
        expected = alone.recall(query, agents=["alice"], limit=10)
        found = shared.recall(query, agents=["alice"], limit=10)
        assert [(e.key, e.score) for e in found] == [(e.key, e.score) for e in expected]
    finally:
        alone.close()
        shared.close()


def test_an_unrelated_question_injects_nothing_and_nothing_scores_zero():
    """No row scored 0 comes back; keyword only, no block is built.

    (The hashing embedder counts ``the`` and ``on`` like any word, so its
    cosines say nothing about abstention: the local model's test does.)
    """
    for embedder in (None, HashingEmbedder()):
        memory = SQLiteMemory(":memory:", embedder=embedder)
        put(memory, "editor", "Helix is my editor")
        for i, text in enumerate(FILLER):
            put(memory, f"f{i}", text)
        found = memory.recall("what is the weather on Mars", agents=["ops"])
        assert all(e.score is not None and e.score > 0 for e in found)
        if embedder is None:
            assert found == []
            assert block(found) == ""
        memory.close()


def test_a_word_common_in_the_scope_is_not_evidence():
    """A row sharing only a word most of the scope holds stays under the floor."""
    memory = SQLiteMemory(":memory:")
    for i, text in enumerate(FILLER):
        put(memory, f"f{i}", f"{text} for the team")
    found = memory.recall("team offsite location", agents=["ops"])
    assert found
    assert block(found) == ""


def test_the_guides_editor_example_injects_its_entry():
    """``memory context --agent ops "which editor do I use"`` prints its entry.

    The one entry holds "editor" and not "use": in a store this small a word no
    row holds weighs little against the row.
    """
    memory = SQLiteMemory(":memory:")
    put(memory, "editor", "Helix is my editor")
    found = memory.recall("which editor do I use", agents=["ops"])
    assert "editor: Helix is my editor" in block(found)
    memory.close()


SMALL_STORE = (
    "I adopted a grey cat called Pixel last spring",
    "Pixel is a lovely name for a cat.",
    "our deploys run on Thursday evenings after the freeze",
    "the staging database lives on a host named heron",
    "the API answers in about 400ms on average",
    "my sister Ines moved to Rotterdam in May",
)


def assert_a_small_store_knows_what_it_does_not_hold(memory) -> None:
    """In a store of six rows, a question most of whose words no row holds
    injects nothing on its one shared word; a question about a row still
    injects it. Fails with the small-store allowance for every missing word:
    "our deploys run on Thursday evenings" scored 0.78 for the cheetah
    ("fast" and "cheetah" weighing 6/100 of their weight)."""
    for i, text in enumerate(SMALL_STORE):
        put(memory, f"m{i}", text)
    if hasattr(memory, "embed_pending"):
        memory.embed_pending()
    for question in (
        "how fast does a cheetah run",
        "which composer wrote the rite of spring",
    ):
        assert block(memory.recall(question, agents=["ops"])) == "", question
    assert "deploys run on Thursday" in block(
        memory.recall("when do our deploys run", agents=["ops"])
    )
    assert "moved to Rotterdam" in block(
        memory.recall("where did my sister Ines move", agents=["ops"])
    )


def test_a_small_store_knows_what_it_does_not_hold():
    memory = SQLiteMemory(":memory:")
    assert_a_small_store_knows_what_it_does_not_hold(memory)
    memory.close()


def test_a_small_store_knows_what_it_does_not_hold_with_the_static_model():
    memory = SQLiteMemory(
        ":memory:", embedder=StaticEmbedder(), background_vectors=False
    )
    assert_a_small_store_knows_what_it_does_not_hold(memory)
    memory.close()


def test_a_question_about_two_subjects_injects_both():
    """Each subject's entry answers its half of the question: both are shown."""
    memory = SQLiteMemory(":memory:")
    for i, text in enumerate(FILLER):
        put(memory, f"f{i}", text)
    put(memory, "editor", "Helix is my editor")
    put(memory, "shell", "fish is my login shell")
    shown = block(
        memory.recall("which editor and which shell do I use", agents=["ops"])
    )
    assert "editor: Helix is my editor" in shown
    assert "shell: fish is my login shell" in shown
    assert "f0" not in shown
    memory.close()


def test_a_question_about_two_subjects_injects_both_with_the_static_model():
    """The default configuration's hybrid: each subject's row is found on
    keywords (0.78) while its cosine to the two-subject question sits at the
    static model's floor; a confident keyword leg counts in full."""
    memory = SQLiteMemory(
        ":memory:", embedder=StaticEmbedder(), background_vectors=False
    )
    for i, text in enumerate(FILLER):
        put(memory, f"f{i}", text)
    put(memory, "editor", "Helix is my editor")
    put(memory, "shell", "fish is my login shell")
    assert memory.embed_pending() == len(FILLER) + 2  # every row has its vector
    shown = block(
        memory.recall("which editor and which shell do I use", agents=["ops"])
    )
    assert "editor: Helix is my editor" in shown
    assert "shell: fish is my login shell" in shown
    assert "f0" not in shown
    assert block(memory.recall("what is the weather on Mars", agents=["ops"])) == ""
    memory.close()


def assert_unheard_words_are_discounted(memory) -> None:
    """The static model puts "good morning in finnish" near a long message about
    a morning schedule (over the floor on its own); no row of the 121 holds
    "finnish", the query's rarest word, so the vector leg is discounted
    (policies.relevance.discount_absent): the row is still ranked first, and
    not injected. A question about the schedule still injects it; a question
    none of whose words any row holds scores every row at most UNRELATED_SCORE,
    still ranked. ``memory`` embeds with the static model."""
    for i in range(120):
        put(memory, f"f{i}", f"{FILLER[i % len(FILLER)]}, item {i}")
    put(
        memory,
        "schedule",
        "Absolutely, a focused morning schedule can help you make the most of "
        "your productive hours: wake at six, review your goals over a good "
        "breakfast, then deep work until noon.",
    )
    while memory.embed_pending():
        pass
    found = memory.recall("how do you say good morning in finnish", agents=["ops"])
    assert found[0].key == "schedule"
    assert block(found) == ""
    asked = memory.recall("what does my morning schedule look like", agents=["ops"])
    assert block(asked).startswith("[Memory context]\n- schedule: Absolutely")
    unheard = memory.recall("finnish greetings", agents=["ops"])
    assert unheard
    assert all(0 < e.score <= UNRELATED_SCORE for e in unheard)


def test_a_question_whose_rarest_word_no_row_holds_injects_nothing():
    """See :func:`assert_unheard_words_are_discounted`."""
    memory = SQLiteMemory(
        ":memory:", embedder=StaticEmbedder(), background_vectors=False
    )
    try:
        assert_unheard_words_are_discounted(memory)
    finally:
        memory.close()


SUBJECTS = ("deploy target", "team lead", "office city", "build tool", "release day")
# (no value holds a subject's word: how often a row holds a term is counted as
# a substring, so "friday" would count "day" twice)
VALUES = ("berlin", "noon", "gradle", "maria", "staging", "tokyo", "bazel")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    subject=st.sampled_from(SUBJECTS),
    values=st.lists(st.sampled_from(VALUES), min_size=2, max_size=2, unique=True),
    filler=st.lists(st.sampled_from(FILLER), max_size=6),
    asked=st.sampled_from(("what is the {}", "{}?", "current {} please", "the {} now")),
)
def test_the_newer_fact_ranks_first(subject, values, filler, asked):
    """Storing A, then B updating it (another key), B ranks above A."""
    old, new = values
    memory = SQLiteMemory(":memory:")
    try:
        for i, text in enumerate(filler):
            put(memory, f"f{i}", text)
        put(memory, "a", f"the {subject} is {old}")
        put(memory, "b", f"the {subject} is now {new}")
        keys = [e.key for e in memory.recall(asked.format(subject), agents=["ops"])]
        assert keys.index("b") < keys.index("a")
    finally:
        memory.close()
