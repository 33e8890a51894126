"""The sync and async clients are one set of methods: the async client has every public method of
the sync one with the same parameters, answer and docstring, awaited; each method sends the
operation named after it; and a type checker sees each method's own signature and answer (a
coroutine of it on the async client). The comparison is shown to catch a planted drift."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from memoryhub_client import AsyncMemoryHub, MemoryHub
from memoryhub_client._endpoint import endpoint
from memoryhub_client._methods import Methods
from memoryhub_client.operations import OPERATIONS

from tests.clients.conftest import CLIENT_SRC

# The same method under the name each client's protocol gives it.
ASYNC_NAME = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
# The one method that is not awaited on the async client: it answers an async iterator.
NOT_AWAITED = {"iter_memories"}


def public_methods(cls: type) -> dict[str, Any]:
    names = [name for name in dir(cls) if not name.startswith("_")] + ["__init__", *ASYNC_NAME, *ASYNC_NAME.values()]
    return {name: getattr(cls, name) for name in names if callable(getattr(cls, name, None))}


def differences(sync: type, asynchronous: type) -> list[str]:
    """Every way the two clients' public methods differ, one sentence each."""
    ours, theirs = public_methods(sync), public_methods(asynchronous)
    mirrored = {ASYNC_NAME.get(name, name) for name in ours}
    problems = [f"{name}: only on {sync.__name__}" for name in ours if ASYNC_NAME.get(name, name) not in theirs]
    problems += [f"{name}: only on {asynchronous.__name__}" for name in theirs if name not in mirrored]
    for name, method in ours.items():
        twin = theirs.get(ASYNC_NAME.get(name, name))
        if twin is None or name in ("__init__", *ASYNC_NAME):
            continue
        shape, twin_shape = _shape(method), _shape(twin)
        if shape != twin_shape:
            problems.append(f"{name}: {shape} on {sync.__name__}, {twin_shape} on {asynchronous.__name__}")
        if method.__doc__ != twin.__doc__:
            problems.append(f"{name}: the docstrings differ")
        awaited = inspect.iscoroutinefunction(twin)
        if inspect.iscoroutinefunction(method) or awaited == (name in NOT_AWAITED):
            problems.append(f"{name}: awaited on the wrong client")
    return problems


def _shape(method: Any) -> tuple[Any, ...]:
    parameters = [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]
    hints = typing.get_type_hints(method)
    answer = hints.pop("return", None)
    # The one sanctioned difference in answers: an iterator of memories becomes an async one.
    if typing.get_origin(answer) in (Iterator, AsyncIterator):
        answer = typing.get_args(answer)
    return tuple(parameters), hints, answer


def test_both_clients_have_the_same_methods_with_the_same_signatures_and_docstrings():
    assert differences(MemoryHub, AsyncMemoryHub) == []
    assert set(OPERATIONS) <= set(public_methods(MemoryHub))


def test_a_method_one_client_lacks_or_takes_differently_fails_the_comparison():
    class Drifted(AsyncMemoryHub):
        async def pin_memory(self, *, memory_id: str, user_id: str) -> None:
            """Pin a memory."""

        async def get_profile(self, *, user_id: str, fresh: bool = False) -> Any:  # type: ignore[override]
            """The user's profile (``NotFound`` before the first is built)."""

        def consolidation(self, *, job_id: str, user_id: str) -> Any:  # type: ignore[override]
            """A consolidation's state: status, counts per action, and what it did or proposed."""

    problems = differences(MemoryHub, Drifted)
    assert "pin_memory: only on Drifted" in problems
    assert any(p.startswith("get_profile: ((('self'") and "'fresh'" in p for p in problems)
    assert "consolidation: awaited on the wrong client" in problems


def test_each_method_sends_the_operation_named_after_it():
    builders = {name: value for name, value in vars(Methods).items() if isinstance(value, endpoint)}
    assert set(builders) == set(OPERATIONS)
    for name, method in builders.items():
        required = [p.name for p in inspect.signature(method.build).parameters.values() if p.default is p.empty]
        call = method.build(None, **dict.fromkeys(required[1:], "x"))
        assert call.operation is OPERATIONS[name], name


TYPED_USE = """
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, assert_type

from memoryhub_client import AsyncMemoryHub, Memory, MemoryHub
from memoryhub_client.models import Consolidation, MemoryWrite


async def use(hub: MemoryHub, ahub: AsyncMemoryHub) -> None:
    assert_type(hub.get_memory(memory_id="m", user_id="u"), Memory)
    pending = assert_type(ahub.get_memory(memory_id="m", user_id="u"), Coroutine[Any, Any, Memory])
    assert_type(await pending, Memory)
    assert_type(hub.create_memory(user_id="u", content="c", idempotency_key="k"), MemoryWrite)
    assert_type(await ahub.create_memory(user_id="u", content="c"), MemoryWrite)
    assert_type(hub.delete_memory(memory_id="m", user_id="u"), None)
    assert_type(hub.tools(), list[dict[str, Any]])
    assert_type(hub.iter_memories(user_id="u"), Iterator[Memory])
    assert_type(ahub.iter_memories(user_id="u"), AsyncIterator[Memory])
    assert_type(await ahub.wait_for_consolidation(job_id="j", user_id="u"), Consolidation)
    assert_type(MemoryHub.get_memory(hub, memory_id="m", user_id="u"), Memory)
    hub.get_memory(memory_id=1, user_id="u")  # type: ignore[arg-type]
    hub.get_memory("m", "u")  # type: ignore[call-arg]
    await ahub.get_memory(memory_id="m", user_id="u", colour="red")  # type: ignore[call-arg]
    unawaited: Memory = ahub.get_memory(memory_id="m", user_id="u")  # type: ignore[assignment]
"""


def test_a_type_checker_sees_each_clients_own_signatures_and_answers(tmp_path: Path):
    # Each ``type: ignore`` must be used (``--warn-unused-ignores``): the wrong calls are errors.
    (tmp_path / "use.py").write_text(TYPED_USE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--warn-unused-ignores", "--cache-dir", "/dev/null", "use.py"],
        cwd=tmp_path,
        env={"MYPYPATH": str(CLIENT_SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
