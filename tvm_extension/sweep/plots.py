"""The sweep's figures (matplotlib, PNG and SVG), from the table's rows that ran and matched."""
from pathlib import Path
from typing import Dict, List, Tuple


def _pyplot():
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    from matplotlib import pyplot  # pylint: disable=import-outside-toplevel

    return pyplot


def _groups(rows: List[dict], key) -> Dict[tuple, List[dict]]:
    groups: Dict[tuple, List[dict]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def pareto(points: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """The points no other beats on both (lower is better for both), by increasing x."""
    front: List[Tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _save(figure, folder: Path, name: str) -> List[Path]:
    figure.tight_layout()
    paths = [folder / f"{name}.png", folder / f"{name}.svg"]
    for path in paths:
        figure.savefig(path, dpi=110)
    _pyplot().close(figure)
    return paths


def dma_against_scratchpad(rows, folder: Path) -> List[Path]:
    """Bytes the DMA moved per scratchpad size, one line per model (and other attributes), the
    lower bound (every byte the offloaded layers need moved once) dashed in the same colour."""
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(figsize=(7, 4.2))
    swept = [r for r in rows if "scratchpad_bytes" in r and r.get("dma_bytes")]
    others = lambda r: tuple(kv for kv in r["attributes"].split() if not kv.startswith("scratchpad_bytes="))
    for (model, backend, rest), group in sorted(_groups(swept, lambda r: (r["model"], r["backend"], others(r))).items()):
        group.sort(key=lambda r: r["scratchpad_bytes"])
        sizes = [r["scratchpad_bytes"] / 1024 for r in group]
        label = " ".join([model, backend, *rest])
        line, = axes.plot(sizes, [r["dma_bytes"] for r in group], marker="o", label=label)
        axes.plot(sizes, [r["lower_bound_bytes"] for r in group], linestyle="--", color=line.get_color(),
                  alpha=0.6, label=f"{label}: lower bound")
        most = max(r["offloaded_functions"] for r in group)
        for r in group:  # fewer layers offloaded: the rest run on the CPU and move nothing
            if r["offloaded_functions"] < most:
                axes.annotate(f"{r['offloaded_functions']}/{most}", (r["scratchpad_bytes"] / 1024, r["dma_bytes"]),
                              fontsize=7, xytext=(3, 3), textcoords="offset points")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set(xlabel="scratchpad (KiB)", ylabel="bytes moved by the DMA", title="DMA bytes against scratchpad size")
    axes.grid(True, alpha=0.3)
    if swept:
        axes.legend(fontsize=6)
    return _save(figure, folder, "dma_vs_scratchpad")


def utilisation_against_shape(rows, folder: Path) -> List[Path]:
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(figsize=(7, 4.2))
    cored = [r for r in rows if r.get("utilisation") is not None and "c_tile_m" in r]
    shape = lambda r: (r["c_tile_m"], r["c_tile_n"], r["c_tile_k"])
    shapes = sorted({shape(r) for r in cored}, key=lambda s: (s[0] * s[1] * s[2], s))
    names = ["x".join(map(str, s)) for s in shapes]
    for (model, backend), group in sorted(_groups(cored, lambda r: (r["model"], r["backend"])).items()):
        group.sort(key=lambda r: shapes.index(shape(r)))
        axes.plot([names[shapes.index(shape(r))] for r in group], [r["utilisation"] for r in group], marker="o",
                  label=f"{model} ({backend})")
    axes.set(xlabel="core tile M x N x K", ylabel="utilisation (useful / issued MACs)", ylim=(0, 1.05),
             title="Core utilisation against core shape")
    axes.tick_params(axis="x", labelrotation=45, labelsize=7)
    axes.grid(True, alpha=0.3)
    if cored:
        axes.legend(fontsize=7)
    return _save(figure, folder, "utilisation_vs_shape")


def cycles_against_cost(rows, folder: Path) -> List[Path]:
    """Estimated cycles against each cost proxy; per model and backend, the Pareto front.  Points
    run on a device with a cost (Chocolate's RTL: its synthesized area) add a panel of the
    device's cycles against that area."""
    pyplot = _pyplot()
    views = [("scratchpad", "scratchpad bytes", "est_cycles", "estimated cycles (DMA + compute)"),
             ("macs_per_cycle", "MACs per cycle", "est_cycles", "estimated cycles (DMA + compute)")]
    if any(r.get("area_cells") and r.get("device_cycles") for r in rows):
        views.append(("area_cells", "core area (Yosys generic cells)", "device_cycles", "cycles of the core's RTL"))
    figure, panels = pyplot.subplots(1, len(views), figsize=(5 * len(views), 4.2))
    for axes, (cost, label, cycles, cycles_label) in zip(panels, views):
        ran = [r for r in rows if r.get(cycles)]
        for (model, backend), group in sorted(_groups(ran, lambda r: (r["model"], r["backend"])).items()):
            points = [(r[cost], r[cycles]) for r in group if r.get(cost)]
            if not points:
                continue
            dots = axes.scatter(*zip(*points), s=18, alpha=0.7, label=f"{model} ({backend})")
            front = pareto(points)
            axes.step(*zip(*front), where="post", color=dots.get_facecolor()[0], linewidth=1)
            axes.scatter(*zip(*front), s=60, facecolors="none", edgecolors=dots.get_facecolor()[0])
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set(xlabel=label, ylabel=cycles_label)
        axes.grid(True, alpha=0.3)
        if ran:
            axes.legend(fontsize=6)
    figure.suptitle("Cycles against cost (circled: the Pareto front)")
    return _save(figure, folder, "cycles_vs_cost")


def draw_all(rows: List[dict], folder: Path) -> List[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    good = [r for r in rows if not r.get("error")]
    return [*dma_against_scratchpad(good, folder), *utilisation_against_shape(good, folder),
            *cycles_against_cost(good, folder)]
