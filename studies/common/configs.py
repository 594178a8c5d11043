"""Config validation for study configs: a `simrec.validate` rule whose error becomes a ConfigError.

A study config's ``__post_init__`` checks each field with the library's rule for its kind of value
(`simrec.validate`: integers, probabilities, choices, clipping grids, ...), whose ValueError names
the field; `checked` re-raises it as `simrec.config.ConfigError`, which the CLI prints in one line.
"""
from __future__ import annotations

from simrec.config import ConfigError

__all__ = ["checked"]


def checked(rule, *args, **kwargs):
    """``rule(*args, **kwargs)`` (a `simrec.validate` rule, e.g. ``validate.integer``) with its
    ValueError raised as a ConfigError carrying the same message; returns what the rule returns."""
    try:
        return rule(*args, **kwargs)
    except ValueError as err:
        raise ConfigError(str(err)) from None
