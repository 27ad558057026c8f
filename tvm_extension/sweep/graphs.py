"""The offload report as a picture: a model's graph, each operator coloured by where it runs.

Green: a function offloaded to the backend (its operators joined, ``conv2d+bias_add+relu``);
orange: an operator the backend's patterns could take but refused, numbered with its reason
(the backend's ``rejection_reason``, as the offload report's ``not offloaded:`` line); grey: the
rest, on the CPU.  Read from the module as the backend partitions it (``uma.partition.outlined``:
before its own post-partitioning passes rewrite the offloaded functions).  Layers are the
longest path from the inputs, top to bottom.
"""
import dataclasses
from pathlib import Path
from typing import Dict, List

COLOURS = {"offloaded": "#66bb6a", "refused": "#ffa726", "cpu": "#cfd8dc"}


@dataclasses.dataclass
class Node:
    label: str
    where: str  # "offloaded", "refused" or "cpu"
    why: str = ""
    inputs: List[int] = dataclasses.field(default_factory=list)


def offload_nodes(backend, mod) -> List[Node]:
    """The operators of the partitioned ``mod``'s main, in order, with their edges."""
    from tvm import ir, relay  # pylint: disable=import-outside-toplevel

    from tvm_extension.uma.report import _explain, _op_calls, pattern_ops  # pylint: disable=import-outside-toplevel

    candidates, explain = pattern_ops(backend), getattr(backend, "rejection_reason", None)
    nodes: List[Node] = []
    index: Dict[relay.Expr, int] = {}

    def sources(expr) -> List[int]:
        if expr in index:
            return [index[expr]]
        if isinstance(expr, relay.Tuple):
            return [i for field in expr.fields for i in sources(field)]
        if isinstance(expr, relay.TupleGetItem):
            return sources(expr.tuple_value)
        return []

    def visit(expr):
        if not isinstance(expr, relay.Call):
            return
        inputs = sorted({i for arg in expr.args for i in sources(arg)})
        if isinstance(expr.op, ir.Op):
            name = expr.op.name
            why = _explain(explain, expr) if name in candidates else None
            node = Node(name.removeprefix("nn.").removeprefix("qnn."), "refused" if why else "cpu", why or "", inputs)
        else:  # a call of an offloaded (or other outlined) function
            func = mod[expr.op] if isinstance(expr.op, relay.GlobalVar) else expr.op
            ops = [c.op.name.split(".")[-1] for c in _op_calls(func.body)]
            offloaded = func.attrs is not None and "Compiler" in func.attrs
            node = Node("+".join(ops) or "function", "offloaded" if offloaded else "cpu", "", inputs)
        index[expr] = len(nodes)
        nodes.append(node)

    relay.analysis.post_order_visit(mod["main"].body, visit)
    return nodes


def _layers(nodes: List[Node]) -> List[int]:
    depth = []
    for node in nodes:  # in post order: inputs come first
        depth.append(1 + max((depth[i] for i in node.inputs), default=-1))
    return depth


def draw(nodes: List[Node], title: str, stem: Path) -> List[Path]:
    """``stem``.png and ``stem``.svg of the graph (matplotlib)."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    depth = _layers(nodes)
    rows: Dict[int, List[int]] = {}
    for i, d in enumerate(depth):
        rows.setdefault(d, []).append(i)
    width = max((len(r) for r in rows.values()), default=1)
    position = {i: (column - (len(row) - 1) / 2, -d) for d, row in rows.items() for column, i in enumerate(row)}
    reasons = list(dict.fromkeys(n.why for n in nodes if n.why))
    figure, axes = plt.subplots(figsize=(max(6.0, 1.7 * width), max(3.0, 0.42 * len(rows) + 1.2 + 0.22 * len(reasons))))
    for i, node in enumerate(nodes):
        for j in node.inputs:
            (x0, y0), (x1, y1) = position[j], position[i]
            axes.plot([x0, x1], [y0, y1], color="#90a4ae", linewidth=0.6, zorder=1)
    for i, node in enumerate(nodes):
        x, y = position[i]
        label = node.label if len(node.label) <= 28 else node.label[:26] + ".."
        if node.why:
            label += f" [{reasons.index(node.why) + 1}]"
        axes.text(x, y, label, ha="center", va="center", fontsize=6.5, zorder=2,
                  bbox={"boxstyle": "round,pad=0.25", "facecolor": COLOURS[node.where], "edgecolor": "#546e7a",
                        "linewidth": 0.5})
    counts = {where: sum(n.where == where for n in nodes) for where in COLOURS}
    axes.set_title(f"{title}: {counts['offloaded']} offloaded functions, {counts['refused']} operators refused, "
                   f"{counts['cpu']} on the CPU", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c) for c in COLOURS.values()]
    axes.legend(handles, ["offloaded", "refused (reason below)", "on the CPU"], loc="upper right", fontsize=7)
    for k, why in enumerate(reasons):
        figure.text(0.01, 0.01 + 0.022 * (len(reasons) - 1 - k) * 6 / figure.get_figheight(),
                    f"[{k + 1}] {why}", fontsize=6.5, ha="left", va="bottom")
    axes.set_xlim(-width / 2 - 0.6, width / 2 + 0.6)
    axes.set_ylim(-max(rows, default=0) - 0.8, 0.8)
    axes.axis("off")
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in (".png", ".svg"):
        figure.savefig(stem.with_suffix(suffix), dpi=110, bbox_inches="tight")
        written.append(stem.with_suffix(suffix))
    plt.close(figure)
    return written


def model_nodes(model, backend, attrs) -> List[Node]:
    """``model`` (a grid.Model) loaded as tvmc loads it, partitioned by ``backend`` with ``attrs``."""
    from tvm.driver import tvmc  # pylint: disable=import-outside-toplevel

    from tvm_extension.uma import compiling, settings  # pylint: disable=import-outside-toplevel
    from tvm_extension.uma.partition import outlined  # pylint: disable=import-outside-toplevel

    from .point import _shape_dict  # pylint: disable=import-outside-toplevel

    loaded = tvmc.load(str(model.path), shape_dict=_shape_dict(model.input_shapes))
    with compiling(settings({backend: dict(attrs)})):
        mod, _, _ = outlined(backend, loaded.mod, loaded.params)
        return offload_nodes(backend, mod)
