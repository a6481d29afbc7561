#!/usr/bin/env python
"""Speed benchmark: our compiled training against PyTorch on the CPU, and where the time goes.

    python scripts/benchmark.py suite            # full run (~10 min on 2 cores)
    python scripts/benchmark.py suite --quick    # 200 charlm steps, 2 midsize steps
    python scripts/benchmark.py suite --smoke    # seconds-sized shapes (the test suite's)
    python scripts/benchmark.py profile          # the trainer's k-step program vs one step per
                                                 # call, and XLA:CPU's options on that program
    python scripts/benchmark.py ops midsize      # one step traced: where its time goes, per kernel
    python scripts/benchmark.py gemm             # the models' matmul shapes: XLA's dots vs
                                                 # PyTorch's

The spellings from before the sub-commands (`--profile`, `--ops NAME`, `--gemm`, none for the
suite; `--profile_rounds` for `--rounds`, ...) still run: commits and docstrings cite them.

Prints a table per configuration; the LAST line is one JSON object (charlm_wall_ratio_vs_torch,
charlm_wall_ratio_worst_chunk, charlm_val_loss, midsize_mfu, midsize_mfu_vs_xla_dot,
compile_ratio_24_vs_2, ...) with the `machine` it ran on (CPU model, cores, AVX-512/AMX flags,
versions, date; bench/machine.py) and the `mode` it ran in; `--out FILE` writes it there too
(scripts/bench/results/, from which `python scripts/bench/page.py` writes docs/performance.md's
tables). Timings on a shared machine are noisy: compare the ratios, which
are measured in alternating chunks within one run.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# The modes as flags, before they were sub-commands: flag -> (sub-command, takes a value)
OLD_MODES = {"--profile": ("profile", False), "--ops": ("ops", True), "--gemm": ("gemm", False)}
OLD_OPTIONS = {"--profile_variants": "--variants", "--profile_rounds": "--rounds",
               "--profile_chunk": "--chunk", "--gemm_backends": "--backends"}


def main(argv=None) -> int:
    args = _parser().parse_args(old_spelling(sys.argv[1:] if argv is None else list(argv)))
    if getattr(args, "text_path", None) is not None and not os.path.isfile(args.text_path):
        print(f"error: --text_path {args.text_path!r} does not exist", file=sys.stderr)
        return 2
    return args.mode(args)


def old_spelling(argv: list[str]) -> list[str]:
    """`argv` with the sub-command first: the old flag spellings (`--smoke --ops charlm`,
    `--profile --profile_chunk 10`, none for the suite) rewritten into the new ones."""
    if argv[:1] and (not argv[0].startswith("-") or argv[0] in ("-h", "--help")):
        return argv
    command, rest, i = ["suite"], [], 0
    while i < len(argv):
        flag, _, value = argv[i].partition("=")
        if flag in OLD_MODES:
            name, takes_value = OLD_MODES[flag]
            command = [name]
            if takes_value:
                command.append(value or (argv[i + 1] if i + 1 < len(argv) else ""))
                i += 0 if value else 1
        else:
            rest.append(OLD_OPTIONS[flag] + argv[i][len(flag):] if flag in OLD_OPTIONS else argv[i])
        i += 1
    return command + rest


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    modes = parser.add_subparsers(title="modes", required=True, metavar="MODE")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", default="",
                     help="also write the JSON line to this file (e.g. scripts/bench/results/"
                          "benchmark-DATE-CPU.json, which the performance page is written from)")
    text = argparse.ArgumentParser(add_help=False)
    text.add_argument("--text_path", default=os.path.join(REPO, "..", "shared", "data",
                                                          "tinyshakespeare.txt"))
    text.add_argument("--data_dir", default="", help="TFDS data dir ('' = the project default)")
    _suite_parser(modes.add_parser("suite", parents=[out, text], help="the full run: the charlm "
                                   "race against PyTorch, compile times, midsize MFU, seeds"))
    profile = modes.add_parser(
        "profile", parents=[out, text], help="the charlm trainer's variants (k steps per call, "
        "one microbatch, PyTorch, XLA:CPU's options) against one step per call, in workers")
    profile.add_argument("--variants", default="", help="comma-separated names (default: all)")
    profile.add_argument("--rounds", type=int, default=6)
    profile.add_argument("--chunk", type=int, default=50, help="steps per worker per round")
    profile.add_argument("--smoke", action="store_true",
                         help="the suite's --smoke shapes, for tests (seconds)")
    profile.set_defaults(mode=_profile)
    ops = modes.add_parser("ops", parents=[out, text], help="trace that configuration's train "
                           "step and show where its time goes, kernel by kernel (op_profile)")
    ops.add_argument("name", choices=("charlm", "midsize"))
    ops.add_argument("--smoke", action="store_true", help="the suite's --smoke shapes")
    ops.add_argument("--trace_dir", default="",
                     help="keep the trace there (ui.perfetto.dev, TensorBoard)")
    ops.set_defaults(mode=_ops)
    gemm = modes.add_parser("gemm", parents=[out], help="GFLOP/s of the models' matmul shapes "
                            "in each XLA:CPU dot backend, PyTorch and NumPy (bench/gemm.py)")
    gemm.add_argument("--smoke", action="store_true", help="tiny shapes, for tests (seconds)")
    gemm.add_argument("--backends", default="xla,eigen,onednn,xnnpack",
                      help="comma-separated XLA backends (xla = the default)")
    gemm.set_defaults(mode=_gemm)
    return parser


def _suite_parser(suite: argparse.ArgumentParser) -> None:
    size = suite.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="200 charlm steps, 2 midsize steps")
    size.add_argument("--smoke", action="store_true", help="tiny shapes, for tests (seconds)")
    suite.add_argument("--steps_per_call", type=int, default=None,
                       help="also race our step scanned k times per call (1 = skip; default: "
                            "configs/lm.py's train.steps_per_call)")
    suite.add_argument("--microbatches", type=int, default=None,
                       help="our step's train.microbatches (default: configs/lm.py's)")
    suite.add_argument("--seeds", type=int, default=8, help="seeds for the vmap measurement")
    suite.add_argument("--torch_1_thread", type=int, default=1,
                       help="1: also race PyTorch on one thread (telling on a loaded machine)")
    suite.set_defaults(mode=_suite)


def _gemm(args) -> int:
    from bench import gemm
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(gemm.BACKENDS))
    if unknown or not backends:
        print(f"error: --backends {args.backends!r}: unknown {unknown}; valid: "
              f"{', '.join(gemm.BACKENDS)}", file=sys.stderr)
        return 2
    result = gemm.run(backends, smoke=args.smoke, rounds=1 if args.smoke else 3, log=_log)
    print(f"\n== matmul GFLOP/s on the models' shapes (load {os.getloadavg()[0]:.1f}) ==")
    print(gemm.format_table(result))
    _emit({"gemm": result}, "gemm_smoke" if args.smoke else "gemm", args.out)
    return 0


def _profile(args) -> int:
    from bench import profiling
    names = [n for n in args.variants.split(",") if n] or list(profiling.VARIANTS)
    unknown = sorted(set(names) - set(profiling.VARIANTS))
    if unknown:
        print(f"error: unknown variants {unknown}; valid: {', '.join(profiling.VARIANTS)}",
              file=sys.stderr)
        return 2
    uneven = [n for n in names if args.chunk % profiling.steps_per_call(n)]
    if args.chunk < 1 or uneven:
        print(f"error: --chunk {args.chunk} is not a positive multiple of the steps per call of "
              f"{uneven or names}: use a multiple of "
              f"{math.lcm(*(profiling.steps_per_call(n) for n in names))}", file=sys.stderr)
        return 2
    result = profiling.profile(names, os.path.abspath(args.text_path), args.data_dir,
                               rounds=args.rounds, chunk=args.chunk, log=_log,
                               settings=SIZES["smoke"].charlm if args.smoke else None)
    print(f"\n== where the charlm step's time goes (load {os.getloadavg()[0]:.1f}) ==")
    print(profiling.format_table(result))
    _emit({"profile": result}, "profile", args.out)
    return 0


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a suite run is; `name` is the JSON's `mode`."""
    name: str
    charlm: dict[str, Any]  # the race's settings of configs/lm.py (CharLM.override)
    midsize: dict[str, Any]  # measure.Midsize's fields
    seeds_steps: int = 100
    peak_n: int = 2048  # the matmul peak's n³
    chunk: int = 100  # the race's alternating chunks, in steps
    compile_repeats: int = 2
    deep: int = 24  # the compile section's deep stack (the JSON keys name it)


SIZES = {
    "full": Size("full", {}, {}),
    "quick": Size("quick", {"train.num_steps": 200}, {"steps": 2}, seeds_steps=40),
    "smoke": Size("smoke", {"model.d_model": 32, "model.num_heads": 2, "model.num_layers": 2,
                            "model.d_ff": 64, "data.seq_len": 16, "data.num_eval": 24,
                            "train.num_steps": 30, "train.warmup_steps": 5},
                  dict(num_layers=2, d_model=32, num_heads=2, d_ff=64, seq_len=32, batch_size=4,
                       steps=2),
                  seeds_steps=9, peak_n=256, chunk=10, compile_repeats=1, deep=4),
}


def _charlm_run(size: Size, microbatches: int | None):
    """The race's run: configs/lm.py at this size, with --microbatches if given."""
    from bench import setups
    settings = dict(size.charlm)
    if microbatches is not None:
        settings["train.microbatches"] = microbatches
    return setups.CharLM().override(settings)


def _suite(args) -> int:
    import jax
    jax.config.update("jax_enable_compilation_cache", False)  # compile times must be real
    from bench import measure
    from transformer_jax.runtime import hugepages

    size = SIZES["smoke" if args.smoke else "quick" if args.quick else "full"]
    run, mid = _charlm_run(size, args.microbatches), measure.Midsize(**size.midsize)
    if args.smoke:  # seconds: two seeds, no k-step twin, no PyTorch on one thread
        args.seeds, args.steps_per_call, args.torch_1_thread = min(args.seeds, 2), 1, 0
    train = run.config.train
    k = max(1, train.steps_per_call if args.steps_per_call is None else args.steps_per_call)
    if (train.num_steps - k) % k:
        k = 1
    t_start, load0 = time.perf_counter(), os.getloadavg()
    results: dict = {"hugepages": hugepages.active(), "jax": jax.__version__}
    peak = _peak_section(size.peak_n)
    lm, results["charlm_rss_mb"] = _charlm_section(args, run, size.chunk, k)
    comp, results["compile_rss_mb"] = _compile_section(args, run, size)
    ms, peak, results["midsize_rss_mb"] = _midsize_section(args, mid, size.peak_n, peak)
    sv = _seeds_section(args, size.seeds_steps)
    results.update(_headline(lm, ms, comp, sv, peak, k, size.deep))
    results.update({"load_avg_start": load0[0], "load_avg_end": os.getloadavg()[0],
                    "seconds": time.perf_counter() - t_start})
    results = {k_: (round(v, 5) if isinstance(v, float) and math.isfinite(v) else v)
               for k_, v in results.items()}
    _emit(results, size.name, args.out)
    return 0


def _peak_section(n: int) -> dict[str, float]:
    from bench import measure
    _section("matmul peak (f32, %d³, best of 5; measured again before midsize)" % n)
    with measure.PeakRSS() as mem:
        peak = measure.matmul_peak(n)
    _table([("jax jnp.dot (jit)", f"{peak['jax_gflops']:.1f} GFLOP/s"),
            ("torch.mm (2 threads)", f"{peak['torch_gflops']:.1f} GFLOP/s"),
            ("peak = max", f"{peak['peak_gflops']:.1f} GFLOP/s"),
            ("peak RSS", f"{mem.peak_mb:.0f} MB")])
    return peak


def _charlm_section(args, run, chunk: int, k: int) -> tuple[dict, float]:
    from bench import measure
    model, train = run.config.model, run.config.train
    _section(f"charlm: {model.num_layers}x(d={model.d_model}, h={model.num_heads}, "
             f"ff={model.d_ff}), T={run.config.data.seq_len}, B={train.batch_size}, "
             f"{train.num_steps} steps, alternating chunks of {chunk}")
    with measure.PeakRSS() as mem:
        lm = measure.charlm(args.text_path, run, chunk=chunk, steps_per_call=k,
                            torch_1_thread=bool(args.torch_1_thread), data_dir=args.data_dir,
                            log=_log)
    rows = [("contender", "ms/step", "steps/s", "cpu s", "wall vs torch", "chunk median",
             "worst chunk", "first call s", "val loss", "train loss")]
    for name, c in lm["contenders"].items():
        rows.append((name, f"{c['ms_per_step']:.1f}", f"{c['steps_per_s']:.1f}",
                     f"{c['cpu_s']:.1f}", f"{c['wall_ratio_vs_torch']:.3f}",
                     f"{c['chunk_ratio_vs_torch_median']:.3f}",
                     f"{c['chunk_ratio_vs_torch_worst']:.3f}", f"{c['first_call_s']:.1f}",
                     f"{c['val_loss']:.4f}", f"{c['final_train_loss']:.4f}"))
    _rows(rows)
    print(f"timed steps {lm['timed_steps']} (after {lm['steps'] - lm['timed_steps']} untimed), "
          f"eval windows {lm['eval_windows']}, peak RSS {mem.peak_mb:.0f} MB, max |loss gap| "
          f"ours-torch over the first 100 steps {lm['max_train_loss_gap_first_100']:.2e}")
    return lm, mem.peak_mb


def _compile_section(args, run, size: Size) -> tuple[dict, float]:
    from bench import measure, setups
    config = run.config
    _section(f"compile time of the train step (d={config.model.d_model}), 2 vs {size.deep} "
             "layers (scanned)")
    ds = setups.text_dataset(args.text_path, config.data.seq_len, config.data.num_eval,
                             data_dir=args.data_dir)
    batch = ds.train_batch(0, config.train.batch_size, "decoder")
    with measure.PeakRSS() as mem:
        comp = {n: measure.compile_time(n, run, ds.vocab_size, batch, size.compile_repeats)
                for n in (2, size.deep)}
    _rows([("layers", "trace+lower s", "compile s", "total s")] +
          [(str(n), f"{c['lower_s']:.2f}", f"{c['compile_s']:.2f}", f"{c['total_s']:.2f}")
           for n, c in comp.items()])
    print(f"peak RSS {mem.peak_mb:.0f} MB")
    return comp, mem.peak_mb


def _midsize_section(args, mid, peak_n: int, peak: dict) -> tuple[dict, dict, float]:
    """The mid-size model's throughput; returns it, the best matmul peak seen, the peak RSS."""
    from bench import measure
    _section(f"midsize: {mid.num_layers}x(d={mid.d_model}, h={mid.num_heads}, ff={mid.d_ff}), "
             f"T={mid.seq_len}, B={mid.batch_size}")
    again = measure.matmul_peak(peak_n)  # the load may have changed: keep the best seen
    peak = {k: max(v, again[k]) for k, v in peak.items()}
    print(f"matmul peak re-measured: jax {again['jax_gflops']:.1f}, torch "
          f"{again['torch_gflops']:.1f} GFLOP/s; peak used = best seen = {peak['peak_gflops']:.1f}")
    with measure.PeakRSS() as mem:
        ms = measure.midsize(args.text_path, mid, peak["peak_gflops"], data_dir=args.data_dir,
                             log=_log)
    _table([("matmul params N", f"{ms['params_matmul']:,}"),
            ("model FLOPs / step", f"{ms['flops_per_step'] / 1e9:.1f} G  "
                                   "(6·N + 12·L·T·d per token, × B·T tokens)"),
            ("first call (compile + step)", f"{ms['first_call_s']:.1f} s"),
            ("s/step (median, best)",
             f"{ms['s_per_step_median']:.2f}, {ms['s_per_step_best']:.2f}"),
            ("steps/s, tokens/s", f"{ms['steps_per_s']:.3f}, {ms['tokens_per_s']:.0f}"),
            ("model GFLOP/s", f"{ms['model_gflops']:.1f}"),
            ("MFU (median step, best step)", f"{ms['mfu']:.3f}, {ms['mfu_best_step']:.3f}"),
            ("model FLOP/s / JAX's 2048³ dot", f"{ms['model_gflops'] / peak['jax_gflops']:.3f}"),
            ("CPU s / step (of it system)", f"{ms['cpu_s_per_step']:.2f} "
                                             f"({ms['sys_s_per_step']:.2f})"),
            ("minor page faults / step", f"{ms['page_faults_per_step']:,.0f}"),
            ("peak RSS", f"{mem.peak_mb:.0f} MB")])
    return ms, peak, mem.peak_mb


def _seeds_section(args, steps: int) -> dict:
    from bench import measure
    _section(f"{args.seeds} seeds: sequential runs vs one vmapped program (d=64, 2 layers, "
             "B=32, T=16)")
    sv = measure.seeds_vmap(args.text_path, num_seeds=args.seeds, steps=steps,
                            data_dir=args.data_dir, log=_log)
    _table([("sequential", f"{sv['sequential_s']:.2f} s"), ("vmapped", f"{sv['vmapped_s']:.2f} s"),
            ("vmapped / sequential", f"{sv['ratio_vmapped_vs_sequential']:.3f}"),
            ("max relative loss gap", f"{sv['max_rel_loss_gap']:.1e}")])
    return sv


def _headline(lm: dict, ms: dict, comp: dict, sv: dict, peak: dict, k: int, deep: int) -> dict:
    """The JSON line's numbers (the performance page's and the tests' keys)."""
    single, torch_ = lm["contenders"]["ours"], lm["contenders"]["torch"]
    multi = lm["contenders"].get(f"ours_{k}_per_call")
    # The headline is our trainer as configs/lm.py runs it: train.steps_per_call = k per call.
    ours = multi if multi is not None else single
    out = {
        "charlm_steps_per_call": k if multi is not None else 1,
        "charlm_wall_ratio_vs_torch": ours["wall_ratio_vs_torch"],
        "charlm_chunk_ratio_vs_torch_median": ours["chunk_ratio_vs_torch_median"],
        "charlm_wall_ratio_worst_chunk": ours["chunk_ratio_vs_torch_worst"],
        "charlm_val_loss": ours["val_loss"], "charlm_torch_val_loss": torch_["val_loss"],
        "charlm_steps_per_s": ours["steps_per_s"],
        "charlm_torch_steps_per_s": torch_["steps_per_s"],
        "charlm_compile_s": ours["first_call_s"], "charlm_steps": lm["steps"],
        "midsize_mfu": ms["mfu"],
        # against XLA's own best f32 2048³ jnp.dot of this run (the peak above is the best of
        # JAX's and PyTorch's): what the step makes of the matmuls XLA:CPU can give it
        "midsize_mfu_vs_xla_dot": ms["model_gflops"] / peak["jax_gflops"],
        **{f"midsize_{key}": ms[key] for key in (
            "steps_per_s", "tokens_per_s", "model_gflops", "cpu_s_per_step", "sys_s_per_step",
            "page_faults_per_step")},
        **{f"matmul_{key}": peak[key] for key in ("peak_gflops", "jax_gflops", "torch_gflops")},
        "compile_s_2_layers": comp[2]["total_s"], f"compile_s_{deep}_layers": comp[deep]["total_s"],
        f"compile_ratio_{deep}_vs_2": comp[deep]["total_s"] / comp[2]["total_s"],
        "seeds_vmap_ratio_vs_sequential": sv["ratio_vmapped_vs_sequential"],
        "seeds": sv["num_seeds"],
    }
    if "torch_1_thread" in lm["contenders"]:
        t1 = lm["contenders"]["torch_1_thread"]
        out.update({"charlm_wall_ratio_vs_torch_1_thread": ours["wall_s"] / t1["wall_s"],
                    "charlm_torch_1_thread_steps_per_s": t1["steps_per_s"]})
    if multi is not None:
        out.update({"charlm_1_per_call_wall_ratio_vs_torch": single["wall_ratio_vs_torch"],
                    "charlm_1_per_call_val_loss": single["val_loss"],
                    "charlm_1_per_call_steps_per_s": single["steps_per_s"]})
    return out


def _ops(args) -> int:
    """Traces one step of `args.name` (one step per call): its kernel table and a JSON line."""
    import jax

    from bench import measure, setups
    from transformer_jax.train import op_profile

    size = SIZES["smoke" if args.smoke else "full"]
    if args.name == "charlm":
        run = _charlm_run(size, None)
        model, train, seq_len = run.config.model, run.config.train, run.config.data.seq_len
        ds = setups.text_dataset(args.text_path, seq_len, 16, data_dir=args.data_dir)
        ours = setups.Ours.build(*run.configs(ds.vocab_size))
        title = (f"{model.num_layers}x(d={model.d_model}, h={model.num_heads}), T={seq_len}, "
                 f"B={train.batch_size}")
    else:
        mid = measure.Midsize(**size.midsize)
        ds, ours = measure.midsize_setup(args.text_path, mid, args.data_dir)
        title = (f"{mid.num_layers}x(d={mid.d_model}, h={mid.num_heads}), T={mid.seq_len}, "
                 f"B={mid.batch_size}")
    batch, rng = ds.train_batch(0, ours.train.batch_size, "decoder"), jax.random.key(1)
    compiled = ours.train_step.lower(ours.state, batch, rng).compile()

    def step():
        ours.state, metrics = compiled(ours.state, batch, rng)
        jax.block_until_ready((ours.state, metrics))

    steps = 2 if args.smoke else 5
    result = op_profile.profile(step, compiled.as_text(), steps=steps, trace_dir=args.trace_dir)
    _section(f"where the {args.name} train step's time goes: {title}, one step per call, "
             f"{steps} traced steps")
    print(op_profile.format_table(result))
    if args.trace_dir:
        print(f"trace kept in {args.trace_dir} (ui.perfetto.dev, or tensorboard --logdir "
              f"{args.trace_dir})")
    _emit({"ops": args.name, **{k: v for k, v in result.items() if k != "rows"},
           "top": result["rows"][:10]}, "ops", args.out)
    return 0


def _emit(result: dict, mode: str, out: str) -> None:
    """Prints the run's JSON line, with the machine it ran on, and writes it to `out` if set."""
    from bench import machine
    machine.emit({**result, "mode": mode}, out)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def _table(rows) -> None:
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:{width}s}  {value}")


def _rows(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(f"{str(c):>{w}s}" if i else f"{str(c):{w}s}" for i, (c, w) in
                        enumerate(zip(r, widths))), flush=True)


if __name__ == "__main__":
    from transformer_jax.runtime import hugepages
    hugepages.reexec_if_useful()  # as the trainer runs (both contenders share the process)
    sys.exit(main())
