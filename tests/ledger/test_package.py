"""The ledger package: cheap to import, its names loaded on first use."""

import subprocess
import sys

import pytest

from turnledger import ledger


def test_every_exported_name_resolves():
    for name in ledger.__all__:
        assert getattr(ledger, name) is not None
    assert set(ledger.__all__) <= set(dir(ledger))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = ledger.no_such_name


def test_importing_the_package_loads_no_event_or_storage_library():
    code = (
        "import sys\n"
        "import turnledger.ledger.location\n"
        "print(sorted(m for m in ('msgspec', 'eventsourcing', 'sqlite3')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
