"""The one-page Markdown report: what ran, how long, the figures, the table, the failures."""
import statistics
from pathlib import Path
from typing import List


def _number(value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _times(records: List[dict]) -> List[str]:
    """Seconds per point by model and backend (a cached point: what it took when computed): median
    and max of the whole point, median of its tvmc compile."""
    groups = {}
    for r in records:
        if r.get("seconds"):  # a point whose model had no reference never ran
            groups.setdefault((r["model"], r["backend"]), []).append(r)
    if not groups:
        return []
    lines = ["## Time per point", "", "The whole point in its task (compile, build, run, compare), and of which "
             "`tvmc compile`; a cached point's time is the one recorded when it was computed.", "",
             "| model | backend | points | computed now | median s | max s | median compile s |",
             "|---|---|---|---|---|---|---|"]
    for (model, backend), group in groups.items():
        seconds = [r["seconds"] for r in group]
        compile_ = [r["compile_seconds"] for r in group if r.get("compile_seconds") is not None]
        median_compile = f"{statistics.median(compile_):.1f}" if compile_ else ""
        lines.append(f"| {model} | {backend} | {len(group)} | {sum(not r.get('cached') for r in group)} "
                     f"| {statistics.median(seconds):.1f} | {max(seconds):.1f} | {median_compile} |")
    return lines + [""]


def _never_on_core(records: List[dict]) -> List[str]:
    """Per model and backend, the share of the model's conv and dense MACs its core never computes
    (the operators its patterns leave on the CPU), as the backend's offload report gives it."""
    seen = {}
    for r in records:
        if r.get("model_macs"):
            seen.setdefault((r["model"], r["backend"]), r)
    if not seen:
        return []
    lines = ["## MACs the core never sees", "", "The model's conv and dense MACs, those its backend's core computes, "
             "and those left on the CPU, by kind (from the backend's offload report).", "",
             "| model | backend | MACs | on the core | never on the core |", "|---|---|---|---|---|"]
    for (model, backend), r in seen.items():
        lines.append(f"| {model} | {backend} | {r['model_macs']:,} | {r['core_macs']:,} "
                     f"({100 * r['core_macs'] / r['model_macs']:.1f} %) | {r['never_on_core']} |")
    return lines + [""]


def write(records: List[dict], figures: List[Path], run: dict, path: Path, drawings: dict = None) -> Path:
    computed = [r for r in records if not r.get("cached")]
    failed = [r for r in records if r.get("error")]
    per_point = sum(r["seconds"] for r in computed) / len(computed) if computed else 0.0
    lines = [
        "# Design-space sweep", "",
        f"{len(records)} points ({len({r['model'] for r in records})} models, "
        f"{len({r['backend'] for r in records})} backends): {len(computed)} computed, "
        f"{len(records) - len(computed)} from the cache, {len(failed)} failed. "
        f"Engine: {run['engine']} on {run['nodes']} node(s); wall time {run['wall_seconds']:.1f} s; "
        f"{per_point:.1f} s per computed point (compile, build, run, compare, in its task). "
        f"{run['versions']}.", "",
        "Matched: the outputs equal those of TVM's own CPU build of the same model (int8 bit-exact, float "
        "within 1e-4 of the output's scale). Estimated cycles: the hardware model's DMA cycles (setup + bytes / "
        "rate per transfer) plus its compute cycles (MACs / rate), from the attributes; the CPU's share is not "
        "counted. Lower bound: every byte the offloaded layers need, moved once.", "",
    ]
    lines += _times(records)
    lines += _never_on_core(records)
    titles = {"dma_vs_scratchpad": "DMA bytes against scratchpad size",
              "utilisation_vs_shape": "Utilisation against core shape",
              "cycles_vs_cost": "Estimated cycles against cost, Pareto front circled"}
    for figure in figures:
        if figure.suffix == ".png":
            lines += [f"## {titles.get(figure.stem, figure.stem)}", "",
                      f"![{figure.stem}]({figure.relative_to(path.parent)})", ""]
    if drawings:
        lines += ["## Where each operator runs", "",
                  "Each model as its backend partitions it (at the plan's first point for that backend that compiled): green, a "
                  "function offloaded to the accelerator; orange, an operator its patterns could take but refused, "
                  "numbered with the reason; grey, on the CPU.", ""]
        for (model, backend), drawing in drawings.items():
            lines += [f"### {model} on {backend}", ""]
            lines += [f"![{model} on {backend}]({drawing.relative_to(path.parent)})" if isinstance(drawing, Path)
                      else drawing, ""]
    header = ["model", "backend", "attributes", "matched", "DMA bytes", "/ bound", "transfers", "engine calls",
              "utilisation", "est. cycles", "code B", "workspace B", "s", "cached"]
    lines += ["## Points", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        ratio = r["dma_bytes"] / r["lower_bound_bytes"] if r.get("lower_bound_bytes") and r.get("dma_bytes") else None
        cells = [r["model"], r["backend"], r["attributes"], "yes" if r.get("matched") else "**no**",
                 r.get("dma_bytes"), ratio, r.get("dma_transfers"), r.get("engine_calls"), r.get("utilisation"),
                 r.get("est_cycles"), r.get("code_bytes"), r.get("workspace_bytes"), r.get("seconds"),
                 "yes" if r.get("cached") else ""]
        lines.append("| " + " | ".join(_number(c) for c in cells) + " |")
    on_board = [r for r in records if r.get("board")]
    if on_board:
        header = ["model", "backend", "attributes", "board", "ROM B", "RAM B", "instructions", "equals host"]
        lines += ["", "## On the board", "",
                  "Each point's MLF cross-built for the board (arm-none-eabi-gcc -O2) and run once in QEMU: ROM "
                  "(text, rodata, initial data), RAM (static, with the measured peak stack and heap, inputs and "
                  "outputs), instructions per inference; its outputs compared with the host run's.", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in on_board:
            equal = r.get("board_error") or ("yes" if r.get("board_matches_host") else "")
            cells = [r["model"], r["backend"], r["attributes"], r["board"], r.get("board_rom"), r.get("board_ram"),
                     r.get("board_instructions"), equal]
            lines.append("| " + " | ".join(_number(c) for c in cells) + " |")
    retried = [r for r in records if r.get("retried")]
    if retried:
        lines += ["", "## Points run again", "",
                  "The process running these points died under them (its worker or node lost, not their own error): "
                  "they were run again, and their results are those of the run that finished.", ""]
        lines += [f"- {r['model']} on {r['backend']} ({r['attributes']}): retried {r['retried']}" for r in retried]
    if failed:
        lines += ["", "## Failed points", ""]
        lines += [f"- {r['model']} on {r['backend']} ({r['attributes']}): {r['error']}" for r in failed]
    path.write_text("\n".join(lines) + "\n")
    return path
