"""The root of the policies' errors: a policy given a value it cannot work with."""

from __future__ import annotations


class PolicyError(ValueError):
    """A policy was configured or called with a value outside its rules.

    Every policy module's error derives from it, so a caller catches one root.
    """
