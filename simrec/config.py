"""Study configs: frozen (possibly nested) dataclasses, their documentation, and overrides from
``a.b=value`` strings (the CLI's ``--set``)."""
from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from typing import Any, Mapping

__all__ = ["MAX_SEED", "ConfigError", "config_to_dict", "config_fields", "config_help", "type_name", "with_overrides"]

#: the largest root seed (seeds are uint32: ``jax.random.key(seed)``)
MAX_SEED = 2**32 - 1


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names it and the valid choices."""


def config_to_dict(config) -> dict:
    """Plain nested dict of a (nested) config dataclass, tuples as lists."""
    return json.loads(json.dumps(_plain(dataclasses.asdict(config)), sort_keys=True, allow_nan=True))


def config_fields(config, prefix: str = "") -> dict[str, Any]:
    """Flat ``{"a.b": type}`` of every settable leaf field of a nested config dataclass."""
    out = {}
    hints = typing.get_type_hints(type(config), include_extras=True)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(config_fields(value, prefix + f.name + "."))
        else:
            out[prefix + f.name] = hints.get(f.name, type(value))
    return out


def _field_comments(cls) -> dict[str, str]:
    """``{field: text}`` from the comment on a field's line or the ``#:`` lines just above it."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    out, above = {}, []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#:"):
            above.append(stripped[2:].strip())
            continue
        head = stripped.split("=", 1)[0]
        if ":" in head and head.split(":", 1)[0].isidentifier() and not stripped.startswith(("def ", "return")):
            name = head.split(":", 1)[0]
            comment = line.split("#", 1)[1].strip() if "#" in line and "#:" not in line else ""
            text = " ".join([*above, comment]).strip()
            if text:
                out.setdefault(name, text)
        above = []
    return out


def _docstring_fields(cls) -> dict[str, str]:
    """``{field: text}`` from class docstring lines ``name: text`` or ``a, b: text``."""
    out = {}
    for line in inspect.cleandoc(cls.__doc__ or "").splitlines():
        head, sep, text = line.partition(": ")
        names = [n.strip() for n in head.split(",")]
        if sep and text and all(n.isidentifier() for n in names):
            for name in names:
                out.setdefault(name, text.strip())
    return out


def type_name(tp) -> str:
    """A short readable name of a field type: ``int``, ``tuple[float, ...]``, ``Trained | Popularity``
    (module paths dropped; ``Annotated[T, parser]`` shown as T)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def config_help(config, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type name, default, meaning)`` for every leaf field of a config.

    The meaning comes from ``field(metadata={"help": ...})``, the field's comment in the class
    source, or a ``name: text`` line of the class docstring; ``""`` where none exists."""
    out = []
    hints = typing.get_type_hints(type(config), include_extras=True)
    comments = {**_docstring_fields(type(config)), **_field_comments(type(config))}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out += config_help(value, prefix + f.name + ".")
            continue
        tp = hints.get(f.name, type(value))
        out.append((prefix + f.name, type_name(tp), value,
                    f.metadata.get("help", comments.get(f.name, ""))))
    return out


def with_overrides(config, overrides: Mapping[str, str], _prefix: str = ""):
    """Return ``config`` with dotted-path fields replaced by values parsed from strings.

    Raises `ConfigError` naming an unknown key (and listing the valid ones) or a value that does
    not parse as the field's type; the full dotted key is kept in every message. The config's
    own ``__post_init__`` validation then runs.
    """
    valid = config_fields(config)
    for key in overrides:
        if key not in valid:
            raise ConfigError(f"unknown config key {_prefix + key!r}; valid keys: "
                              f"{', '.join(_prefix + k for k in sorted(valid))}")
    nested: dict[str, dict] = {}
    direct = {}
    for key, raw in overrides.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = raw
        else:
            direct[head] = _parse_value(_prefix + key, raw, valid[key])
    for head, sub in nested.items():
        direct[head] = with_overrides(getattr(config, head), sub, _prefix + head + ".")
    try:
        return dataclasses.replace(config, **direct)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _parse_value(key: str, raw: str, tp) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated and callable(tp.__metadata__[0]):
        try:                                  # a field type with its own parser: Annotated[T, parse]
            return tp.__metadata__[0](raw)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"config key {key!r}: {err}") from None
    try:
        if origin in (typing.Union, types.UnionType):
            if raw.lower() in ("none", "null") and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            return _parse_value(key, raw, inner[0])
        if origin is typing.Literal:
            for choice in args:
                if str(choice) == raw:
                    return choice
            raise ConfigError(f"config key {key!r}: {raw!r} is not one of {', '.join(map(str, args))}")
        if origin is tuple:
            parts = [p for p in raw.replace(";", ",").split(",") if p.strip()]
            elem = args[0] if args else str
            return tuple(_parse_value(key, p.strip(), elem) for p in parts)
        if tp is bool:
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError
        if tp is int:
            return int(raw)
        if tp is float:
            return float(raw)
        if tp is str:
            return raw
    except ConfigError:
        raise
    except (ValueError, TypeError):
        pass
    else:
        raise ConfigError(f"config key {key!r} has unsupported type {tp}")
    raise ConfigError(f"config key {key!r} expects {getattr(tp, '__name__', tp)}, got {raw!r}")


def _plain(value):
    """Tuples as lists, numpy scalars as Python numbers (what JSON holds)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value
