"""Every env keyword argument checked against its declared type, once, before any episode.

Why: an argument reaches an env from Python (``gym.make``), from the command line
(``--env 'ID[key=value]'``) and from a server's clients (``env_kwargs``); a value of the
wrong type that an env stores unread fails much later, at the first step that uses it, as
an ``AttributeError`` in a grader (a dropped episode, a 500). So ``FrozenEnv`` checks what
it is made with against its own ``__init__`` annotations (``check_env_arguments``), the one
rule for every way in, and refuses a wrong value with ``EnvArgumentError`` (a
``ValueError``) that names the argument and the type expected.

The annotations an env may use are the shapes handled here: ``int``, ``float`` (an int is
accepted; NaN and infinities are not), ``str``, ``bool``, ``None``, ``Literal``, unions,
``tuple[X, ...]``, ``list[X]``, ``Sequence[X]`` (each a list or a tuple), ``Mapping``/``dict``, ``object`` (anything:
the env checks it itself) and classes (an instance of it). ``bool`` is never an ``int`` or
a ``float`` here. A contract test keeps every registered env within these shapes.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from frostgym.core.errors import EnvArgumentError

_Check = Callable[[Any], bool]


def check_env_arguments(cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Raise ``EnvArgumentError`` unless ``cls(*args, **kwargs)`` names only arguments its
    ``__init__`` takes, each of its declared type."""
    signature, checks = _declared(cls)
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as error:
        known = ", ".join(name for name in checks)
        raise EnvArgumentError(f"{cls.__name__} does not take these options ({error}); it takes: {known}") from None
    for name, value in bound.arguments.items():
        entry = checks.get(name)
        if entry is None:
            continue
        check, expected = entry
        if not check(value):
            raise EnvArgumentError(f"{cls.__name__} argument {name!r} must be {expected}, got {_describe(value)}")


def declared_defaults(cls: type) -> dict[str, Any]:
    """The defaults of ``cls.__init__``'s keyword arguments (those that have one)."""
    signature, _ = _declared(cls)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def widened_limits(cls: type, kwargs: Mapping[str, Any]) -> list[str]:
    """The arguments of ``kwargs`` that set one of ``cls.limit_kwargs`` (the resource limits
    of its calls) above its default, each as ``name=value (default d)``. A value that is not
    a number is left to ``check_env_arguments``."""
    defaults = declared_defaults(cls)
    widened = []
    for name in sorted(getattr(cls, "limit_kwargs", frozenset()) & set(kwargs)):
        value, default = kwargs[name], defaults.get(name)
        numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (value, default))
        if numbers and not value <= default:  # NaN is never within the default
            widened.append(f"{name}={value!r} (default {default!r})")
    return widened


def unsupported_annotations(cls: type) -> list[str]:
    """The ``__init__`` arguments of ``cls`` whose annotation is none of the shapes above
    (for the contract test over every registered env)."""
    try:
        hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except NameError as error:
        return [f"(unresolvable: {error})"]
    return [name for name, hint in hints.items() if name != "return" and _compile(hint) is None]


@functools.cache
def _declared(cls: type) -> tuple[inspect.Signature, dict[str, tuple[_Check, str]]]:
    init = cls.__init__  # type: ignore[misc]  # the class's own constructor, read for its annotations
    signature = inspect.signature(init)
    try:
        hints = typing.get_type_hints(init)
    except NameError:  # an annotation that names a type only imported for type checkers
        hints = {}
    checks: dict[str, tuple[_Check, str]] = {}
    for name, parameter in list(signature.parameters.items())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        hint = hints.get(name, object)
        compiled = _compile(hint)
        checks[name] = compiled if compiled is not None else ((lambda _: True), "any value")
    return signature, checks


def _compile(hint: Any) -> tuple[_Check, str] | None:
    """A check of a value against ``hint`` and the words for the type, or None for a shape
    this module does not know."""
    if hint is Any or hint is object:
        return (lambda _: True), "any value"
    if hint is None or hint is types.NoneType:
        return (lambda v: v is None), "null"
    if hint is bool:
        return (lambda v: isinstance(v, bool)), "a boolean"
    if hint is int:
        return (lambda v: isinstance(v, int) and not isinstance(v, bool)), "an integer"
    if hint is float:
        return _finite_number, "a finite number"
    if hint is str:
        return (lambda v: isinstance(v, str)), "a string"
    origin, parameters = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        allowed = tuple(parameters)
        return (lambda v: any(v == a and type(v) is type(a) for a in allowed)), "one of " + ", ".join(
            repr(a) for a in allowed
        )
    if origin in (typing.Union, types.UnionType):
        parts = [_compile(p) for p in parameters]
        if any(p is None for p in parts):
            return None
        known = [p for p in parts if p is not None]
        return (lambda v: any(check(v) for check, _ in known)), " or ".join(words for _, words in known)
    if origin in (tuple, list, collections.abc.Sequence) and parameters:
        item = _compile(parameters[0])
        if item is None or (origin is tuple and (len(parameters) != 2 or parameters[1] is not Ellipsis)):
            return None
        item_check, item_words = item  # a list or a tuple either way: JSON and the CLI give lists
        return (
            lambda v: isinstance(v, tuple | list) and all(item_check(x) for x in v)
        ), f"a list of {_plural(item_words)}"
    if origin in (dict, collections.abc.Mapping) or hint in (dict, collections.abc.Mapping):
        return (lambda v: isinstance(v, Mapping)), "an object (a mapping)"
    if isinstance(hint, type):
        return (lambda v: isinstance(v, hint)), f"a {hint.__name__} ({hint.__module__})"
    return None


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _plural(words: str) -> str:
    return words.removeprefix("an ").removeprefix("a ") + "s" if words.startswith(("a ", "an ")) else words


def _describe(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:80] + '...'}"
