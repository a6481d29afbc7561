"""nanoGPT's README CPU run and ours, side by side, as a user runs them: whole processes.

    scripts/vs_nanogpt.sh NANOGPT_DIR [--text PATH] [--pairs 2] [--max-iters 2000] [--out FILE]
        [--ours-config FIELD=VALUE ...]

NANOGPT_DIR is a local checkout of github.com/karpathy/nanoGPT. Its data is prepared first,
untimed, as its data/shakespeare_char/prepare.py prepares it (the same characters, the first
90 % for training, the rest held out) but from the local text instead of a download; ours is
prepared untimed too (the TFDS files `configs/lm.py` reads). Then, in alternating pairs (the
first of each pair alternates), each side runs under `/usr/bin/time -v`:

  nanoGPT  python train.py config/train_shakespeare_char.py, with its README's CPU flags;
  ours     python -m transformer_jax.main --config=configs/lm.py, with the same model: learned
           positions over a context of 64, weight decay 0.1 (nanoGPT's), the same iterations.

`--ours-config model.dense_matmul=bfloat16` (repeatable) adds `--config.FIELD=VALUE` to our
runs; the record keeps it, and the page gives such a run its own row. The table gives each
run's wall time, CPU time (user + sys), peak resident memory and
validation loss. The two losses are not estimated alike: nanoGPT's is the mean of 20 random
batches of the held-out split (its `estimate_loss`, --eval_iters=20); ours is the whole held-out
split, every window (configs/lm.py's data.num_eval=0). The last line is one JSON object with
every number and the machine (bench/machine.py); `--out FILE` writes it there too.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TEXT = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
TIME = "/usr/bin/time"
SIDES = ("nanogpt", "ours")
_SETTING = re.compile(r"[a-z_]+\.[a-z_0-9]+=.+")  # --ours-config: section.field=value
NANOGPT_EVAL_INTERVAL = 250  # config/train_shakespeare_char.py's
# nanoGPT's README CPU command, after `config/train_shakespeare_char.py`.
NANOGPT_README_FLAGS = ("--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1",
                        "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
                        "--n_embd=128", "--dropout=0.0")
_NANOGPT_VAL = re.compile(r"^step \d+: train loss [\d.]+, val loss (?P<val>[\d.]+)$", re.M)
_TIME_FIELDS = {"wall": "Elapsed (wall clock) time (h:mm:ss or m:ss)",
                "user": "User time (seconds)", "sys": "System time (seconds)",
                "max_rss_kb": "Maximum resident set size (kbytes)"}


def prepare_nanogpt_data(text_path: Path, nanogpt_dir: Path) -> dict:
    """data/shakespeare_char/{train,val}.bin and meta.pkl, as nanoGPT's prepare.py writes them
    (sorted characters as uint16 ids, the first 90 % of the text for training), from a local
    text instead of its download."""
    text = text_path.read_text()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    split = int(len(text) * 0.9)
    out = nanogpt_dir / "data" / "shakespeare_char"
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", text[:split]), ("val", text[split:])):
        np.array([stoi[c] for c in part], dtype=np.uint16).tofile(out / f"{name}.bin")
    with open(out / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
    return {"vocab_size": len(chars), "train_tokens": split, "val_tokens": len(text) - split}


def nanogpt_command(python: str, max_iters: int, out_dir: Path) -> list[str]:
    # Its eval runs every 250 iterations: at a count off that grid, the last eval is at the end.
    interval = NANOGPT_EVAL_INTERVAL if max_iters % NANOGPT_EVAL_INTERVAL == 0 else max_iters
    return [python, "train.py", "config/train_shakespeare_char.py", *NANOGPT_README_FLAGS,
            f"--max_iters={max_iters}", f"--lr_decay_iters={max_iters}",
            f"--eval_interval={interval}", f"--out_dir={out_dir}"]


def ours_command(python: str, max_iters: int, text_path: Path, data_dir: Path,
                 workdir: Path, settings: tuple[str, ...] = ()) -> list[str]:
    return [python, "-m", "transformer_jax.main", "--config=configs/lm.py",
            f"--workdir={workdir}", f"--config.data.text_path={text_path}",
            f"--config.data.data_dir={data_dir}", "--config.model.position=learned",
            "--config.model.max_len=64", "--config.train.weight_decay=0.1",
            f"--config.train.num_steps={max_iters}",
            # warm-up 100 as nanoGPT, shorter than a short run (its cosine needs steps after it)
            f"--config.train.warmup_steps={min(100, max_iters // 2)}",
            *(f"--config.{setting}" for setting in settings)]  # FIELD=VALUE, the user's own


def settings_error(command: list[str]) -> str:
    """Why configs/lm.py with our command's --config.FIELD=VALUE settings (`ours_command`'s, the
    user's --ours-config last) would not run, '' if it would: checked here, in milliseconds,
    rather than by our first run after nanoGPT's."""
    from transformer_jax.config import ConfigError
    from transformer_jax.studies.design.loading import load_config
    from transformer_jax.train.run import check_config

    config = load_config(REPO / "configs" / "lm.py")
    for setting in (a.removeprefix("--config.") for a in command if a.startswith("--config.")):
        dotted, _, text = setting.partition("=")
        section, field = dotted.split(".")
        if section not in config or field not in config[section]:
            return f"--ours-config {setting!r}: configs/lm.py has no field {dotted}"
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text  # a string, as absl's --config.FIELD=VALUE reads it
        try:
            config[section][field] = value
        except TypeError:
            return (f"--ours-config {setting!r}: {dotted} takes "
                    f"{type(config[section][field]).__name__} values")
    try:
        check_config(config)
    except ConfigError as error:
        return f"--ours-config: {error}"
    return ""


def parse_time_v(report: str) -> dict:
    """wall_s, cpu_s (user + sys) and peak_mib from GNU time's `-v` report."""
    values = {}
    for line in report.splitlines():
        key, _, value = line.strip().rpartition(": ")
        for name, label in _TIME_FIELDS.items():
            if key == label:
                values[name] = value.strip()
    missing = sorted(set(_TIME_FIELDS) - set(values))
    if missing:
        raise ValueError(f"no {missing} in the `{TIME} -v` report: {report[-300:]!r}")
    wall = 0.0
    for part in values["wall"].split(":"):  # h:mm:ss or m:ss.ss
        wall = wall * 60 + float(part)
    return {"wall_s": wall, "cpu_s": round(float(values["user"]) + float(values["sys"]), 2),
            "peak_mib": int(values["max_rss_kb"]) / 1024}


def nanogpt_val_loss(stdout: str) -> Optional[float]:
    """The last `step N: train loss X, val loss Y` line's Y; None where it printed none."""
    found = _NANOGPT_VAL.findall(stdout)
    return float(found[-1]) if found else None


def ours_val_loss(workdir: Path) -> Optional[float]:
    """The final evaluation's loss (the whole held-out split) from the run's status.json."""
    status = workdir / "status.json"
    if not status.exists():
        return None
    return json.loads(status.read_text()).get("eval", {}).get("loss")


def run_timed(command: list[str], cwd: Path, log: Path, env: Optional[dict] = None) -> dict:
    """Runs `command` under `/usr/bin/time -v` (stdout and stderr to `log`); its figures."""
    report = log.with_suffix(".time")
    with open(log, "w") as out:
        done = subprocess.run([TIME, "-v", "-o", str(report), *command], cwd=cwd, stdout=out,
                              stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} exited {done.returncode}; its log: {log}")
    return parse_time_v(report.read_text())


def race(nanogpt_dir: Path, text_path: Path, python: str, nanogpt_python: str, pairs: int,
         max_iters: int, scratch: Path, log=print, ours_settings: tuple[str, ...] = ()
         ) -> list[dict]:
    """`pairs` alternating pairs of whole runs (the side that goes first alternates); a row per
    run. Ours gets a fresh compilation cache here: its first run compiles, later ones reuse."""
    env = {**os.environ, "TJ_JAX_CACHE_DIR": str(scratch / "jax_cache")}
    rows = []
    for pair in range(pairs):
        for side in (SIDES if pair % 2 == 0 else SIDES[::-1]):
            run_dir = scratch / f"{side}_{pair}"
            if side == "nanogpt":
                command, cwd = nanogpt_command(nanogpt_python, max_iters, run_dir), nanogpt_dir
            else:
                command, cwd = ours_command(python, max_iters, text_path, scratch / "tfds",
                                            run_dir, ours_settings), REPO
            log(f"[vs_nanogpt] pair {pair + 1}/{pairs}: {side} ...")
            figures = run_timed(command, cwd, scratch / f"{side}_{pair}.log", env)
            loss = (nanogpt_val_loss((scratch / f"{side}_{pair}.log").read_text())
                    if side == "nanogpt" else ours_val_loss(run_dir))
            rows.append({"pair": pair + 1, "side": side, **figures, "val_loss": loss})
            log(f"[vs_nanogpt]   {figures['wall_s']:.1f} s wall, {figures['peak_mib']:.0f} MiB")
    return rows


def summarize(rows: list[dict]) -> dict:
    """Each side's medians over its runs, and ours over nanoGPT's. Also `ours_warm`: ours over
    its runs after the first (pairs >= 2), which load the programs the first compiled, as a
    user's second run does; nanoGPT compiles nothing, so its runs are alike."""
    def medians(mine: list[dict]) -> dict:
        losses = [r["val_loss"] for r in mine if r["val_loss"] is not None]
        return {"runs": len(mine),
                **{k: statistics.median(r[k] for r in mine) for k in ("wall_s", "cpu_s", "peak_mib")},
                "peak_mib_range": [min(r["peak_mib"] for r in mine),
                                   max(r["peak_mib"] for r in mine)],
                "val_loss": statistics.median(losses) if losses else None}

    sides = {side: medians([r for r in rows if r["side"] == side]) for side in SIDES}
    ours, theirs = sides["ours"], sides["nanogpt"]
    summary = {**sides, "wall_ratio": ours["wall_s"] / theirs["wall_s"],
               "cpu_ratio": ours["cpu_s"] / theirs["cpu_s"],
               "peak_ratio": ours["peak_mib"] / theirs["peak_mib"]}
    warm = [r for r in rows if r["side"] == "ours" and r["pair"] > 1]
    if warm:
        summary["ours_warm"] = medians(warm)
        summary["wall_ratio_warm"] = summary["ours_warm"]["wall_s"] / theirs["wall_s"]
        summary["peak_ratio_warm"] = summary["ours_warm"]["peak_mib"] / theirs["peak_mib"]
    return summary


def format_table(rows: list[dict], summary: dict) -> str:
    header = ("run", "wall s", "cpu s", "peak MiB", "val loss")
    lines = [header]
    for r in rows:
        lines.append((f"pair {r['pair']} {r['side']}", f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}",
                      f"{r['peak_mib']:.0f}", _loss(r["val_loss"])))
    for side in SIDES:
        s = summary[side]
        lines.append((f"median {side}", f"{s['wall_s']:.1f}", f"{s['cpu_s']:.1f}",
                      f"{s['peak_mib']:.0f}", _loss(s["val_loss"])))
    lines.append(("ours / nanoGPT", f"{summary['wall_ratio']:.2f}", f"{summary['cpu_ratio']:.2f}",
                  f"{summary['peak_ratio']:.2f}", ""))
    if "ours_warm" in summary:
        warm = summary["ours_warm"]
        lines.append(("ours warm (pairs 2+)", f"{warm['wall_s']:.1f}", f"{warm['cpu_s']:.1f}",
                      f"{warm['peak_mib']:.0f}", _loss(warm["val_loss"])))
        lines.append(("warm / nanoGPT", f"{summary['wall_ratio_warm']:.2f}",
                      f"{warm['cpu_s'] / summary['nanogpt']['cpu_s']:.2f}",
                      f"{summary['peak_ratio_warm']:.2f}", ""))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths))) for line in lines)


def _loss(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nanogpt_dir", type=Path, help="a local checkout of karpathy/nanoGPT")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT,
                        help="tiny Shakespeare, locally (nanoGPT's prepare.py downloads it)")
    parser.add_argument("--pairs", type=int, default=2, help="alternating pairs of runs")
    parser.add_argument("--max-iters", type=int, default=2000, help="iterations of each run")
    parser.add_argument("--nanogpt-python", default=sys.executable,
                        help="the Python that runs nanoGPT (needs torch and numpy)")
    parser.add_argument("--out", default="", help="also write the JSON line to this file")
    parser.add_argument("--ours-config", action="append", default=[], metavar="FIELD=VALUE",
                        help="adds --config.FIELD=VALUE to our runs "
                             "(e.g. model.dense_matmul=bfloat16)")
    args = parser.parse_args(argv)
    error = _check(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="vs_nanogpt_"))
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    data = prepare_nanogpt_data(args.text, args.nanogpt_dir)
    from bench import machine, setups
    setups.text_dataset(str(args.text), 64, 0, data_dir=str(scratch / "tfds"))  # ours, untimed
    settings = tuple(args.ours_config)
    rows = race(args.nanogpt_dir.resolve(), args.text.resolve(), sys.executable,
                args.nanogpt_python, args.pairs, args.max_iters, scratch, log=log,
                ours_settings=settings)
    summary = summarize(rows)
    record = machine.record()
    print(f"\n== nanoGPT's README CPU run vs ours: {args.max_iters} iterations, {args.pairs} "
          f"alternating pair(s), on {record['cpu']} ({record['cpus']} logical CPUs) ==")
    print(format_table(rows, summary))
    print(f"val loss: nanoGPT's over 20 random held-out batches, ours over the whole held-out "
          f"split ({data['val_tokens']:,} characters); logs in {scratch}")
    machine.emit({"vs_nanogpt": {"max_iters": args.max_iters, "pairs": args.pairs,
                                 "ours_config": list(settings), "runs": rows,
                                 "summary": summary, "data": data}}, args.out)
    return 0


def _check(args) -> str:
    """The first bad argument, as a one-line error; '' where all are usable."""
    if not (args.nanogpt_dir / "train.py").is_file() or not (
            args.nanogpt_dir / "config" / "train_shakespeare_char.py").is_file():
        return (f"nanogpt_dir {str(args.nanogpt_dir)!r} is not a nanoGPT checkout (no train.py "
                "and config/train_shakespeare_char.py)")
    if not args.text.is_file():
        return f"--text {str(args.text)!r} does not exist"
    if args.pairs < 1 or args.max_iters < 1:
        return f"--pairs {args.pairs} and --max-iters {args.max_iters} must be at least 1"
    for setting in args.ours_config:
        if not _SETTING.fullmatch(setting):
            return (f"--ours-config {setting!r} is not FIELD=VALUE with FIELD a config field "
                    f"such as model.dense_matmul (it becomes --config.FIELD=VALUE)")
    if not os.access(TIME, os.X_OK):
        return f"{TIME} is missing (GNU time: apt-get install time)"
    command = ours_command(sys.executable, args.max_iters, args.text, Path("data"), Path("run"),
                           tuple(args.ours_config))
    return settings_error(command)


if __name__ == "__main__":
    sys.exit(main())
