"""Lifecycle declarations and the ownership table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.policies.lifecycle import (
    TABLE_HEADER,
    LifecycleDeclaration,
    LifecycleError,
    render_ownership_table,
    validate_declaration,
)

MEMORY = LifecycleDeclaration(
    surface="Long-term memory",
    owner="`projections.memory`",
    durability="memory",
    scope="agent",
    reviewers_check="Stores and recalls stay agent-scoped.",
)
PROMPT = LifecycleDeclaration(
    surface="Prompt context",
    owner="`pipeline.engine`",
    durability="turn",
    scope="session",
    reviewers_check="Recalled memory is bounded;\nsending it does not make it durable.",
)
COSTS = LifecycleDeclaration(
    surface="Cost records",
    owner="`projections.costs`",
    durability="cost",
    scope="install",
    reviewers_check="No prompt bodies | tool outputs | memory content.",
)


def test_golden_table():
    """Rows ordered by durability; cells on one line, pipes escaped."""
    assert render_ownership_table([COSTS, MEMORY, PROMPT]) == (
        "| Surface | Owner | Durability | Scope | What reviewers must check |\n"
        "|---|---|---|---|---|\n"
        "| Prompt context | `pipeline.engine` | turn | session | Recalled memory is "
        "bounded; sending it does not make it durable. |\n"
        "| Long-term memory | `projections.memory` | memory | agent | Stores and "
        "recalls stay agent-scoped. |\n"
        "| Cost records | `projections.costs` | cost | install | No prompt bodies \\| "
        "tool outputs \\| memory content. |\n"
    )


def test_empty_table_is_the_header():
    """No declarations give the header only."""
    assert render_ownership_table([]) == TABLE_HEADER


def test_same_durability_sorted_by_surface():
    """Within a durability, surfaces sort case-insensitively."""
    files = LifecycleDeclaration(
        surface="files",
        owner="o",
        durability="filesystem",
        scope="workspace",
        reviewers_check="c",
    )
    media = LifecycleDeclaration(
        surface="Media",
        owner="o",
        durability="filesystem",
        scope="workspace",
        reviewers_check="c",
    )
    table = render_ownership_table([media, files])
    assert table.index("| files |") < table.index("| Media |")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"surface": "  "}, "Expected a non-blank surface"),
        ({"owner": ""}, "Expected a non-blank owner"),
        ({"reviewers_check": "\n"}, "Expected a non-blank reviewers_check"),
        ({"durability": "forever"}, "Expected a durability in .*, found 'forever'"),
        ({"scope": "planet"}, "Expected a scope in .*, found 'planet'"),
    ],
)
def test_invalid_declarations(changes, message):
    """Blank texts and unknown literals are typed errors."""
    fields = {
        "surface": "s",
        "owner": "o",
        "durability": "log",
        "scope": "agent",
        "reviewers_check": "c",
    } | changes
    with pytest.raises(LifecycleError, match=message):
        validate_declaration(LifecycleDeclaration(**fields))


def test_duplicate_surface():
    """A surface is declared once (case and spacing ignored)."""
    twin = LifecycleDeclaration(
        surface="long-term  MEMORY",
        owner="x",
        durability="memory",
        scope="agent",
        reviewers_check="c",
    )
    with pytest.raises(LifecycleError, match="found 'long-term  MEMORY' twice"):
        render_ownership_table([MEMORY, twin])


declarations = st.builds(
    LifecycleDeclaration,
    surface=st.text(alphabet="abcXYZ |\n", min_size=1, max_size=8).filter(str.strip),
    owner=st.text(alphabet="ab|`", min_size=1, max_size=5).filter(str.strip),
    durability=st.sampled_from(
        ["turn", "session", "memory", "filesystem", "log", "cost"]
    ),
    scope=st.sampled_from(["agent", "session", "channel", "workspace", "install"]),
    reviewers_check=st.text(min_size=1, max_size=20).filter(str.strip),
)


@settings(max_examples=100)
@given(st.lists(declarations, max_size=6), st.randoms())
def test_order_independent_and_one_row_each(items, random):
    """The table depends only on the set of declarations; one line per row."""
    unique = list({" ".join(d.surface.split()).casefold(): d for d in items}.values())
    shuffled = list(unique)
    random.shuffle(shuffled)
    table = render_ownership_table(unique)
    assert render_ownership_table(shuffled) == table
    assert table.count("\n") == 2 + len(unique)
