"""What every stage stands on: files the harness writes, text safe to show, bounded output views, masking, stop signals;
what keeps the start-up cheap: dependencies imported when first used, frozen records defined without generated code."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Callable
from operator import attrgetter
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorated: decorated


__all__ = ["frozen", "lazy_import"]

_Class = TypeVar("_Class", bound=type)


def lazy_import(name: str) -> ModuleType:
    """The module NAME, run at the first use of one of its names rather than now.

    For a dependency a passing run never touches: psutil (processes left
    behind, memory samples) and PyYAML (front matter) take some 15 ms each to
    import, a tenth of the harness's start-up. Modules that import them this
    way name the real module under TYPE_CHECKING, for the type checker.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: _Class) -> _Class:
    """`@dataclass(frozen=True)`, with the methods it would write out shared instead.

    On Python 3.11 the standard decorator writes six methods of a frozen class
    as source and compiles each, some 0.8 ms a class; a run defines about 70
    before its first block. Here dataclasses writes only `__init__`, and
    equality, hash, repr and the refusal to change a field are the functions
    below, which behave as the generated ones do: `dataclasses.fields`,
    `replace` and `is_dataclass` see a frozen dataclass.
    """
    if any(getattr(getattr(base, "__dataclass_params__", None), "frozen", False) for base in cls.__mro__[1:]):
        return cast(_Class, dataclasses.dataclass(frozen=True)(cls))  # built on a record: the standard way
    made = cast(_Class, dataclasses.dataclass(repr=False, eq=False)(cls))
    made.__dataclass_params__.frozen = True  # type: ignore[attr-defined]  # so that a subclass may be frozen too
    fields = dataclasses.fields(made)
    hashed = [field.name for field in fields if (field.compare if field.hash is None else field.hash)]
    for name, method in (
        ("__record_compared__", staticmethod(_values([field.name for field in fields if field.compare]))),
        ("__record_hashed__", staticmethod(_values(hashed))),
        ("__record_shown__", tuple(field.name for field in fields if field.repr)),
        ("__eq__", _equal),
        ("__hash__", _hash),
        ("__repr__", _repr),
        ("__setattr__", _refuse_set),
        ("__delattr__", _refuse_delete),
    ):
        if made.__dict__.get(name) is None:  # one the class writes itself stays
            setattr(made, name, method)
    return made


def _values(names: list[str]) -> Callable[[object], tuple[Any, ...]]:
    """A function giving an object's NAMES attributes as a tuple (one for none or one name as well).

    A class holds it as a staticmethod: a lambda, unlike an attrgetter, would be bound to the record.
    """
    if not names:
        return lambda _: ()
    if len(names) == 1:
        only = attrgetter(names[0])
        return lambda value: (only(value),)
    return attrgetter(*names)


def _equal(self: Any, other: Any) -> Any:  # a bool, or NotImplemented for another class
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = self.__record_compared__
    return bool(compared(self) == compared(other))


def _hash(self: Any) -> int:
    return hash(self.__record_hashed__(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def _refuse_set(self: Any, name: str, value: object) -> None:
    # __init__ sets each field once; after that, as in a frozen dataclass, nothing may change
    fields = self.__dict__  # written directly: a record is made for every block, and this runs for each field
    if name in fields or name not in self.__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    fields[name] = value


def _refuse_delete(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
