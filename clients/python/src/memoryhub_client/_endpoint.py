"""How one definition of an API method becomes a method of both clients.

An operation is written once, in ``_methods.Methods``, as a builder: its signature and docstring
are the method's, and its body only prepares the request (a ``_core.Call``). The ``endpoint``
descriptor gives ``MemoryHub`` a plain method that sends that request and ``AsyncMemoryHub`` a
coroutine method that awaits it, each with the builder's signature, docstring and answer type,
both at run time (``inspect``, ``help``, the contract check) and to a type checker (the overloads
of ``__get__``). A change to an operation is then one edit, and the two clients cannot drift.
"""

from __future__ import annotations

import functools
import inspect
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memoryhub_client._core import Call

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class SyncSender(ABC):
    """A client that sends a request and returns its answer (``MemoryHub``)."""

    @abstractmethod
    def _send(self, call: Call[R]) -> R:
        """The decoded answer to ``call``, retried under the client's policy."""


class AsyncSender(ABC):
    """A client whose methods are awaited (``AsyncMemoryHub``)."""

    @abstractmethod
    async def _send(self, call: Call[R]) -> R:
        """The decoded answer to ``call``, retried under the client's policy."""


class endpoint(Generic[P, R]):
    """A method of both clients from one builder (see the module's docstring); lower case
    because it is used as a decorator, like ``property``."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[R]]) -> None:
        self.build = build

    # Made on first use, not at import: dressing all 56 at import took ~4 ms, and a hook process
    # that imports the client to call one method should not pay for the others.
    @functools.cached_property
    def _sync(self) -> Callable[..., Any]:
        build = self.build

        def method(client: SyncSender, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return client._send(build(client, *args, **kwargs))

        return _like(method, build)

    @functools.cached_property
    def _async(self) -> Callable[..., Any]:
        build = self.build

        async def method(client: AsyncSender, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return await client._send(build(client, *args, **kwargs))

        return _like(method, build)

    @overload
    def __get__(self, obj: None, owner: type[SyncSender]) -> Callable[Concatenate[SyncSender, P], R]: ...

    @overload
    def __get__(
        self, obj: None, owner: type[AsyncSender]
    ) -> Callable[Concatenate[AsyncSender, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: SyncSender, owner: type[Any]) -> Callable[P, R]: ...

    @overload
    def __get__(self, obj: AsyncSender, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, obj: object, owner: type[Any]) -> Callable[..., Any]:
        method = self._async if issubclass(owner, AsyncSender) else self._sync
        return method if obj is None else MethodType(method, obj)


def _like(method: F, build: Callable[..., Any]) -> F:
    """``method`` dressed as ``build`` answering what its request decodes to: what ``help()``,
    ``inspect.signature`` and ``typing.get_type_hints`` show a user of either client."""
    # Not ``functools.wraps``: its ``__wrapped__`` would lead ``inspect`` to the builder, which
    # answers a Call.
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(method, name, getattr(build, name))
    hints = typing.get_type_hints(build)
    returns = typing.get_args(hints["return"])[0]
    method.__annotations__ = {**hints, "return": returns}
    signature = inspect.signature(build)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
    method.__signature__ = signature.replace(parameters=parameters, return_annotation=returns)  # type: ignore[attr-defined]
    return method
