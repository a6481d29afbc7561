"""The benchmarks' records: the machine beside every figure (scripts/bench/machine.py), the
side-by-side run's parsing and ratios (scripts/bench/vs_nanogpt.py), and docs/performance.md's
tables written from the results files (scripts/bench/page.py)."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from bench import machine, page, vs_nanogpt  # noqa: E402

INTEL = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n"
         "flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_fp16 amx_tile "
         "amx_bf16 fma\nprocessor\t: 1\nflags\t\t: avx2\n")
AMD = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n"


def test_vector_flags_lists_every_avx512_subset_and_amx_of_the_first_cpu():
    assert machine.vector_flags(INTEL) == ["amx_bf16", "amx_tile", "avx2", "avx512_bf16",
                                           "avx512_fp16", "avx512bw", "avx512f"]
    assert machine.vector_flags(AMD) == ["avx2"]
    assert machine.vector_flags(ARM) == []


def test_describe_names_the_cpu_cores_versions_and_date():
    record = machine.describe(AMD, 2, {"jax": "0.10.2"}, "2026-12-03T10:00:00+00:00")
    assert record["cpu"] == "AMD EPYC" and record["cpus"] == 2
    assert record["cpu_flags"] == ["avx2"] and record["jax"] == "0.10.2"
    assert record["date"] == "2026-12-03T10:00:00+00:00"
    assert json.loads(json.dumps(machine.record()))["cpus"] >= 1


TIME_V = """\tCommand being timed: "python train.py"
\tUser time (seconds): 200.50
\tSystem time (seconds): 5.24
\tElapsed (wall clock) time (h:mm:ss or m:ss): {wall}
\tMaximum resident set size (kbytes): 380388
\tExit status: 0
"""


@pytest.mark.parametrize("wall, seconds", [("1:47.01", 107.01), ("1:02:03", 3723.0)])
def test_parse_time_v_reads_wall_cpu_and_peak(wall, seconds):
    figures = vs_nanogpt.parse_time_v(TIME_V.format(wall=wall))
    assert figures["wall_s"] == pytest.approx(seconds)
    assert figures["cpu_s"] == pytest.approx(205.74)
    assert figures["peak_mib"] == pytest.approx(380388 / 1024)
    with pytest.raises(ValueError, match="max_rss_kb"):
        vs_nanogpt.parse_time_v(TIME_V.format(wall="0:01").replace("Maximum resident", "x"))


def test_nanogpt_val_loss_is_the_last_eval_line():
    out = ("step 0: train loss 4.2000, val loss 4.1900\niter 1: loss 4.1\n"
           "step 2000: train loss 1.7600, val loss 1.8857\n")
    assert vs_nanogpt.nanogpt_val_loss(out) == 1.8857
    assert vs_nanogpt.nanogpt_val_loss("iter 1: loss 4.1\n") is None


def test_summarize_takes_medians_and_ours_over_theirs():
    rows = [{"pair": p, "side": side, "wall_s": w, "cpu_s": c, "peak_mib": m, "val_loss": v}
            for p, side, w, c, m, v in [(1, "nanogpt", 100, 200, 400, 1.9),
                                        (1, "ours", 80, 150, 600, 1.8),
                                        (2, "nanogpt", 110, 210, 420, 1.9),
                                        (2, "ours", 90, 170, 500, None),
                                        (3, "ours", 70, 140, 450, 1.8)]]
    s = vs_nanogpt.summarize(rows[:4])
    assert s["ours"]["wall_s"] == 85 and s["nanogpt"]["wall_s"] == 105
    assert s["wall_ratio"] == pytest.approx(85 / 105)
    assert s["peak_ratio"] == pytest.approx(550 / 410)
    assert s["ours"]["peak_mib_range"] == [500, 600] and s["ours"]["val_loss"] == 1.8
    assert s["ours_warm"]["runs"] == 1 and s["peak_ratio_warm"] == pytest.approx(500 / 410)
    s = vs_nanogpt.summarize(rows)  # warm: ours' runs after its first (pairs 2 and 3)
    assert s["ours_warm"]["wall_s"] == 80 and s["ours_warm"]["peak_mib"] == 475
    assert s["wall_ratio_warm"] == pytest.approx(80 / 105)
    assert "ours_warm" not in vs_nanogpt.summarize([r for r in rows if r["pair"] == 1])


def test_prepare_nanogpt_data_writes_its_prepare_py_format(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("abcabcabca")
    data = vs_nanogpt.prepare_nanogpt_data(text, tmp_path)
    assert data == {"vocab_size": 3, "train_tokens": 9, "val_tokens": 1}
    out = tmp_path / "data" / "shakespeare_char"
    assert np.fromfile(out / "train.bin", np.uint16).tolist() == [0, 1, 2] * 3
    assert np.fromfile(out / "val.bin", np.uint16).tolist() == [0]
    with open(out / "meta.pkl", "rb") as f:
        assert pickle.load(f)["stoi"] == {"a": 0, "b": 1, "c": 2}


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert vs_nanogpt.main([str(tmp_path)]) == 2
    assert "is not a nanoGPT checkout" in capsys.readouterr().err
    (tmp_path / "config").mkdir()
    (tmp_path / "train.py").write_text("")
    (tmp_path / "config" / "train_shakespeare_char.py").write_text("")
    assert vs_nanogpt.main([str(tmp_path), "--text", str(tmp_path / "no.txt")]) == 2
    assert "no.txt" in capsys.readouterr().err
    (tmp_path / "t.txt").write_text("ab")
    assert vs_nanogpt.main([str(tmp_path), "--text", str(tmp_path / "t.txt"), "--pairs", "0"]) == 2
    err = capsys.readouterr().err
    assert "--pairs 0" in err and len(err.strip().splitlines()) == 1
    assert vs_nanogpt.main([str(tmp_path), "--text", str(tmp_path / "t.txt"),
                            "--ours-config", "dense_matmul=bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "--ours-config 'dense_matmul=bfloat16' is not FIELD=VALUE" in err
    assert len(err.strip().splitlines()) == 1
    for setting, message in (
            ("model.dense_matmul=bf16", "model.dense_matmul='bf16' is not one of: compute, bfloat16"),
            ("model.nope=1", "configs/lm.py has no field model.nope"),
            ("train.num_steps=many", "train.num_steps takes int values")):
        assert vs_nanogpt.main([str(tmp_path), "--text", str(tmp_path / "t.txt"),
                                "--ours-config", setting]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    ours = lambda *settings: vs_nanogpt.ours_command("py", 2000, Path("t"), Path("d"), Path("w"),
                                                      settings)
    assert vs_nanogpt.settings_error(ours("model.dense_matmul=bfloat16")) == ""
    assert "train.warmup_steps=100 must be less than train.num_steps=20" in (  # with ours' own
        vs_nanogpt.settings_error(ours("train.num_steps=20")))


def test_ours_settings_reach_our_command_line_only():
    plain = vs_nanogpt.ours_command("py", 10, Path("t.txt"), Path("d"), Path("w"))
    added = vs_nanogpt.ours_command("py", 10, Path("t.txt"), Path("d"), Path("w"),
                                    ("model.dense_matmul=bfloat16",))
    assert added == plain + ["--config.model.dense_matmul=bfloat16"]


def _record(cpu, date, wall_ratio, settings=None):
    summary = {"ours": {"wall_s": 80.0 * wall_ratio, "peak_mib": 600.0, "val_loss": 1.85},
               "nanogpt": {"wall_s": 80.0, "peak_mib": 400.0, "val_loss": 1.88},
               "wall_ratio": wall_ratio, "peak_ratio": 1.5}
    run = {"max_iters": page.NANOGPT_ITERS, "pairs": 2, "summary": summary}
    if settings is not None:  # older records have no ours_config
        run["ours_config"] = settings
    return {"vs_nanogpt": run,
            "machine": {"cpu": cpu, "cpus": 2, "cpu_flags": ["avx2"], "date": date}}


def test_latest_per_cpu_keeps_one_row_per_cpu_the_latest():
    old, new = _record("AMD EPYC", "2026-12-01", 1.2), _record("AMD EPYC", "2026-12-02", 0.9)
    xeon = _record("Intel Xeon", "2026-11-01", 1.1)
    assert page.latest_per_cpu([new, xeon, old]) == [new, xeon]


def test_a_run_with_settings_of_ours_gets_its_own_row():
    plain = _record("Intel Xeon", "2026-12-03", 1.1)
    rounded = _record("Intel Xeon", "2026-12-04", 0.95, ["model.dense_matmul=bfloat16"])
    newer_plain = _record("Intel Xeon", "2026-12-05", 1.05, [])
    block = page.render([plain, rounded])
    assert "| 2026-12-03 | - | 2 | 88.0 / 80.0 | 1.10 |" in block
    assert "| 2026-12-04 | `model.dense_matmul=bfloat16` | 2 | 76.0 / 80.0 | 0.95 |" in block
    later = page.render([plain, rounded, newer_plain])  # no settings = [] = an older record's
    assert "| 2026-12-03 |" not in later and "| 2026-12-05 | - | 2 | 84.0 / 80.0 | 1.05 |" in later


def test_render_writes_the_rows_between_the_markers(tmp_path):
    block = page.render([_record("AMD EPYC", "2026-12-02", 0.9)])
    assert page.START not in block and page.END not in block
    assert "| AMD EPYC | 2 | avx2 | 2026-12-02 | - | 2 | 72.0 / 80.0 | 0.90 |" in block
    assert "No full run recorded yet." in block
    (tmp_path / "results").mkdir()
    written = tmp_path / "performance.md"
    written.write_text(f"head\n{page.START}\nold\n{page.END}\ntail\n")
    assert page.main([f"--results={tmp_path / 'results'}", f"--page={written}"]) == 0
    assert written.read_text() == f"head\n{page.START}\n{page.render([])}{page.END}\ntail\n"
    written.write_text("no markers")
    assert page.main([f"--results={tmp_path / 'results'}", f"--page={written}"]) == 2


def test_first_step_row_takes_the_cold_and_the_last_warm_run():
    def run(total, compile_s, peak):
        return {"to first step": total, "imports": 1.0, "init": 0.5, "first call: compile": compile_s,
                "first call: trace": 0.25, "first call: lower": 0.25, "peak MiB, first call": peak}
    record = {"first_step": [run(10.5, 5.5, 900), run(9.0, 3.0, 700), run(4.5, 1.1, 600)],
              "machine": {"cpu": "Intel Xeon", "cpus": 2, "cpu_flags": ["avx512f"],
                          "date": "2026-12-03", "jax": "0.10.2", "torch": None}}
    block = page.render([record])
    assert ("| Intel Xeon | 2 | avx512f | 2026-12-03 | 10.5 / 4.5 | 1.0 | 0.5 / 0.5 | 5.5 / 1.1 "
            "| 0.5 | 900 / 600 | jax 0.10.2, torch ? |") in block
    assert "No first-step run recorded yet." in page.render([_record("AMD EPYC", "2026-12-02", 1.0)])
    cold_only = {**record, "first_step": record["first_step"][:1]}  # no warm run: no row
    assert "No first-step run recorded yet." in page.render([cold_only])


def test_memory_row_reads_the_stages_and_the_whole_runs():
    stages = [{"stage": name, "peak_mib": mib} for name, mib in [
        ("python interpreter", 13), ("XLA CPU client started", 214), ("flax, optax", 217),
        ("the rest of transformer_jax.main", 250), ("text prepared (TFDS array_record)", 282)]]
    runs = {"10 steps, no huge pages": {"peak_mib": 800}, "2000 steps, no huge pages":
            {"peak_mib": 900}, "2000 steps, huge pages": {"peak_mib": 950}}
    machine = {"cpu": "Intel Xeon", "cpus": 2, "cpu_flags": [], "date": "2026-12-03", "jax": "0.10.2"}
    block = page.render([{"stages": stages, "runs": runs, "steps": 2000, "machine": machine}])
    assert ("| Intel Xeon | 2 | none | 2026-12-03 | 13 | 214 | 250 | 282 | 800 | 900 | 950 "
            "| jax 0.10.2, torch ? |") in block
    short = {"stages": stages, "runs": runs, "steps": 500, "machine": machine}  # not the run
    assert "No memory run recorded yet." in page.render([short])


def test_committed_page_is_what_the_results_files_give(tmp_path):
    check = [sys.executable, str(REPO / "scripts" / "bench" / "page.py"), "--check"]
    done = subprocess.run(check, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stale = tmp_path / "performance.md"
    text = (REPO / "docs" / "performance.md").read_text()
    number = text[text.index(page.START):].split("|")[10]  # a cell of the first data row
    stale.write_text(text.replace(number, " 9.99 ", 1))
    done = subprocess.run(check + ["--page", str(stale)], capture_output=True, text=True)
    assert done.returncode == 1 and "out of date" in done.stderr


def test_profile_table_rows_per_variant_with_its_reference_and_arithmetic():
    rows = {"trainer": {"ms_per_step": 36.0, "ratio_vs_trainer": 1.0, "peak_mib": 600.4},
            "scan_10": {"ms_per_step": 26.0, "ratio_vs_trainer": 0.722, "peak_mib": 700.0},
            "torch_2_threads": {"ms_per_step": 24.0, "ratio_vs_trainer": 0.667, "peak_mib": 500.0},
            "xla_no_ynn": {"ms_per_step": 30.0, "ratio_vs_trainer": 0.833, "reference": "scan_10",
                           "peak_mib": 450.0,
                           "ratio_vs_reference": 1.154, "same_arithmetic": False,
                           "xla_flags": "--xla_cpu_experimental_ynn_fusion_type="},
            "model_bf16_dense": {"ms_per_step": 23.0, "ratio_vs_trainer": 0.639,
                                 "reference": "scan_10", "peak_mib": 720.0,
                                 "ratio_vs_reference": 0.885, "same_arithmetic": False,
                                 "xla_flags": "", "changes": "model.dense_matmul=bfloat16"}}
    machine = {"cpu": "Intel Xeon", "cpus": 2, "cpu_flags": ["avx512f"], "date": "2026-12-04",
               "jax": "0.10.2", "torch": "2.13.0"}
    block = page.render([{"mode": "profile", "profile": rows, "machine": machine}])
    assert "Intel Xeon, 2 logical CPUs (avx512f), 2026-12-04, jax 0.10.2, torch 2.13.0:" in block
    lines = [line for line in block.splitlines() if line.startswith(("| trainer", "| scan_10",
                                                                     "| torch", "| xla",
                                                                     "| model"))]
    assert lines == [  # fastest first; vs torch chained through the baseline (0.722 / 0.667)
        "| model_bf16_dense | `model.dense_matmul=bfloat16` | 23.0 | 0.639 | 0.958 | 0.885 | no "
        "| 720 |",
        "| torch_2_threads | - | 24.0 | 0.667 | 1.000 | - | - | 500 |",
        "| scan_10 | - | 26.0 | 0.722 | 1.082 | - | - | 700 |",
        "| xla_no_ynn | `XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=` | 30.0 | 0.833 | 1.249 "
        "| 1.154 | no | 450 |",
        "| trainer | - | 36.0 | 1.000 | 1.499 | - | - | 600 |"]
    assert "No profile run recorded yet." in page.render([_record("AMD EPYC", "2026-12-02", 1.0)])


def _full_run(**midsize) -> dict:
    return {"mode": "full", "charlm_wall_ratio_vs_torch": 1.06,
            "charlm_wall_ratio_worst_chunk": 1.09,
            "midsize_mfu_vs_xla_dot": 0.6, "midsize_steps_per_s": 0.4, "matmul_jax_gflops": 230.0,
            "matmul_torch_gflops": 250.0, "compile_ratio_24_vs_2": 2.0, **midsize,
            "machine": {"cpu": "Intel(R) Xeon(R) Processor", "cpus": 2, "cpu_flags": ["amx_bf16"],
                        "date": "2026-12-04", "jax": "0.10.2"}}


def test_benchmark_row_shows_the_midsize_step_and_its_system_seconds_where_recorded():
    assert "| 0.600 | 2.50 (0.81) | 230 |" in page.render([_full_run(midsize_sys_s_per_step=0.81)])
    assert "| 0.600 | 2.50 | 230 |" in page.render([_full_run()])  # a record from before


def test_clock_counts_system_seconds_and_the_page_faults_of_fresh_memory():
    """Touching 512 MiB never mapped before: the kernel maps and zeroes every page (4 KiB, or
    2 MiB where numpy's huge-page advice takes), tens of milliseconds of system time."""
    from bench import measure

    idle = measure.Clock()
    with idle:
        pass
    assert idle.page_faults < 1000
    fresh = measure.Clock()
    with fresh:
        block = np.ones(512 << 20, np.uint8)  # above malloc's mmap threshold: mapped afresh
    assert int(block.sum()) == 512 << 20
    assert fresh.page_faults >= 256 and fresh.page_faults > idle.page_faults
    assert fresh.system > 0 and fresh.cpu >= fresh.system and len(fresh.chunks) == 1
