"""The policies package: its names load their rule's module on first use."""

import subprocess
import sys

import pytest

from turnledger import policies


def test_every_exported_name_resolves_to_its_rules_object():
    for name in policies.__all__:
        value = getattr(policies, name)
        assert value.__module__.startswith("turnledger.policies.")
    assert set(policies.__all__) <= set(dir(policies))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_rule'"):
        _ = policies.no_such_rule


def test_one_rule_loads_without_the_others():
    code = (
        "import sys\n"
        "import turnledger.policies.messages\n"
        "print(sorted(m for m in sys.modules if m.startswith('turnledger.policies.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "turnledger.policies.trimming" not in done.stdout
    assert "turnledger.policies.messages" in done.stdout
