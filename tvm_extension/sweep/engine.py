"""Where the points run: Ray tasks (``ray.init()`` on this machine, or ``address`` to join a
cluster), each in its own worker process and working folder; without Ray installed, a local
process pool behind the same interface.  And the progress line."""
import concurrent.futures
import logging
import sys
import time
from typing import Callable, Iterator, Optional, Sequence, Tuple


class EngineError(Exception):
    """The engine cannot start (no Ray for --address, cluster unreachable): one line."""


class RayEngine:
    name = "ray"

    def __init__(self, address: Optional[str] = None, workers: Optional[int] = None):
        import ray  # pylint: disable=import-outside-toplevel

        self.ray = ray
        try:
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise EngineError(f"cannot start or join Ray at {address or 'this machine'}: "
                              f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}") from None
        self.nodes = sum(1 for n in ray.nodes() if n.get("Alive"))

    def imap(self, fn: Callable, calls: Sequence[tuple]) -> Iterator[Tuple[int, object]]:
        """(index, result or the exception that killed the task), as tasks finish."""
        remote = self.ray.remote(num_cpus=1, max_retries=0)(_located)
        pending = {remote.remote(fn, *args): i for i, args in enumerate(calls)}
        while pending:
            (ready,), _ = self.ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready)
            try:
                node, result = self.ray.get(ready)
            except Exception as err:  # pylint: disable=broad-except  # a task that died (worker killed...)
                yield index, err
                continue
            yield index, {**result, "node": node[:12]} if isinstance(result, dict) else result

    def close(self):
        self.ray.shutdown()


def _located(fn: Callable, *args):
    """``fn(*args)`` and the id of the Ray node it ran on."""
    import ray  # pylint: disable=import-outside-toplevel

    return ray.get_runtime_context().get_node_id(), fn(*args)


class LocalEngine:
    """Ray's stand-in: one process per point at a time, ``workers`` at once."""

    name = "processes"
    nodes = 1

    def __init__(self, workers: Optional[int] = None):
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers)

    def imap(self, fn: Callable, calls: Sequence[tuple]) -> Iterator[Tuple[int, object]]:
        futures = {self.pool.submit(fn, *args): i for i, args in enumerate(calls)}
        for future in concurrent.futures.as_completed(futures):
            error = future.exception()
            yield futures[future], error if error else future.result()

    def close(self):
        self.pool.shutdown()


def start(address: Optional[str] = None, workers: Optional[int] = None, use_ray: bool = True):
    try:
        import ray  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        if address:
            raise EngineError("--address needs Ray: pip install ray") from None
        use_ray = False
    return RayEngine(address, workers) if use_ray else LocalEngine(workers)


class Progress:
    """``sweep: 7/12 points, 1 failed, 4 cached, 0:21 left``, redrawn in place on a terminal
    (time left: the time so far per computed point, times the points left)."""

    def __init__(self, total: int, cached: int, failed: int = 0, stream=sys.stderr):
        self.total, self.done, self.failed, self.cached = total, cached, failed, cached
        self.started, self.stream = time.time(), stream

    def update(self, record: dict):
        self.done += 1
        self.failed += bool(record.get("error"))
        self.show()

    def show(self):
        computed, left = self.done - self.cached, ""
        if computed and self.done < self.total:
            seconds = (time.time() - self.started) / computed * (self.total - self.done)
            left = f", {int(seconds) // 60}:{int(seconds) % 60:02d} left"
        line = f"sweep: {self.done}/{self.total} points, {self.failed} failed, {self.cached} cached{left}"
        self.stream.write("\r" + line.ljust(72) if self.stream.isatty() else line + "\n")
        self.stream.flush()

    def note(self, text: str):
        self.stream.write(("\r" if self.stream.isatty() else "") + text.ljust(72) + "\n")
        self.show()

    def finish(self):
        if self.stream.isatty():
            self.stream.write("\n")
