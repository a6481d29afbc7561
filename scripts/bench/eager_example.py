"""How long the README's "use the modules" example takes, run as written, in fresh processes:
its imports, building the model, the first call, and the rest (its prints, the attention part).

    .venv/bin/python scripts/bench/eager_example.py [--rounds 3] [--readme README.md]
        [--label TEXT] [--out scripts/bench/results/eager_example-DATE-CPU.json]

Each round makes a new compilation-cache directory ($TJ_JAX_CACHE_DIR, which the example's
`enable_compilation_cache()` reads) and runs the example twice in it: cold (the cache empty, as
a user's first run) and warm (the cache the cold run filled). The example is read from the
README (`readme_example`, the block tests/project/test_readme_example.py runs), split into
phases at its own statements (`phases`), and each phase ends by waiting for every array it made.
Per phase: wall and CPU seconds, and from JAX's own events the XLA compile seconds (loads from
the cache included) and the programs compiled or loaded. `example_s` is build + first call, what
issue 66 counts; the imports (JAX, Flax) come before any of the project's code runs.
`--readme` measures another version of the example: `git show REV:README.md > /tmp/old.md`.
The last line is one JSON object: the medians, every run, what the example printed, the machine.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]  # this checkout's package, and bench.machine
HEADING = "## Use the modules"
PHASES = ("import", "build", "first call", "rest")
COMPILE = "/jax/core/compile/backend_compile_duration"  # runtime.compile_memory.BACKEND_COMPILE
HITS = "/jax/compilation_cache/cache_hits"


def readme_example(readme: Path = REPO / "README.md") -> str:
    """The first ```python block after the heading "## Use the modules"."""
    text = readme.read_text()
    if HEADING not in text:
        raise ValueError(f"{readme} has no '{HEADING}' section")
    match = re.search(r"^```python\n(.*?)^```", text[text.index(HEADING):], flags=re.S | re.M)
    if not match:
        raise ValueError(f"no ```python block after '{HEADING}' in {readme}")
    return match.group(1)


def _ends(phase: str, statement: ast.stmt) -> bool:
    """Whether `statement` is the last of `phase`: the call of enable_compilation_cache() ends
    the imports, the assignment of `model` the build, the one of `logits` the first call."""
    if phase == "import":
        return isinstance(statement, ast.Expr) and "enable_compilation_cache(" in ast.unparse(statement)
    name = {"build": "model", "first call": "logits"}.get(phase)
    names = {n.id for target in getattr(statement, "targets", ()) for n in ast.walk(target)
             if isinstance(n, ast.Name)}
    return name in names


def phases(source: str) -> list[tuple[str, str]]:
    """The example's top-level statements grouped into PHASES, in order: [(phase, code)]."""
    grouped: dict[str, list[str]] = {phase: [] for phase in PHASES}
    current = 0
    for statement in ast.parse(source).body:
        grouped[PHASES[current]].append(ast.get_source_segment(source, statement))
        if current < len(PHASES) - 1 and _ends(PHASES[current], statement):
            current += 1
    if current < len(PHASES) - 1:
        raise ValueError(f"the example never ends its {PHASES[current]!r} phase (see _ends)")
    return [(phase, "\n".join(grouped[phase])) for phase in PHASES]


def _wait(namespace: dict) -> None:
    """Until every array the example holds is computed (a module's: its state)."""
    import jax
    from flax import nnx
    for value in list(namespace.values()):
        value = nnx.state(value) if isinstance(value, nnx.Module) else value
        jax.block_until_ready([x for x in jax.tree.leaves(value) if isinstance(x, jax.Array)])


def run_example(source: str) -> dict:
    """One process's run: each phase's seconds, compiles and cache hits, and what it printed."""
    namespace: dict = {"__name__": "readme_example"}
    events: dict[str, float] = {}
    found, printed = {}, io.StringIO()
    for phase, code in phases(source):
        before, wall, cpu = dict(events), time.perf_counter(), time.process_time()
        with redirect_stdout(printed):
            exec(compile(code, f"README.md:{phase}", "exec"), namespace)
        _wait(namespace)
        found[phase] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                        "compile_s": events.get(COMPILE, 0.0) - before.get(COMPILE, 0.0),
                        "programs": events.get("programs", 0) - before.get("programs", 0),
                        "cache_hits": events.get(HITS, 0) - before.get(HITS, 0)}
        if phase == "import":  # JAX is loaded now: listen to its compiles from here on
            _listen(events)
    example = found["build"]["wall_s"] + found["first call"]["wall_s"]
    return {"phases": found, "example_s": example, "printed": printed.getvalue()}


def _listen(events: dict) -> None:
    from jax import monitoring

    def duration(name, secs, **_):
        events[name] = events.get(name, 0.0) + secs
        if name == COMPILE:
            events["programs"] = events.get("programs", 0) + 1
    monitoring.register_event_duration_secs_listener(duration)
    monitoring.register_event_listener(
        lambda name, **_: events.__setitem__(name, events.get(name, 0) + 1))


def medians(runs: list[dict]) -> dict:
    """Each phase's figures and example_s, the median over the runs (3 decimals)."""
    phase = {p: {k: round(statistics.median(r["phases"][p][k] for r in runs), 3)
                 for k in runs[0]["phases"][p]} for p in PHASES}
    return {"phases": phase, "example_s": round(statistics.median(r["example_s"] for r in runs), 3)}


def one_process(readme: Path, cache: str) -> dict:
    """The example run by a fresh interpreter with `cache` as its compilation cache."""
    env = {**os.environ, "TJ_JAX_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, __file__, "--child", f"--readme={readme}"], env=env,
                          cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the example failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def measure(readme: Path, rounds: int) -> dict:
    """`rounds` × (cold, warm), each round in a new cache directory."""
    runs: dict[str, list] = {"cold": [], "warm": []}
    for _ in range(rounds):
        cache = tempfile.mkdtemp(prefix="tj_eager_cache_")
        try:
            runs["cold"].append(one_process(readme, cache))
            runs["warm"].append(one_process(readme, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    printed = {r.pop("printed") for kind in runs.values() for r in kind}
    if len(printed) != 1:
        raise RuntimeError(f"the runs printed different things: {sorted(printed)}")
    return {"rounds": rounds, "cold": medians(runs["cold"]), "warm": medians(runs["warm"]),
            "runs": runs, "printed": printed.pop()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="cold and warm runs of each")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md",
                        help="the file whose 'Use the modules' example runs")
    parser.add_argument("--label", default="README.md",
                        help="what the record names the example (the page's first column)")
    parser.add_argument("--out", default="", help="also write the JSON line to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one run
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_example(readme_example(args.readme))))
        return 0
    from bench import machine
    result = measure(args.readme, args.rounds)
    machine.emit({"eager_example": {"example": args.label, **result}}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
