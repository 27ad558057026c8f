"""One line for what a user gave tvmc that cannot work: a model file its frontend cannot read
or import, an output path whose folder does not exist.

TVMC prints a ``TVMCException`` as ``Error: ...`` and exits 4; the frontends raise whatever
their parser raises (protobuf's ``DecodeError``, ``struct.error``, TVM's ``OpNotImplemented``),
which would end in a traceback.  ``-vv`` still logs that traceback.
"""
import functools
import os
import struct
from pathlib import Path

from tvm_extension.api import stages

# What a parser raises on bytes that are not a model of its format (truncated, damaged, other).
UNREADABLE = (struct.error, ValueError, IndexError, EOFError, UnicodeDecodeError)


def _first_line(exc: BaseException) -> str:
    """The message's first line that is not a traceback (TVM's errors carry the C++ one)."""
    lines = [l.strip() for l in str(exc).splitlines() if l.strip()]
    text = next((l for l in lines if not l.startswith(("Traceback", "File ")) and not l[0].isdigit()),
                lines[0] if lines else "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe_load_failure(path: str, model_format, exc: BaseException) -> str:
    from google.protobuf.message import DecodeError  # pylint: disable=import-outside-toplevel
    from tvm.error import OpError  # pylint: disable=import-outside-toplevel

    kind = model_format or Path(path).suffix.lstrip(".") or "model"
    if isinstance(exc, OpError):  # a valid model using what TVM's frontend cannot import
        return f"{path}: TVM's {kind} frontend cannot import it: {str(exc).strip().splitlines()[0]}"
    if isinstance(exc, (DecodeError, *UNREADABLE)):
        reason = _first_line(exc).split(": ", 1)[-1]  # "error: unpack_from..." says less than the text alone
        return f"{path} is not a readable {kind} model (truncated, damaged or another format): {reason}"
    return f"{path}: TVM's {kind} frontend failed on it: {_first_line(exc)}"


def install(frontends, tvmc):
    """Wrap ``frontends.load_model`` (what ``tvmc compile``/``tune`` call) and ``tvmc.load``."""
    original = frontends.load_model

    @functools.wraps(original)
    def load_model(path, model_format=None, shape_dict=None, **kwargs):
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            raise tvmc.TVMCException(f"{path} is empty")
        try:
            return original(path, model_format, shape_dict, **kwargs)
        except tvmc.TVMCImportError:
            raise  # a frontend's package is missing: TVMC's own message and exit code
        except tvmc.TVMCException as err:  # TVMC's own words ("input file not tflite"): name the file
            message = str(err)
            raise tvmc.TVMCException(message if str(path) in message else f"{path}: {message}") from None
        except Exception as exc:  # the frontend's parser or converter, on the user's file
            stages.logger.debug("loading %s failed", path, exc_info=True)
            raise tvmc.TVMCException(describe_load_failure(str(path), model_format, exc)) from None

    frontends.load_model = load_model
    tvmc.load = load_model


def check_output_path(path) -> None:
    """Before compiling: the output must be a file in an existing folder (ValueError otherwise)."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"output path {path} is a folder: give a file name, e.g. -o {path / 'model.tar'}")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"output folder {folder} of -o {path} does not exist: create it first")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"output folder {folder} of -o {path} is not writable")
