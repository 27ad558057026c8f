"""Where a firmware's bytes go: ROM and RAM by part (generated code, kernel library, runtime),
read from the GNU linker's map file, plus the AOT workspace and the measured stack.

Only what the linker kept counts (the build links with --gc-sections): the sizes are those of
the input sections placed in the program, attributed to the object file they came from.
"""
import dataclasses
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

PARTS = ("generated", "kernel library", "runtime")
KINDS = ("text", "rodata", "data", "bss")
# Output sections that occupy the board's memory (the rest: debug information, attributes).
_PLACED = {".vectors", ".text", ".ARM.exidx", ".data", ".bss"}
_INPUT = re.compile(r"^ (\.\S+|COMMON)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*))?$")
_CONTINUED = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)")
_OUTPUT = re.compile(r"^\S+\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)")


def _kind(section: str) -> str:
    if section.startswith(".bss") or section == "COMMON":
        return "bss"
    if section.startswith(".data"):
        return "data"
    if section.startswith((".rodata", ".ARM.exidx", ".eh_frame", ".vectors")):
        return "rodata"
    return "text"


def section_sizes(map_file: Path, part_of: Callable[[str], str]) -> Dict[str, Dict[str, int]]:
    """{part: {kind: bytes}} of the sections the linker placed; ``part_of(object path)`` names the part.

    An input section counts up to where the next one starts: merged strings (.rodata.str*)
    are listed at their size before merging. Alignment padding counts with the section before it.
    """
    sizes = {part: dict.fromkeys(KINDS, 0) for part in PARTS}
    entries: List[Tuple[int, int, str, str]] = []  # address, size, part, kind in the current output section

    def close(end: int):
        for (address, size, part, kind), following in zip(entries, [e[0] for e in entries[1:]] + [end]):
            sizes[part][kind] += max(0, min(size, following - address))
        entries.clear()

    lines = map_file.read_text().split("Linker script and memory map", 1)[-1].splitlines()
    output, output_end = None, 0
    pending: Optional[str] = None  # an input section whose name filled its line
    for line in lines:
        if line and not line[0].isspace():
            close(output_end)
            header = _OUTPUT.match(line)
            output, pending = line.split()[0], None
            output_end = int(header.group(1), 16) + int(header.group(2), 16) if header else 0
            continue
        if output not in _PLACED:
            continue
        found, fill = _INPUT.match(line), _FILL.match(line)
        if pending is not None:
            found, section, pending = _CONTINUED.match(line), pending, None
            if found:
                entries.append((int(found.group(1), 16), int(found.group(2), 16), part_of(found.group(3)),
                                _kind(section)))
        elif fill and entries:
            address, size, part, kind = entries[-1]
            entries.append((int(fill.group(1), 16), int(fill.group(2), 16), part, kind))
        elif found and found.group(2) is None:
            pending = found.group(1)
        elif found and int(found.group(3), 16):
            entries.append((int(found.group(2), 16), int(found.group(3), 16), part_of(found.group(4)),
                            _kind(found.group(1))))
    close(output_end)
    return sizes


@dataclasses.dataclass
class MemoryReport:
    """Bytes of one board build. ``stack`` is the peak measured around one inference and
    ``heap`` what the inference took from the heap (TVMBackendAllocWorkspace, a device model's malloc),
    both None until the program ran; ``largest_frame`` the deepest kernel-library function frame
    gcc reports (-fstack-usage)."""
    sizes: Dict[str, Dict[str, int]]
    workspace: int
    io: int  # the model's input and output tensors (held by the harness)
    largest_frame: int = 0
    largest_frame_function: str = ""
    stack: Optional[int] = None
    heap: Optional[int] = None

    def rom(self, part: Optional[str] = None) -> int:
        parts = [part] if part else PARTS
        return sum(self.sizes[p]["text"] + self.sizes[p]["rodata"] + self.sizes[p]["data"] for p in parts)

    def static_ram(self, part: Optional[str] = None) -> int:
        parts = [part] if part else PARTS
        return sum(self.sizes[p]["data"] + self.sizes[p]["bss"] for p in parts)

    def ram(self) -> int:
        """data + bss (the workspace included) + the inference's stack and heap + its inputs and outputs."""
        return self.static_ram() + (self.stack or 0) + (self.heap or 0) + self.io

    def lines(self):
        """The report, one line per figure, as ``mlf build/run --board`` prints it."""
        def part_line(part):
            s = self.sizes[part]
            return (f"  {part}: text {s['text']}, rodata {s['rodata']}, data {s['data']}, bss {s['bss']}")
        yield f"ROM {self.rom()} bytes (text + rodata + .data's initial values), RAM {self.static_ram()} bytes static:"
        yield from (part_line(p) for p in PARTS)
        yield f"  AOT workspace {self.workspace} bytes (in the generated code's bss)"
        if self.largest_frame:
            yield f"  largest kernel-library stack frame {self.largest_frame} bytes ({self.largest_frame_function})"
        if self.stack is not None:
            yield (f"RAM {self.ram()} bytes with the peak stack of an inference ({self.stack} bytes, "
                   f"measured), the heap it took ({self.heap or 0} bytes) "
                   f"and the inputs and outputs ({self.io} bytes)")
