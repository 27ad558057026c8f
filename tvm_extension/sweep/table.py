"""The sweep's table: one row per point, CSV and Parquet, columns in a fixed order (the point,
then the common figures, then each backend's own counters ``c_*``)."""
import csv
from pathlib import Path
from typing import List

FIRST = ["model", "backend", "attributes", "matched", "error", "cached", "seconds", "compile_seconds", "dma_bytes",
         "lower_bound_bytes", "dma_transfers", "engine_calls", "macs", "utilisation", "dma_cycles",
         "compute_cycles", "est_cycles", "est_cycles_overlap", "scratchpad", "macs_per_cycle", "offloaded_functions", "model_macs", "core_macs",
         "never_on_core", "code_bytes",
         "workspace_bytes", "constants_bytes", "max_error", "offloaded", "host", "node", "pid", "retried", "key"]


def columns(records: List[dict]) -> List[str]:
    seen = {k for r in records for k in r}
    attributes = sorted(k for k in seen if k not in FIRST and not k.startswith("c_"))
    return ["model", "backend", "attributes", *attributes, *[k for k in FIRST[3:] if k in seen],
            *sorted(k for k in seen if k.startswith("c_"))]


def write(records: List[dict], folder: Path) -> List[Path]:
    names = columns(records)
    csv_path, parquet_path = folder / "results.csv", folder / "results.parquet"
    with open(csv_path, "w", newline="") as file:
        writer = csv.DictWriter(file, names)
        writer.writeheader()
        writer.writerows(records)
    written = [csv_path]
    try:
        import pyarrow  # pylint: disable=import-outside-toplevel
        from pyarrow import parquet  # pylint: disable=import-outside-toplevel
    except ImportError:
        return written  # the CSV holds the same table
    table = pyarrow.Table.from_pylist([{n: r.get(n) for n in names} for r in records])
    parquet.write_table(table, parquet_path)
    return written + [parquet_path]
