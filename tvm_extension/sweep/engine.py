"""Where the points run: Ray tasks, each in its own worker process and working folder, on a local
Ray of the sweep's own (its own temporary folder; never a cluster it was not asked to join) or on
the cluster at ``address``; without Ray installed, a local process pool behind the same interface.
And the progress line.

A task whose worker or node dies (not the point's own error: a point turns its failures into its
record) is run again: by Ray itself (``max_retries``) while Ray can, then on a local process pool
when Ray has lost what it ran on; its record says so (``retried``)."""
import concurrent.futures
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator, Optional, Sequence, Tuple

# Times a point is run again after the process running it died (by Ray, then by a local pool).
RETRIES = 3


class EngineError(Exception):
    """The engine cannot start (no Ray for --address, cluster unreachable): one line."""


def _retried(result, how: str):
    return {**result, "retried": how} if isinstance(result, dict) else result


class RayEngine:
    name = "ray"

    def __init__(self, address: Optional[str] = None, workers: Optional[int] = None):
        import ray  # pylint: disable=import-outside-toplevel

        self.ray, self.workers = ray, workers
        # Given no address, Ray joins whatever cluster /tmp/ray/ray_current_cluster names (another
        # sweep's, a test's): "local" starts one of our own, in a temporary folder of our own.
        if address:
            _reachable(address)
        self.temp_dir = None if address else tempfile.mkdtemp(prefix="sweep-ray-")
        try:
            if address:
                ray.init(address=address, **self._quiet())
            else:
                ray.init(address="local", num_cpus=workers, _temp_dir=self.temp_dir, **self._quiet())
        except (ConnectionError, RuntimeError, ValueError) as err:
            self._remove_temp_dir()
            raise EngineError(f"cannot start or join Ray at {address or 'this machine'}: "
                              f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}") from None
        self.nodes = sum(1 for n in ray.nodes() if n.get("Alive"))

    @staticmethod
    def _quiet() -> dict:
        return {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}

    def imap(self, fn: Callable, calls: Sequence[tuple]) -> Iterator[Tuple[int, object]]:
        """(index, result or the exception the task raised), as tasks finish."""
        from ray.exceptions import RayTaskError  # pylint: disable=import-outside-toplevel

        # Ray runs a task again when its worker or node dies, never for the task's own exception.
        remote = self.ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(_located)
        pending = {remote.remote(fn, *args): i for i, args in enumerate(calls)}
        lost = {}
        while pending:
            (ready,), _ = self.ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready)
            try:
                node, attempt, result = self.ray.get(ready)
            except RayTaskError as err:  # the function's own exception
                yield index, err.as_instanceof_cause()
                continue
            except Exception as err:  # pylint: disable=broad-except  # Ray lost the worker or node every time
                lost[index] = f"{type(err).__name__}"
                continue
            result = {**result, "node": node[:12]} if isinstance(result, dict) else result
            yield index, _retried(result, f"by Ray, attempt {attempt + 1}") if attempt else result
        if lost:  # what Ray could not finish, on this machine
            local = LocalEngine(self.workers)
            try:
                for position, result in local.imap(fn, [calls[i] for i in lost]):
                    index = list(lost)[position]
                    yield index, _retried(result, f"locally after Ray lost it ({lost[index]})")
            finally:
                local.close()

    def _remove_temp_dir(self):
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def close(self):
        self.ray.shutdown()
        self._remove_temp_dir()


def _reachable(address: str, seconds: float = 10.0):
    """EngineError unless something listens at the cluster's HOST:PORT (Ray itself retries an
    unreachable address for minutes, printing as it goes)."""
    if address == "auto":
        return
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host or "localhost", int(port)), timeout=seconds).close()
    except ValueError:
        raise EngineError(f"--address {address}: expected HOST:PORT (ray start --head prints it)") from None
    except OSError as err:
        raise EngineError(f"cannot reach Ray at {address}: {err.strerror or err}") from None


def _located(fn: Callable, *args):
    """(the id of the Ray node this runs on, how many times Ray ran it before, ``fn(*args)``)."""
    import ray  # pylint: disable=import-outside-toplevel

    # Ray keeps the attempt number in its core worker; not every Ray version offers it.
    worker = getattr(ray._private.worker, "global_worker", None)  # pylint: disable=protected-access
    attempt = getattr(getattr(worker, "core_worker", None), "get_current_task_attempt_number", lambda: 0)()
    return ray.get_runtime_context().get_node_id(), attempt, fn(*args)


class LocalEngine:
    """Ray's stand-in: one process per point at a time, ``workers`` at once.  A worker process
    that dies breaks the pool: the points it had not finished run again in a new one."""

    name = "processes"
    nodes = 1

    def __init__(self, workers: Optional[int] = None):
        self.workers = workers
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers)

    def imap(self, fn: Callable, calls: Sequence[tuple]) -> Iterator[Tuple[int, object]]:
        attempts = dict.fromkeys(range(len(calls)), 0)
        while attempts:
            futures = {self.pool.submit(fn, *calls[i]): i for i in attempts}
            broken = False
            for future in concurrent.futures.as_completed(futures):
                index, error = futures[future], future.exception()
                if isinstance(error, BrokenProcessPool) and attempts[index] < RETRIES:
                    broken = True
                    continue
                attempt = attempts.pop(index)
                result = error if error else future.result()
                yield index, _retried(result, f"locally, attempt {attempt + 1}") if attempt else result
            if broken:
                self.pool.shutdown(cancel_futures=True)
                self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.workers)
                for index in attempts:
                    attempts[index] += 1

    def close(self):
        self.pool.shutdown()


def start(address: Optional[str] = None, workers: Optional[int] = None, use_ray: bool = True):
    """Ray (joining ``address``, or ``$RAY_ADDRESS`` when a user set it, else a local Ray of our
    own), or the process pool without Ray or with ``use_ray=False``."""
    try:
        import ray  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        if address:
            raise EngineError("--address needs Ray: pip install ray") from None
        use_ray = False
    address = address or os.environ.get("RAY_ADDRESS") or None
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
