"""A light ``namedtuple`` for modules that hook processes load.

``collections.namedtuple`` compiles a constructor for every class it makes, about 0.15 ms
each, and needs ``collections`` itself; a hook process defines a dozen such classes and
otherwise never loads ``collections``. This factory builds the same kind of class (a
tuple subclass with named read-only fields, defaults, keyword construction, ``_fields``,
``_replace`` and a readable ``repr``) from ordinary properties. Modules import it under
the name ``namedtuple`` only at run time; type checkers see ``collections.namedtuple``.
"""

from __future__ import annotations

from _operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MISSING = object()


def namedtuple(typename: str, field_names: str, *, defaults: tuple[Any, ...] = ()) -> type:
    """A tuple subclass named ``typename`` with the space-separated ``field_names``; the
    last ``len(defaults)`` fields default to ``defaults``."""
    fields = tuple(field_names.split())
    count = len(fields)
    first_default = count - len(defaults)
    positions = {name: index for index, name in enumerate(fields)}

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        if len(args) > count:
            raise TypeError(f"{typename}() takes {count} arguments, got {len(args)}")
        values = [*args, *([_MISSING] * (count - len(args)))]
        for name, value in kwargs.items():
            index = positions.get(name)
            if index is None or values[index] is not _MISSING:
                raise TypeError(f"{typename}() got an unexpected or repeated argument {name!r}")
            values[index] = value
        for index in range(count):
            if values[index] is _MISSING:
                if index < first_default:
                    raise TypeError(f"{typename}() missing argument {fields[index]!r}")
                values[index] = defaults[index - first_default]
        return tuple.__new__(cls, values)

    def _replace(self: tuple[Any, ...], **changes: Any) -> Any:
        values = dict(zip(fields, self, strict=True))
        values.update(changes)
        return type(self)(**values)

    def __repr__(self: tuple[Any, ...]) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(fields, self, strict=True))
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self)

    namespace: dict[str, Any] = {
        "__slots__": (),
        "__new__": __new__,
        "__repr__": __repr__,
        "__getnewargs__": __getnewargs__,
        "_fields": fields,
        "_replace": _replace,
    }
    for index, name in enumerate(fields):
        namespace[name] = property(itemgetter(index), doc=f"Field {index}: {name}")
    return type(typename, (tuple,), namespace)
