"""docs/performance.md's results tables, written by code from the results files, so that no
number is retyped:

    python scripts/bench/page.py [--results scripts/bench/results] [--page docs/performance.md]
        [--check]

Each results file is one JSON line a benchmark wrote with `--out` (scripts/benchmark.py's full
run, `suite`, and its `profile`; scripts/vs_nanogpt.sh at nanoGPT's 2,000 iterations;
scripts/first_step.py; scripts/memory.py; scripts/bench/eager_example.py), with the machine it
ran on. Each table keeps one row per CPU measured (model name and logical CPUs), the latest
run's, dated (the eager example: one per CPU and example version); `profile` gets a table per
CPU, a row per variant.
The tables go between `<!-- results:start -->` and `<!-- results:end -->`; `--check` writes
nothing and fails when the page is not what the results files give.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

from transformer_jax.studies.render import generated, templating

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "scripts" / "bench" / "results"
PAGE = REPO / "docs" / "performance.md"
TEMPLATES = REPO / "scripts" / "templates"  # performance.md.j2: the text between the markers
REGION = "results"
START, END = generated.markers(REGION)
NANOGPT_ITERS = 2000  # the README's run; shorter ones are smoke runs, not the comparison
MACHINE_HEADER = ("CPU", "logical CPUs", "vector flags", "date")
# Each table's columns after the machine's, in the order of its cells (_benchmark_cells, ...)
BENCH_HEADER = ("charlm ours / torch", "worst chunk", "midsize / XLA dot",
                "midsize s / step (system s)", "XLA dot GFLOP/s", "torch mm GFLOP/s",
                "compile 24 / 2 layers", "jax")
NANOGPT_HEADER = ("ours' settings", "pairs", "wall s", "wall ratio", "peak MiB", "peak ratio",
                  "warm: wall / peak ratio", "val loss", "stack")
FIRST_STEP_HEADER = ("to first step", "imports", "init", "first call: compile", "trace + lower",
                     "peak MiB", "stack")
EAGER_HEADER = ("example", "rounds", "example s", "import", "build", "first call",
                "rest (prints, attention)", "programs", "stack")
MEMORY_HEADER = ("interpreter", "+ jax, XLA client", "+ all of main's imports", "+ text prepared",
                 "run, 10 steps", f"run, {NANOGPT_ITERS:,} steps", "same, huge pages", "stack")


def load(directory: Path) -> list[dict]:
    """Every results file's record (sorted by name), each with the `machine` it ran on."""
    records = []
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        if "machine" not in record:
            raise ValueError(f"{path}: no `machine` record (written by an older benchmark?)")
        records.append(record)
    return records


def latest_per_cpu(records: Iterable[dict], also: Callable[[dict], tuple] = lambda r: ()
                   ) -> list[dict]:
    """The latest record of each CPU (model and logical CPUs; and of each `also(record)`, e.g.
    the settings a run was given), ordered by CPU."""
    kept: dict[tuple, dict] = {}
    for record in records:
        m = record["machine"]
        key = (m["cpu"], m["cpus"] or 0, also(record))
        if key not in kept or m["date"] > kept[key]["machine"]["date"]:
            kept[key] = record
    return [kept[key] for key in sorted(kept)]


def _ours_settings(record: dict) -> tuple[str, ...]:
    """The --ours-config settings of a side-by-side run (none: configs/lm.py as it is)."""
    return tuple(record["vs_nanogpt"].get("ours_config", ()))


def _machine_cells(m: dict) -> tuple[str, ...]:
    return (m["cpu"], str(m["cpus"]), ", ".join(m["cpu_flags"]) or "none", m["date"][:10])


def _table(header: tuple[str, ...], records: list[dict],
           cells: Callable[[dict], tuple[str, ...]], missing: str) -> dict:
    """A table of the template: the machine's columns, then `header`'s, a row of cells per
    record; `missing`, the sentence shown instead where there is no record."""
    return dict(header=MACHINE_HEADER + header, missing=missing,
                rows=[_machine_cells(r["machine"]) + cells(r) for r in records])


def _benchmark_cells(r: dict) -> tuple[str, ...]:
    return (f"{r['charlm_wall_ratio_vs_torch']:.3f}", f"{r['charlm_wall_ratio_worst_chunk']:.3f}",
            f"{r['midsize_mfu_vs_xla_dot']:.3f}", _midsize_seconds(r),
            f"{r['matmul_jax_gflops']:.0f}",
            f"{r['matmul_torch_gflops']:.0f}", f"{r['compile_ratio_24_vs_2']:.2f}",
            r["machine"].get("jax") or "?")


def _midsize_seconds(r: dict) -> str:
    """The mid-size step's median seconds, and the system seconds in it (all threads), where
    the record has them (runs since 2026-12-04)."""
    step = f"{1.0 / r['midsize_steps_per_s']:.2f}"
    return f"{step} ({r['midsize_sys_s_per_step']:.2f})" if "midsize_sys_s_per_step" in r else step


def _nanogpt_cells(r: dict) -> tuple[str, ...]:
    s = r["vs_nanogpt"]["summary"]
    ours, theirs = s["ours"], s["nanogpt"]
    warm = (f"{s['wall_ratio_warm']:.2f} / {s['peak_ratio_warm']:.2f}" if "ours_warm" in s
            else "-")
    settings = " ".join(f"`{x}`" for x in _ours_settings(r)) or "-"
    return (settings, str(r["vs_nanogpt"]["pairs"]),
            f"{ours['wall_s']:.1f} / {theirs['wall_s']:.1f}",
            f"{s['wall_ratio']:.2f}", f"{ours['peak_mib']:.0f} / {theirs['peak_mib']:.0f}",
            f"{s['peak_ratio']:.2f}", warm,
            f"{_loss(ours['val_loss'])} / {_loss(theirs['val_loss'])}", _stack(r["machine"]))


def _first_step_cells(r: dict) -> tuple[str, ...]:
    cold, warm = r["first_step"][0], r["first_step"][-1]
    return (f"{cold['to first step']:.1f} / {warm['to first step']:.1f}",
            f"{cold['imports']:.1f}", f"{cold['init']:.1f} / {warm['init']:.1f}",
            f"{cold['first call: compile']:.1f} / {warm['first call: compile']:.1f}",
            f"{cold['first call: trace'] + cold['first call: lower']:.1f}",
            f"{cold['peak MiB, first call']:.0f} / {warm['peak MiB, first call']:.0f}",
            _stack(r["machine"]))


def _eager_cells(r: dict) -> tuple[str, ...]:
    """Cold / warm, seconds: the example (build + first call), then each phase; the programs
    the cold build and first call compiled."""
    e = r["eager_example"]
    cold, warm = e["cold"], e["warm"]
    both = lambda key: f"{cold['phases'][key]['wall_s']:.2f} / {warm['phases'][key]['wall_s']:.2f}"
    return (f"`{e['example']}`", str(e["rounds"]),
            f"**{cold['example_s']:.2f} / {warm['example_s']:.2f}**", both("import"),
            both("build"), both("first call"), both("rest"),
            f"{cold['phases']['build']['programs']} / {cold['phases']['first call']['programs']}",
            _stack(r["machine"]))


def _memory_cells(r: dict) -> tuple[str, ...]:
    stages = {s["stage"]: s["peak_mib"] for s in r["stages"]}
    runs, steps = r["runs"], r["steps"]  # render keeps the records of NANOGPT_ITERS steps
    return (f"{stages['python interpreter']:.0f}", f"{stages['XLA CPU client started']:.0f}",
            f"{stages['the rest of transformer_jax.main']:.0f}",
            f"{stages['text prepared (TFDS array_record)']:.0f}",
            f"{runs['10 steps, no huge pages']['peak_mib']:.0f}",
            f"{runs[f'{steps} steps, no huge pages']['peak_mib']:.0f}",
            f"{runs[f'{steps} steps, huge pages']['peak_mib']:.0f}", _stack(r["machine"]))


def _stack(m: dict) -> str:
    return f"jax {m.get('jax') or '?'}, torch {m.get('torch') or '?'}"


def _loss(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


PROFILE_HEADER = ("variant", "added", "ms/step", "vs one step per call", "vs torch, 2 threads",
                  "vs without the addition", "same arithmetic", "worker's peak MiB")


def _profile_tables(records: list[dict]) -> list[dict]:
    """A table per CPU (its latest `--profile` run), a row per variant, fastest first."""
    tables = []
    for record in records:
        m, rows = record["machine"], record["profile"]
        torch = rows.get("torch_2_threads", {}).get("ratio_vs_trainer")
        caption = (f"{m['cpu']}, {m['cpus']} logical CPUs ({', '.join(m['cpu_flags']) or 'none'}"
                   f"), {m['date'][:10]}, {_stack(m)}:")
        cells = []
        for name, r in sorted(rows.items(), key=lambda kv: kv[1]["ratio_vs_trainer"]):
            flagged = "reference" in r
            added = r.get("changes", f"XLA_FLAGS={r.get('xla_flags')}")  # older records: flags
            cells.append((name, f"`{added}`" if flagged else "-", f"{r['ms_per_step']:.1f}",
                          f"{r['ratio_vs_trainer']:.3f}",
                          f"{r['ratio_vs_trainer'] / torch:.3f}" if torch else "-",
                          f"{r['ratio_vs_reference']:.3f}" if flagged else "-",
                          ("yes" if r["same_arithmetic"] else "no") if flagged else "-",
                          f"{r['peak_mib']:.0f}"))
        tables.append(dict(caption=caption, header=PROFILE_HEADER, rows=cells, missing=""))
    return tables


def render(records: list[dict]) -> str:
    """The lines between the markers (scripts/templates/performance.md.j2): the benchmark's
    table, the side-by-side run's, ..., each from the latest records of each CPU."""
    bench = latest_per_cpu(r for r in records if r.get("mode") == "full")
    nanogpt = latest_per_cpu((r for r in records if "vs_nanogpt" in r
                              and r["vs_nanogpt"]["max_iters"] == NANOGPT_ITERS), _ours_settings)
    first_step = latest_per_cpu(r for r in records if len(r.get("first_step", ())) >= 2)
    memory = latest_per_cpu(r for r in records if "stages" in r and "runs" in r
                            and r.get("steps") == NANOGPT_ITERS)
    profile = latest_per_cpu(r for r in records if r.get("mode") == "profile")
    eager = latest_per_cpu((r for r in records if "eager_example" in r),
                           lambda r: r["eager_example"]["example"])
    return templating.render(
        "performance.md.j2", TEMPLATES, iters=NANOGPT_ITERS, results=RESULTS.relative_to(REPO),
        bench=_table(BENCH_HEADER, bench, _benchmark_cells, "No full run recorded yet."),
        nanogpt=_table(NANOGPT_HEADER, nanogpt, _nanogpt_cells,
                       "No side-by-side run recorded yet."),
        first_step=_table(FIRST_STEP_HEADER, first_step, _first_step_cells,
                          "No first-step run recorded yet."),
        eager=_table(EAGER_HEADER, eager, _eager_cells, "No eager-example run recorded yet."),
        memory=_table(MEMORY_HEADER, memory, _memory_cells, "No memory run recorded yet."),
        profiles=_profile_tables(profile))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page is out of date")
    args = parser.parse_args(argv)
    try:
        return generated.write_or_check_region(args.page, REGION, render(load(args.results)),
                                               args.check, "python scripts/bench/page.py")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
