"""The same compile gives the same archive: what TVM leaves to the clock or to hash order, fixed.

* the time: ``SOURCE_DATE_EPOCH`` (https://reproducible-builds.org/specs/source-date-epoch/)
  when set, else 1970-01-01;
* the AOT main function's pointer declarations (``void* sid_3_let = (&(global_workspace_1_var[64]));``),
  which TVM emits in the order of a table keyed by object addresses: sorted by name;
* map-valued function attributes in the Relay text (``{"pad_top"=0, ...}``): TVM builds a map handed
  over from Python through an address-keyed table too, so it prints them in varying order: sorted;
* the operator functions listed in ``metadata.json``, and the parameters in ``parameters/``
  (TVM saves them from an address-keyed table too): sorted by name;
* the tar: members sorted by name, owned by root, modes 644/755, every time the build time.
"""
import os
import re
import struct
import tarfile
import time

EPOCH_VARIABLE = "SOURCE_DATE_EPOCH"


class BuildTimeError(ValueError):
    """SOURCE_DATE_EPOCH is set but is not a number of seconds."""


def build_time() -> int:
    """Seconds since 1970 to stamp the archive with."""
    text = os.environ.get(EPOCH_VARIABLE, "")
    if not text:
        return 0
    if not text.isdigit():  # the spec asks a build to stop on a malformed value
        raise BuildTimeError(f"{EPOCH_VARIABLE} must be a whole number of seconds since 1970, not '{text}'")
    return int(text)


def settle_metadata(metadata: dict, seconds: int) -> dict:
    """metadata.json's export time set to ``seconds``, its operator functions in name order."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(seconds))
    for module in metadata["modules"].values():
        module["export_datetime"] = stamp
        functions = module.get("memory", {}).get("functions", {})
        if "operator_functions" in functions:
            functions["operator_functions"].sort(key=lambda f: f["function_name"])
    return metadata


def params_in_name_order(params: dict) -> bytes:
    """TVM's params file, parameters in name order.  Its layout: a 16-byte header, the count, the
    names (length, bytes), the count, the arrays; the pieces are cut from one-parameter files so
    the arrays stay in TVM's own format (the Relay engine's TVM)."""
    from tvm.runtime import save_param_dict  # pylint: disable=import-outside-toplevel

    names, arrays = [], []
    for name in sorted(params):
        single = save_param_dict({name: params[name]})
        cut = 32 + len(name.encode())
        names.append(single[24:cut])
        arrays.append(single[cut + 8:])
    count = struct.pack("<Q", len(names))
    return save_param_dict({})[:16] + count + b"".join(names) + count + b"".join(arrays)


# A pointer into a workspace parameter; the right-hand side names no other declaration,
# so a run of these lines can be put in any order.
_POINTER_DECLARATION = re.compile(r"^(\s*)void\* (\w+) = \(&\(\w+_var\[\d+\]\)\);$")


def _natural(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def sorted_declarations(source: str) -> str:
    """Generated C with each run of workspace pointer declarations in name order (sid_2 before sid_10)."""
    lines = source.split("\n")
    start = 0
    while start < len(lines):
        match = _POINTER_DECLARATION.match(lines[start])
        end = start + 1
        while match and end < len(lines):
            following = _POINTER_DECLARATION.match(lines[end])
            if not following or following.group(1) != match.group(1):
                break
            end += 1
        if end - start > 1:
            lines[start:end] = sorted(lines[start:end], key=lambda l: _natural(_POINTER_DECLARATION.match(l).group(2)))
        start = end
    return "\n".join(lines)


# A quoted string, a run of ordinary characters, or one bracket/comma.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[^"{}\[\](),]+|.', re.DOTALL)


def _group(text: str, start: int):
    """(end, top-level comma-separated items) of the bracket group opening at text[start];
    None if it never closes."""
    depth, items, begin = 0, [], start + 1
    for token in _TOKENS.finditer(text, start):
        char = token.group()
        if char in ("{", "[", "("):
            depth += 1
        elif char in ("}", "]", ")"):
            depth -= 1
            if depth == 0:
                items.append(text[begin:token.start()].strip())
                return token.end(), items
        elif char == "," and depth == 1:
            items.append(text[begin:token.start()].strip())
            begin = token.end()
    return None


def sorted_attribute_maps(relay_text: str) -> str:
    """Relay text with every map-valued attribute (``={"key"=value, ...}``) in key order."""
    out, pos = [], 0
    while (found := relay_text.find('={"', pos)) >= 0:
        start = found + 1
        group = _group(relay_text, start)
        if group is None:
            break
        end, items = group
        out += [relay_text[pos:start], "{", ", ".join(sorted(sorted_attribute_maps(i) for i in items)), "}"]
        pos = end
    return "".join(out) + relay_text[pos:]


def repack(source: str, target: str, seconds: int):
    """Copy of the tar ``source`` with members in name order, root-owned, modes 644/755, all at ``seconds``."""
    with tarfile.open(source) as original, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as out:
        for member in sorted(original.getmembers(), key=lambda m: m.name):
            executable = member.isdir() or member.mode & 0o111
            member.mode = 0o755 if executable else 0o644
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            member.mtime = seconds
            member.pax_headers = {}
            out.addfile(member, original.extractfile(member) if member.isfile() else None)
