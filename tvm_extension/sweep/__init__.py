"""Design-space sweeps: every point of a grid of target attributes, for each model and backend,
compiled with TVM's own tvmc, built and run on the host, checked against TVM's CPU build and
measured by the hardware model's counters; on Ray, cached, tabled, plotted and reported.

    python -m tvm_extension.sweep plan.toml -o sweep-out
    python -m tvm_extension.sweep --model examples/models/cnn.onnx \\
        --attr strawberry.scratchpad_bytes=16K..512K*2 -o sweep-out

Stages, one module each: grid (the plan, checked and expanded), point (one point in its own
folder), cache, engine (Ray or a process pool; progress), table, plots, graphs (each model's
offload report drawn), report.
"""
import shutil
import time
from pathlib import Path
from typing import List, Optional

from . import engine as engines
from . import graphs, grid, plots, report, table
from .cache import Cache, default_folder
from .grid import GridError, expand
from .point import reference, run_point


def run_sweep(plan: dict, out: Path, cache_folder: Optional[Path] = None, address: Optional[str] = None,
              workers: Optional[int] = None, use_ray: bool = True, keep_work: bool = False) -> List[dict]:
    """Run (or read from the cache) every point of ``plan``; write the table, figures and report
    into ``out``; return the records in the plan's order.  GridError before anything runs."""
    started = time.time()
    points = expand(plan)
    cache = Cache(cache_folder or default_folder())
    records = [cache.get(p) for p in points]
    records = [r and _identify(p, cache, r, cached=True) for p, r in zip(points, records)]
    pending = [i for i, r in enumerate(records) if r is None]
    engine = engines.start(address, workers, use_ray) if pending else None
    progress = engines.Progress(len(points), cached=len(points) - len(pending),
                                failed=sum(bool(r and r.get("error")) for r in records))
    progress.show()
    try:
        if pending:
            _compute(points, pending, records, cache, engine, progress, keep_work)
    finally:
        progress.finish()
        if engine:
            engine.close()
    out.mkdir(parents=True, exist_ok=True)
    table.write(records, out)
    figures = plots.draw_all(records, out / "figures")
    drawings = _drawings(points, records, cache, out / "figures", progress)
    run = {"engine": engine.name if engine else "none (all cached)", "nodes": engine.nodes if engine else 0,
           "wall_seconds": time.time() - started, "versions": cache.version}
    report.write(records, figures, run, out / "report.md", drawings)
    return records


def _drawings(points, records, cache, folder: Path, progress) -> dict:
    """{(model, backend): its graph drawing (PNG) or why there is none}: each model's offload
    report as a picture, at the backend's first point of the plan that compiled; drawn once,
    then cached."""
    firsts = {}
    for point, record in sorted(zip(points, records), key=lambda pr: bool(pr[1].get("error"))):  # stable
        firsts.setdefault((point.model.label, point.backend), point)
    drawings = {}
    for (label, backend), point in firsts.items():
        stem = folder / f"graph_{label}_{backend}"
        cached = cache.graph_stem(point)
        try:
            if not all(cached.with_suffix(s).is_file() for s in (".png", ".svg")):
                progress.note(f"sweep: drawing {label} on {backend}")
                nodes = graphs.model_nodes(point.model, grid.known_backends()[backend], point.attrs)
                graphs.draw(nodes, f"{label} on {backend}", cached)
            for suffix in (".png", ".svg"):
                shutil.copyfile(cached.with_suffix(suffix), stem.with_suffix(suffix))
            drawings[label, backend] = stem.with_suffix(".png")
        except Exception as err:  # pylint: disable=broad-except  (a drawing never fails the sweep)
            drawings[label, backend] = f"no drawing: {str(err).strip().splitlines()[-1][:200] if str(err) else type(err).__name__}"
    return drawings


def _compute(points, pending, records, cache, engine, progress, keep_work):
    # The CPU build of each model, once (from the cache when it has it), then the points.
    models = list({points[i].model: None for i in pending})
    references = {m: cache.get_reference(m) for m in models}
    missing = [m for m in models if references[m] is None]
    if missing:
        progress.note(f"sweep: TVM's CPU build of {len(missing)} model(s) first, the reference of their points")
    for index, result in engine.imap(reference, [(m,) for m in missing]):
        if isinstance(result, Exception):
            references[missing[index]] = f"reference: {str(result).strip().splitlines()[-1][:300]}"
        else:
            references[missing[index]] = result
            cache.put_reference(missing[index], *result)
    progress.started = time.time()  # time left: from the points' own pace
    runnable = [i for i in pending if not isinstance(references[points[i].model], str)]
    for i in pending:
        if isinstance(references[points[i].model], str):
            records[i] = _identify(points[i], cache, {"error": references[points[i].model], "matched": False,
                                                      "seconds": 0.0})
            progress.update(records[i])
    work_root = str(cache.folder / "work") if keep_work else None
    calls = [(points[i], *references[points[i].model], work_root, keep_work) for i in runnable]
    for index, result in engine.imap(run_point, calls):
        i = runnable[index]
        if isinstance(result, Exception):  # the task itself died: not cached, tried again next time
            result = {"error": f"task: {str(result).strip().splitlines()[-1][:300]}", "matched": False,
                      "seconds": 0.0}
        else:
            cache.put(points[i], result)
        records[i] = _identify(points[i], cache, result)
        progress.update(records[i])


def _identify(point, cache, record: dict, cached: bool = False) -> dict:
    return {"model": point.model.label, "backend": point.backend, **dict(point.attrs), **record,
            "attributes": " ".join(f"{k}={v}" for k, v in point.attrs), "key": cache.key(point), "cached": cached}


__all__ = ["run_sweep", "GridError"]
