"""A child process that spends on a shared ledger: one real engine turn.

::

    python -m tests.pipeline.budget_spender_child LEDGER DATA_DIR SESSION LIMIT

It bootstraps its own runtime on the ledger file ``LEDGER`` (its own store,
memory and engine, with ``[budgets] daily_limit_usd = LIMIT``), runs one turn of
agent ``ops`` in ``SESSION`` against a fake provider that answers once, and
prints one JSON line: ``completed``, ``failure`` and ``model_calls`` (how many
times the provider was asked).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from tests.pipeline.test_engine import FakeProvider, answer
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config, parse_config

PRICED = (
    "[runtime]\nmax_tool_iterations = 3\ncontext_budget_tokens = 0\n"
    "[pricing.fake-1]\ninput_per_million = 1000\noutput_per_million = 2000\n"
)
"""The pricing both sides use: one ``answer()`` call costs $0.12 (40 of its
100 input tokens cached at the uncached price)."""


def config_for(data_dir: str, daily_limit_usd: float) -> Config:
    """The configuration of a runtime with that daily limit."""
    return parse_config(
        f'data_dir = "{data_dir}"\n{PRICED}'
        f"[budgets]\nenabled = true\ndaily_limit_usd = {daily_limit_usd!r}\n"
    )


async def _run(ledger: str, data_dir: str, session: str, limit: float) -> dict:
    provider = FakeProvider([answer("spent")])
    config = config_for(data_dir, limit)
    async with bootstrap(config, provider=provider, ledger_url=ledger) as runtime:
        outcome = await runtime.engine.run_turn("ops", session, "spend something")
    return {
        "completed": outcome.completed,
        "failure": outcome.failure,
        "model_calls": len(provider.requests),
    }


def main(argv: Sequence[str]) -> int:
    ledger, data_dir, session, limit = argv
    print(json.dumps(asyncio.run(_run(ledger, data_dir, session, float(limit)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
