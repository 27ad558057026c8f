"""The stages of a compile, timed: logged to the ``tvm_extension`` logger (tvmc's ``-vv``) and,
on a terminal, shown on one line of stderr while a stage runs longer than a few seconds, and
cleared as soon as that stage ends (what is printed next starts on a clean line).

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
_lock = threading.Lock()  # also held while the line is written, so a clear is never overwritten
_watcher = None
_shown = False  # a progress line is on the terminal


def _clear():
    global _shown
    if _shown:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
        _shown = False


def _show_progress():
    global _shown
    while True:
        time.sleep(0.5)
        with _lock:
            name, start = _running[-1] if _running else (None, 0.0)
            elapsed = time.monotonic() - start
            if name is not None and elapsed >= SHOW_AFTER:
                sys.stderr.write(f"\r\x1b[K{name} ({elapsed:.0f} s)")
                sys.stderr.flush()
                _shown = True
            else:
                _clear()


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
            _clear()  # the stage's line goes with it, even when an outer stage still runs
        logger.log(level, "%s: %.2f s", name, time.monotonic() - start)
