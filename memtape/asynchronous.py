"""The async API: `memtape.open_async`, for agents on an event loop (browser-use, most frameworks).

    async with memtape.open_async(".agent-memory") as mem:
        async with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
            await run.record_step(step=1, action="click", target='button "Buy"', ok=True)
            await mem.recall_domain("shop.example")
            await mem.search("cookie banner")
            await run.finish(success=True)

`AsyncMemory` and `AsyncRun` are generated from the sync `Memory` and `Run`: each public method
of theirs is the same method awaited, with the same signature and docstring (one rule, no
hand-written twin to fall behind). Every call runs on the memory's own worker thread, one at a
time in the order awaited, so the event loop waits for no SQLite transaction and the ledger
connection is used by one thread at a time; what a call returns is the sync call's answer (a
`Run` comes back as an `AsyncRun`). Attributes that are not methods (`run.run_id`, `run.url`,
`mem.policy`) read through.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memtape import api
from memtape.api import Memory, MemtapeError, Run

#: methods the async classes do not offer awaited: the sync context protocol is replaced by the async one
_NOT_AWAITED = frozenset({"close"})
Wrapper = TypeVar("Wrapper", bound=type)


class Worker:
    """One thread that makes a memory's calls, one at a time, in the order they were awaited."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtape")

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))


def _awaited(name: str, method: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`method` of the wrapped object, run on the worker; a returned Run or Memory is wrapped."""

    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(await self._worker.call(getattr(self._sync, name), *args, **kwargs))

    return call


def _generated(sync: type) -> Callable[[Wrapper], Wrapper]:
    """Give the decorated class every public method of `sync`, awaited (`_awaited`)."""

    def decorate(cls: Wrapper) -> Wrapper:
        for name, method in inspect.getmembers(sync, inspect.isfunction):
            if name.startswith("_") or name in _NOT_AWAITED or name in cls.__dict__:
                continue
            setattr(cls, name, _awaited(name, method))
        return cls

    return decorate


class _Async:
    """What both async classes share: the sync object, its worker, attribute read-through."""

    def __init__(self, sync: Any, worker: Worker):
        self._sync = sync
        self._worker = worker

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._sync, name)
        if callable(value):
            raise AttributeError(f"{type(self).__name__} has no method {name!r}")
        return value

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, Run):
            return AsyncRun(value, self._worker)
        return value


@_generated(Run)
class AsyncRun(_Async):
    """A `Run` whose methods are awaited; `async with` finishes it as `with` does (failed with the
    error when the block raises, "unfinished" when it ends without `finish`)."""

    def __repr__(self) -> str:
        return f"Async{self._sync!r}"

    async def __aenter__(self) -> AsyncRun:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._worker.call(self._sync.__exit__, kind, exc, tb)


class _Starting:
    """`mem.start_run(...)`: awaited, the run; used with `async with`, the run for the block."""

    def __init__(self, started: Awaitable[AsyncRun]):
        self._started = started
        self._run: AsyncRun | None = None

    def __await__(self) -> Generator[Any, None, AsyncRun]:
        return self._started.__await__()

    async def __aenter__(self) -> AsyncRun:
        self._run = await self._started
        return self._run

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._run is not None:
            await self._run.__aexit__(kind, exc, tb)


@_generated(api.Memory)
class AsyncMemory(_Async):
    """A `memtape.Memory` whose methods are awaited; `async with` closes it (as does `aclose`)."""

    def __repr__(self) -> str:
        return f"AsyncMemory({self._sync.store!r})"

    @property
    def memory(self) -> Memory:
        """The sync memory this one awaits (an integration that runs its own calls off the loop uses it)."""
        return self._sync  # type: ignore[no-any-return]

    @property
    def worker(self) -> Worker:
        """The one thread this memory's calls run on (`await mem.worker.call(fn, *args)`)."""
        return self._worker

    @functools.wraps(Memory.start_run)
    def start_run(self, **fields: Any) -> _Starting:
        """`Memory.start_run`, awaited or used as `async with mem.start_run(...) as run:`."""
        return _Starting(_awaited("start_run", Memory.start_run)(self, **fields))

    async def aclose(self) -> None:
        """Remember the head this memory saw, close the ledger, then stop the worker thread."""
        try:
            await self._worker.call(self._sync.close)
        finally:
            self._worker.pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Opening:
    """`memtape.open_async(...)`: awaited, the memory; used with `async with`, closed after the block."""

    def __init__(self, location: str | Path, options: dict[str, Any]):
        self._location = location
        self._options = options
        self._memory: AsyncMemory | None = None

    async def _open(self) -> AsyncMemory:
        worker = Worker()
        try:
            sync = await worker.call(api.open, self._location, **self._options)
        except BaseException:
            worker.pool.shutdown(wait=False)
            raise
        return AsyncMemory(sync, worker)

    def __await__(self) -> Generator[Any, None, AsyncMemory]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemory:
        self._memory = await self._open()
        return self._memory

    async def __aexit__(self, *exc: object) -> None:
        if self._memory is not None:
            await self._memory.aclose()


def open_async(location: str | Path = ".agent-memory", **options: Any) -> _Opening:
    """`memtape.open` for async code: `async with memtape.open_async(path) as mem:` (or
    `mem = await memtape.open_async(path)`, then `await mem.aclose()`); the same options."""
    if not isinstance(location, (str, Path)) or not str(location).strip():
        raise MemtapeError(f"location must be a directory or a postgresql:// URL, got {location!r:.60}")
    return _Opening(location, options)


__all__ = ["open_async", "AsyncMemory", "AsyncRun"]
