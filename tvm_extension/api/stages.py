"""The stages of a compile, timed: logged to the ``tvm_extension`` logger (tvmc's ``-vv``) and,
on a terminal, shown on one line of stderr while a stage runs longer than a few seconds.

    with stage("partitioning for vanilla_accelerator"):
        ...
"""
import contextlib
import logging
import sys
import threading
import time

logger = logging.getLogger("tvm_extension")
SHOW_AFTER = 3.0  # seconds: shorter stages are not worth a progress line

_running = []  # (name, start) of the stages entered and not left, innermost last
_lock = threading.Lock()
_watcher = None


def _show_progress():
    shown = False
    while True:
        time.sleep(0.5)
        with _lock:
            name, start = _running[-1] if _running else (None, 0.0)
        elapsed = time.monotonic() - start
        if name is not None and elapsed >= SHOW_AFTER:
            sys.stderr.write(f"\r\x1b[K{name} ({elapsed:.0f} s)")
            shown = True
        elif name is None and shown:
            sys.stderr.write("\r\x1b[K")
            shown = False
        sys.stderr.flush()


def _watch_on_terminal():
    global _watcher
    if _watcher is None and sys.stderr.isatty():
        _watcher = threading.Thread(target=_show_progress, name="tvm_extension-progress", daemon=True)
        _watcher.start()


@contextlib.contextmanager
def stage(name: str, level: int = logging.INFO):
    """Time the block; log its name and seconds at ``level`` when it ends."""
    _watch_on_terminal()
    start = time.monotonic()
    with _lock:
        _running.append((name, start))
    try:
        yield
    finally:
        with _lock:
            _running.remove((name, start))
        logger.log(level, "%s: %.2f s", name, time.monotonic() - start)
