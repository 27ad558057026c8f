"""The offload report both engines print (tvmc's Relay engine and the Relax engine): what a backend
took, in how many functions, what stayed on the CPU, and why the operators its patterns could
take were left."""
import collections
import dataclasses
from typing import Counter


@dataclasses.dataclass
class OffloadReport:
    target: str
    functions: int = 0
    offloaded: Counter = dataclasses.field(default_factory=collections.Counter)
    on_cpu: Counter = dataclasses.field(default_factory=collections.Counter)
    not_offloaded: Counter = dataclasses.field(default_factory=collections.Counter)  # (op, reason) -> n
    raised: Counter = dataclasses.field(default_factory=collections.Counter)  # (op, what raised) -> n
    patterns: Counter = dataclasses.field(default_factory=collections.Counter)  # which of the backend's matched (Relax)

    def lines(self):
        def counts(counter):
            return ", ".join(f"{op} x{n}" for op, n in counter.most_common()) or "none"

        yield f"[{self.target}] offloaded: {counts(self.offloaded)} in {self.functions} functions"
        yield f"[{self.target}] on the CPU: {counts(self.on_cpu)}"
        if self.not_offloaded:
            reasons = "; ".join(f"{op}: {why} x{n}" for (op, why), n in self.not_offloaded.most_common())
            yield f"[{self.target}] not offloaded: {reasons}"
        if self.raised:
            checks = "; ".join(f"{op}: {why} x{n}" for (op, why), n in self.raised.most_common())
            yield f"[{self.target}] pattern checks that raised (taken as no match): {checks}"
        if self.patterns:
            yield f"[{self.target}] patterns: {counts(self.patterns)}"

    def __str__(self):
        return "\n".join(self.lines())
