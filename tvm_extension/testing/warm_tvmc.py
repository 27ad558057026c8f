"""tvmc in a process forked from one that has already imported TVM, Relay and tvmc.

A new ``tvmc`` process spends about 3 s of CPU importing TVM before it reads its arguments; a
suite of hundreds of compiles pays that hundreds of times.  Here a small server (one per calling
process, started on first use) imports them once and forks a child for each call: a process of
its own (its exit status, file descriptors 1 and 2 captured, its environment and working
directory, a crash confined to it) with the ``sys.path`` a new ``tvmc`` would have.  What an
interpreter reads only while starting (``PYTHON*`` variables, ``TVM_EXTENSION_DISABLE`` in the
start-up hook) cannot change in a fork: a call that changes them gets a new process (``run``
returns None), as does every call when ``TVM_EXTENSION_TEST_FORK=0``.
"""
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

# Read by an interpreter only while it starts (or by the start-up hook): a fork cannot honour a change.
_START_UP = ("PYTHON", "LD_", "TVM_EXTENSION_DISABLE", "TVM_LIBRARY_PATH")
_PRELOAD = ["tvm", "tvm.relay", "tvm.driver.tvmc", "tvm.driver.tvmc.main", "onnx", "tflite"]


def _start_up_vars(env) -> dict:
    return {k: v for k, v in env.items() if k.startswith(_START_UP)}


# --- the server (python -m tvm_extension.testing.warm_tvmc) ------------------------------------------

def _child(request) -> int:
    """What ``tvmc ARGS`` does, in the forked child: its exit status."""
    import atexit  # pylint: disable=import-outside-toplevel
    import traceback  # pylint: disable=import-outside-toplevel

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request["path"]
    sys.argv = request["argv"]
    for fd, path in ((0, os.devnull), (1, request["out"]), (2, request["err"])):
        file = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, fd)
        os.close(file)
    sys.stdin, sys.stdout, sys.stderr = (open(fd, mode, closefd=False) for fd, mode in ((0, "r"), (1, "w"), (2, "w")))
    code = 0
    try:
        from tvm.driver.tvmc.main import main  # pylint: disable=import-outside-toplevel

        main()
    except SystemExit as exit_:  # as the interpreter treats it
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:  # pylint: disable=broad-except  (the interpreter prints it and exits 1)
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # pylint: disable=protected-access  (what a process runs as it exits)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def serve():
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(request))  # pylint: disable=protected-access
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


# --- the caller -------------------------------------------------------------------------------------

class _Server:
    def __init__(self):
        self.start_up = _start_up_vars(os.environ)
        self.process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=tempfile.gettempdir())
        self.lock = threading.Lock()
        self.fresh_path = json.loads(subprocess.run(
            [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"], capture_output=True,
            text=True, check=True, cwd=tempfile.gettempdir()).stdout)

    def _reply(self, timeout=None) -> dict:
        if timeout is not None and not select.select([self.process.stdout], [], [], timeout)[0]:
            return {}
        line = self.process.stdout.readline()
        if not line:
            raise OSError("the warm tvmc server stopped")
        return json.loads(line)

    def call(self, request: dict, timeout: float) -> int:
        with self.lock:
            if not hasattr(self, "ready"):
                self.ready = self._reply()
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = self._reply()["pid"]
            reply = self._reply(timeout)
            if not reply:
                os.kill(pid, signal.SIGKILL)
                self._reply()
                raise subprocess.TimeoutExpired(["tvmc", *request["argv"][1:]], timeout)
            return reply["code"]


_server: Optional[_Server] = None


def run(script: Path, module: bool, args, cwd=None, env=None, timeout=900) -> Optional[subprocess.CompletedProcess]:
    """``tvmc ARGS`` (the console ``script``, or ``python -m tvm.driver.tvmc`` with ``module``)
    in a forked child; None where only a new process would be the same."""
    global _server
    env = dict(os.environ if env is None else env)
    if os.environ.get("TVM_EXTENSION_TEST_FORK", "1") == "0":
        return None
    if _server is None or _server.process.poll() is not None:
        _server = _Server()
    if _start_up_vars(env) != _server.start_up:
        return None
    cwd = os.path.abspath(cwd or os.getcwd())
    # sys.path[0]: a console script's folder; the working directory for -m (and for a shell
    # wrapper that runs -m, as the backend folders' test environments have)
    runs_module = module or not script.read_text(errors="replace").startswith(f"#!{sys.executable}\n")
    tvm_folder = Path(importlib.util.find_spec("tvm").origin).parent  # located, not imported
    argv = [str(tvm_folder / "driver" / "tvmc" / "__main__.py") if runs_module else str(script), *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="tvmc-") as captured:
        out, err = os.path.join(captured, "out"), os.path.join(captured, "err")
        request = dict(argv=argv, cwd=cwd, env=env, out=out, err=err,
                       path=[cwd if runs_module else str(script.parent), *_server.fresh_path])
        code = _server.call(request, timeout)
        read = lambda path: Path(path).read_text(errors="replace") if os.path.exists(path) else ""
        return subprocess.CompletedProcess(["tvmc", *argv[1:]], code, read(out), read(err))


if __name__ == "__main__":
    serve()
