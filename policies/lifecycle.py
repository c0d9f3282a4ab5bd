"""Lifecycle declarations: who owns a payload surface and how long it lives.

Every surface that holds user or tool payloads (memory rows, session history,
prompt context, tool results, files, media, logs, cost records) declares its
owner, durability, scope and what a reviewer must check, as a
:class:`LifecycleDeclaration`. :func:`render_ownership_table` turns the
declarations into the "who owns what" table of the payload lifecycle page, so the
table is generated from the code that owns the data rather than kept by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, get_args

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.types import Durability, LifecycleScope

DURABILITY_ORDER: Final[tuple[Durability, ...]] = get_args(Durability)
"""Durabilities from the shortest-lived to the ledgers, the table's row order."""

SCOPES: Final[tuple[LifecycleScope, ...]] = get_args(LifecycleScope)
"""Every valid :data:`policies.types.LifecycleScope`."""

TABLE_HEADER: Final = (
    "| Surface | Owner | Durability | Scope | What reviewers must check |\n"
    "|---|---|---|---|---|\n"
)
"""The first two lines of the rendered table."""


class LifecycleError(PolicyError):
    """A lifecycle declaration is incomplete, invalid or duplicated."""


class LifecycleDeclaration(msgspec.Struct, frozen=True, kw_only=True):
    """What one payload surface declares about its data.

    Attributes:
        surface: The surface's name (e.g. ``Long-term memory``); unique.
        owner: The module or component that owns the data.
        durability: How long the data lives.
        scope: What bounds access to it.
        reviewers_check: What a reviewer must check when a change touches it.
    """

    surface: str
    owner: str
    durability: Durability
    scope: LifecycleScope
    reviewers_check: str


def validate_declaration(declaration: LifecycleDeclaration) -> LifecycleDeclaration:
    """Check that a declaration is complete and uses known values.

    Structs are not validated when built in Python, so a bad literal would
    otherwise reach the table.

    Args:
        declaration: The declaration.

    Returns:
        The same declaration.

    Raises:
        LifecycleError: A text field is blank, or the durability or scope is not
            one of the allowed values.
    """
    for name in ("surface", "owner", "reviewers_check"):
        if not getattr(declaration, name).strip():
            msg = f"Expected a non-blank {name} in {declaration!r}, found a blank one"
            raise LifecycleError(msg)
    if declaration.durability not in DURABILITY_ORDER:
        msg = (
            f"Expected a durability in {DURABILITY_ORDER},"
            f" found {declaration.durability!r}"
        )
        raise LifecycleError(msg)
    if declaration.scope not in SCOPES:
        msg = f"Expected a scope in {SCOPES}, found {declaration.scope!r}"
        raise LifecycleError(msg)
    return declaration


def _cell(text: str) -> str:
    # One line per row, and a pipe inside a cell must not end it.
    return " ".join(text.split()).replace("|", "\\|")


def _row(declaration: LifecycleDeclaration) -> str:
    cells = (
        declaration.surface,
        declaration.owner,
        declaration.durability,
        declaration.scope,
        declaration.reviewers_check,
    )
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |\n"


def _order(declaration: LifecycleDeclaration) -> tuple[int, str, str]:
    return (
        DURABILITY_ORDER.index(declaration.durability),
        declaration.surface.casefold(),
        declaration.surface,
    )


def render_ownership_table(declarations: Iterable[LifecycleDeclaration]) -> str:
    r"""Render declarations as the ownership table (Markdown).

    The output depends only on the set of declarations: rows are ordered by
    durability (turn, session, memory, filesystem, log, cost), then by surface
    name. Whitespace runs in a cell become one space and ``|`` is escaped.

    Args:
        declarations: The surfaces' declarations.

    Returns:
        The header and one row per declaration, each line ending in ``\n``.

    Raises:
        LifecycleError: A declaration is invalid (see
            :func:`validate_declaration`), or two declare the same surface.
    """
    seen: set[str] = set()
    checked: list[LifecycleDeclaration] = []
    for declaration in declarations:
        name = " ".join(validate_declaration(declaration).surface.split()).casefold()
        if name in seen:
            msg = (
                "Expected each surface declared once,"
                f" found {declaration.surface!r} twice"
            )
            raise LifecycleError(msg)
        seen.add(name)
        checked.append(declaration)
    return TABLE_HEADER + "".join(
        _row(declaration) for declaration in sorted(checked, key=_order)
    )
