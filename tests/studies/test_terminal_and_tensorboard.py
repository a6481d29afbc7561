"""What a person meets after a sweep: the terminal (one line per variant, the verdict, a summary,
no per-step lines or library noise, the full log in a file, a TensorBoard command that runs) and
TensorBoard itself, driven through its HTTP API on the sweep's runs (runs, tags, HParams trials
named by run, the attention-map images), and the printed links' run filters and colour groups
against the run names TensorBoard lists for each logdir a user may serve (the study's, its
parent, a grandparent; scripts/tensorboard.sh's links too).

One tiny sweep (tests/tiny_study.py, test_sweep's study: 2 variants × 2 seeds, 6 steps) runs once, as the
command line runs it with two worker processes; every test here reads its results.
"""
from __future__ import annotations

import json
import logging as std_logging
import os
import re
import socket
import subprocess
import sys
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fork_server import run_command

REPO = Path(__file__).resolve().parents[2]
NOISE = ("backend 'tpu'", "Unknown size", "Downloading and preparing", "Using custom data "
         "configuration", "Reusing dataset")
STEP_LINE = re.compile(r"step \d+/6 ")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(completed process of `python -m transformer_jax.sweep ...`, logdir, study root)."""
    tmp = tmp_path_factory.mktemp("terminal")
    experiment = tmp / "tiny.py"
    experiment.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "from pathlib import Path\n"
        "from tiny_study import tiny_study\n\n"
        "def get_study(size):\n"
        f"    return tiny_study(Path({str(tmp / 'data')!r}), seeds=(0, 1))\n")
    logdir = tmp / "runs"
    env = {"MPLCONFIGDIR": str(tmp / "mpl"), "MPLBACKEND": "Agg"}
    result = run_command(
        [sys.executable, "-m", "transformer_jax.sweep", f"--experiment={experiment}",
         f"--workdir={logdir / 'tiny'}", "--jobs=2"], timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result, logdir, logdir / "tiny"


def test_terminal_shows_progress_verdict_and_summary_only(sweep):
    result, _, root = sweep
    out = result.stdout
    for variant in ("scaled", "unscaled"):  # one line per variant: its metric, done of all, time
        assert re.search(rf"^\[[12]/2\] tiny/{variant} +eval/accuracy \d\.\d+ \(\d\.\d+, \d\.\d+\)"
                         rf" +\| \d+", out, re.M), out
    assert re.search(r"^\[1/2\] .*, ~\d+(s|m\d\ds) left$", out, re.M), out
    assert "tiny: Verdict: the claim holds on this run" in out
    assert re.search(r"^ +holds +scaled is not worse$", out, re.M), out
    assert out.index("tiny: Verdict") > out.index("[2/2]")  # as soon as the study ended
    assert re.search(r"^study +variants +diverged runs +findings holds +findings does not hold "
                     r"+findings inconclusive +checks +post hoc +verdict$", out, re.M), out
    assert re.search(r"^tiny +2 +0 +1 +0 +0 +- +- +holds$", out, re.M), out
    both = out + result.stderr
    assert not STEP_LINE.search(both), both  # the per-step lines are in the log file
    for noise in NOISE:
        assert noise not in both, noise
    assert len(both.splitlines()) < 25, both


def test_the_full_log_is_in_each_variants_file(sweep):
    _, _, root = sweep
    for variant in ("scaled", "unscaled"):
        log = (root / variant / "train.log").read_text()
        assert STEP_LINE.search(log) and "finished 6 steps" in log, log
        assert "step 6/6" in log and "eval at step 6" in log


def test_printed_tensorboard_command_runs_in_a_fresh_shell(sweep):
    from transformer_jax.studies.run import terminal

    result, logdir, _ = sweep
    command = re.search(r"^TensorBoard: +(\S+) --logdir (\S+)", result.stdout, re.M)
    assert command, result.stdout
    executable = REPO / command.group(1)
    assert executable.is_file() and os.access(executable, os.X_OK), executable
    assert Path(command.group(2)) == logdir / "tiny"
    url = re.search(r"^  tiny +(http://localhost:6006/\S+)$", result.stdout, re.M)
    assert url, result.stdout
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url.group(1)).query)
    assert query["runColorGroup"] == [terminal.RUN_COLOR_GROUP]  # a variant's runs: one colour
    assert "%" not in url.group(1).split("pinnedCards")[0]  # the regexes readable as printed
    assert query["smoothing"] == ["0"]  # a ten-point eval curve as it is
    # the study's comparison card (its judged metric, a line per variant), then its metrics
    assert json.loads(query["pinnedCards"][0]) == [
        {"plugin": "scalars", "tag": "Compare/tiny/eval/loss"},
        {"plugin": "scalars", "tag": "eval/accuracy"}, {"plugin": "scalars", "tag": "eval/loss"}]


def test_verbosity_brings_the_log_back_to_the_terminal(tmp_path, capfd):
    from absl import logging
    from transformer_jax.train import cli

    handler = logging.get_absl_handler()
    installed = handler in std_logging.root.handlers
    logging.use_absl_handler()
    try:
        cli.set_terminal_level(std_logging.WARNING)  # the default, --verbosity=-1
        with cli.log_to_file(tmp_path / "run" / "train.log"):
            logging.info("step 2/6  loss 1.0")
            print("a library's own print")
            logging.warning("diverged")
        err = capfd.readouterr().err
        assert "step 2/6" not in err and "diverged" in err and "own print" not in err
        log = (tmp_path / "run" / "train.log").read_text()
        assert "step 2/6  loss 1.0" in log and "a library's own print" in log and "diverged" in log
        cli.set_terminal_level(std_logging.INFO)  # --verbosity=0
        logging.info("step 4/6  loss 0.5")
        assert "step 4/6" in capfd.readouterr().err
    finally:
        cli.set_terminal_level(std_logging.INFO)
        if not installed:
            std_logging.root.removeHandler(handler)


def test_main_log_waits_for_the_run(tmp_path):
    """main's log file appears only once `ready` (the run has started): bad input leaves none,
    and the lines before are kept."""
    from absl import logging
    from transformer_jax.train import cli

    workdir = tmp_path / "run"
    ready = lambda: (workdir / "config.json").exists()
    with cli.log_to_file(workdir / "train.log", ready=ready):
        logging.info("before the run exists")
    assert not workdir.exists()
    with cli.log_to_file(workdir / "train.log", ready=ready):
        logging.info("checking the config")
        workdir.mkdir()
        (workdir / "config.json").write_text("{}")
        logging.info("training")
    log = (workdir / "train.log").read_text()
    assert "checking the config" in log and "training" in log and "before" not in log


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def tensorboard(sweep):
    """The venv's tensorboard serving the sweep's logdir: its base URL."""
    _, logdir, _ = sweep
    port = _free_port()
    executable = Path(sys.executable).parent / "tensorboard"
    process = subprocess.Popen(
        [str(executable), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
         "--reload_interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                if len(_get(f"{base}/data/runs")) == 6:  # every run loaded
                    break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            assert time.monotonic() < deadline, "tensorboard did not serve the runs in 120 s"
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


RUNS = [f"tiny/{v}/seed_{s}" for v in ("scaled", "unscaled") for s in (0, 1)]
COMPARE = ["tiny/compare/scaled", "tiny/compare/unscaled"]  # studies/render/board.py


def test_tensorboard_serves_runs_tags_and_images(tensorboard):
    assert sorted(_get(f"{tensorboard}/data/runs")) == sorted(RUNS + COMPARE)
    scalars = _get(f"{tensorboard}/data/plugin/scalars/tags")
    assert sorted(scalars) == sorted(RUNS + COMPARE)
    for run in RUNS:
        assert {"eval/loss", "eval/accuracy", "train/loss", "train/grad_norm",
                "attention/entropy/layer_00"} <= set(scalars[run]), scalars[run]
    images = _get(f"{tensorboard}/data/plugin/images/tags")
    for run in RUNS:  # an image card says whose it is (TensorBoard cuts the run's name)
        _, variant, seed = run.split("/")
        named = f"{variant}/{seed}"
        assert set(images[run]) == {f"attention_map/{named}/layer_00",
                                    f"attention_map/{named}/layer_01"}


def test_the_comparison_cards_are_each_variants_mean_over_seeds(tensorboard):
    """Custom Scalars lays out the study (a category, a chart per judged metric); the chart's
    tag holds, in each comparison run, its variant's mean over seeds at every evaluation."""
    layout = _get(f"{tensorboard}/data/plugin/custom_scalars/layout")
    (category,) = layout["category"]
    assert category["title"] == "tiny"
    (chart,) = category["chart"]  # tiny_study judges eval/loss only
    assert chart["multiline"]["tag"] == [r"^Compare/tiny/eval/loss$"]
    assert chart["title"].startswith("eval/loss: mean over seeds")
    series = lambda run, tag: {step: value for _, step, value in _get(
        f"{tensorboard}/data/plugin/scalars/scalars?" + urllib.parse.urlencode(
            {"run": run, "tag": tag}))}
    for variant in ("scaled", "unscaled"):
        seeds = [series(f"tiny/{variant}/seed_{s}", "eval/loss") for s in (0, 1)]
        mean = series(f"tiny/compare/{variant}", "Compare/tiny/eval/loss")
        assert sorted(mean) == sorted(seeds[0]) and len(mean) > 1
        for step, value in mean.items():
            assert value == pytest.approx((seeds[0][step] + seeds[1][step]) / 2, rel=1e-5)


def test_tensorboard_hparams_trials_are_named_by_run(tensorboard):
    experiment = _get(f"{tensorboard}/data/plugin/hparams/experiment", {"experimentName": ""})
    shown = [h["displayName"] for h in experiment["hparamInfos"]]
    # the first columns (TensorBoard shows five): variant, seed, then the swept field; each
    # identity hparam under a name that sorts first (summaries.column_name); the study, which
    # begins the trial's name, first among the columns not shown
    assert shown[:4] == ["variant", "seed", "model.attn_scale", "study"], shown[:6]
    assert [h["name"] for h in experiment["hparamInfos"]][:4] == [
        "0:variant", "1:seed", "model.attn_scale", "2:study"]
    groups = _get(f"{tensorboard}/data/plugin/hparams/session_groups", {
        "startIndex": 0, "sliceSize": 100,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                            "STATUS_RUNNING"]})
    by_name = {g["name"]: g for g in groups["sessionGroups"]}
    assert sorted(by_name) == RUNS
    for name, group in by_name.items():
        study, variant, seed = name.split("/")
        hparams = group["hparams"]
        assert hparams["2:study"] == study and hparams["0:variant"] == variant
        assert hparams["1:seed"] == seed.removeprefix("seed_")  # '1', not 1.0000
        assert [s["name"] for s in group["sessions"]] == [name]


# --- the links' run filters, against the run names TensorBoard lists ---------------------------

def _links_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tensorboard_links",
                                                  REPO / "scripts" / "tensorboard_links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_names(logdir: Path) -> list[str]:
    """TensorBoard's names for the runs below `logdir`: each directory holding an event file,
    as a path relative to logdir (checked against TensorBoard's own list below)."""
    return sorted({str(p.parent.relative_to(logdir)) for p in logdir.rglob("events.out.tfevents*")})


def _query(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)


def url_regexes(url: str) -> tuple[re.Pattern, re.Pattern]:
    """(run filter, colour group) of a study link, compiled as TensorBoard's JavaScript does
    (the filter case-insensitive; both use only syntax JavaScript and Python read alike)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    (run_filter,), (group,) = query["runFilter"], query["runColorGroup"]
    return re.compile(run_filter, re.I), re.compile(group.removeprefix("regex:"))


def assert_link_shows_the_study(url: str, names: list[str], others: list[str]) -> None:
    """`names`: the study's runs (its comparison runs too), shown; `others`: not shown."""
    run_filter, group = url_regexes(url)
    assert names and all(run_filter.search(n) for n in names), (run_filter.pattern, names)
    assert not any(run_filter.search(n) for n in others), (run_filter.pattern, others)
    # TensorBoard: a colour per list of the regex's groups; a variant's seeds and its mean
    # (compare/<variant>) share one
    colours = {n: group.search(n).groups() for n in names}
    variant = lambda n: n.rsplit("/", 1)[-1] if f"/{n}".rsplit("/", 2)[-2] == "compare" \
        else n.rsplit("/", 2)[-2]
    assert len({variant(n) for n in names}) > 1
    for a in names:
        for b in names:
            assert (colours[a] == colours[b]) == (variant(a) == variant(b)), (a, b, colours)


def test_the_sweeps_link_matches_its_runs_under_any_logdir(sweep, tensorboard):
    """The sweep served the study at runs/tiny; its printed link shows the study's runs whether
    TensorBoard serves runs/tiny, its parent runs/ (as here: `tiny/<variant>/seed_<n>`, listed by
    TensorBoard itself) or a grandparent, and no other study's runs beside them."""
    result, logdir, root = sweep
    listed = sorted(_get(f"{tensorboard}/data/runs"))
    assert run_names(logdir) == listed == sorted(RUNS + COMPARE)
    url = re.search(r"^  tiny +(http://localhost:6006/\S+)$", result.stdout, re.M).group(1)
    others = ["other/scaled/seed_0", "tinyx/scaled/seed_0", "scaled/tiny/seed_0/x",
              "other/compare/scaled"]
    for served in (root, logdir, logdir.parent):
        assert_link_shows_the_study(url, run_names(served), others)


def test_a_multi_study_link_matches_under_a_parent():
    from transformer_jax.studies.run import terminal

    url = terminal.study_url("norm_placement", ["eval/loss"], multi_study=True)
    runs = [f"norm_placement/{v}/seed_{s}" for v in ("pre", "post") for s in (0, 1)]
    runs += ["norm_placement/compare/pre"]
    others = [f"qk_norm/{v}/seed_{s}" for v in ("pre", "post") for s in (0, 1)]
    others += ["qk_norm/compare/pre"]
    for parent in ("", "studies/", "runs/studies/"):  # served: runs/studies, runs, .
        assert_link_shows_the_study(url, [parent + n for n in runs], [parent + n for n in others])
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert json.loads(query["pinnedCards"][0]) == [{"plugin": "scalars", "tag": "eval/loss"}]


def test_the_scripts_links_name_the_runs_of_the_logdir_it_serves(sweep):
    """scripts/tensorboard.sh prints scripts/tensorboard_links.py's lines for its LOGDIR: a link
    per study found below it, whose filter matches that study's run names there."""
    result, logdir, root = sweep
    links = _links_module()
    for served in (root, logdir, logdir.parent):
        lines = links.link_lines(served, port=6007)
        assert lines[0].startswith(f"TensorBoard on {served}: 4 runs of 1 study"), lines
        url = re.search(r"^  tiny +(http://localhost:6007/\S+)$", "\n".join(lines), re.M)
        assert url, lines
        assert_link_shows_the_study(url.group(1), run_names(served), ["other/scaled/seed_0"])
        # the same cards pinned as the sweep's own link pins
        sweeps = re.search(r"^  tiny +(http://localhost:6006/\S+)$", result.stdout, re.M)
        assert _query(url.group(1))["pinnedCards"] == _query(sweeps.group(1))["pinnedCards"]
    assert links.port_of(["--port=6010"]) == 6010 == links.port_of(["--bind_all", "--port", "6010"])
    assert links.port_of([]) == 6006


def test_many_runs_say_where_the_images_are(tmp_path):
    """Over 40 runs TensorBoard's Images tab selects none: the links say so, and give the
    whole logdir grouped by variant as well."""
    links = _links_module()
    for study, variants in (("a", 12), ("b", 10)):
        (tmp_path / study).mkdir()
        runs = [[f"v{i}", s] for i in range(variants) for s in range(2)]
        (tmp_path / study / "config.json").write_text(json.dumps({"study": study, "runs": runs}))
    lines = links.link_lines(tmp_path)
    assert lines[0].startswith(f"TensorBoard on {tmp_path}: 44 runs of 2 studies")
    assert any("(all)" in line and "runFilter" not in line and "runColorGroup" in line
               for line in lines)
    assert "44 runs: TensorBoard's Images and Custom Scalars tabs select none above 40" \
        in lines[-1]
    assert links.link_lines(tmp_path / "a")[-1].startswith("  a ")  # 24 runs: no note


def test_the_sweeps_lines_say_where_the_images_are_over_40_runs():
    from transformer_jax.studies.run import terminal

    def study(name, variants):
        return (types.SimpleNamespace(name=name, metrics=("eval/loss",), seeds=(0, 1, 2),
                                      variants={f"v{i}": {} for i in range(variants)}),
                Path("/nonexistent") / name)

    many = terminal.tensorboard_lines("runs/studies", [study("a", 7), study("b", 7)], True)
    assert many[-1] == ("  (42 runs: TensorBoard's Images and Custom Scalars tabs select none "
                        "above 40; each study's link shows its images and its comparison in "
                        "Time Series)")
    assert len(many) == 6 and many[2].startswith("  a      http") and "a/([^/]*/seed_" in many[2]
    assert many[4].startswith("  (all)  http")
    few = terminal.tensorboard_lines("runs/norm", [study("norm_placement", 5)], False)
    assert len(few) == 3 and "runFilter=^((.*/)?norm/)?([^/]*/seed_" in few[-1]


@pytest.mark.parametrize("study, short", [("scaling", "holds"), ("qk_norm", "partly holds"),
                                          ("lm_head_roles", "not judged")])
def test_the_summary_verdict_is_the_records_overall_words(study, short):
    """The summary table's verdict cell comes from the record's counts, not from its rendered
    sentence: a study without expectations says 'not judged' (the phrase scan printed the whole
    'Verdict: the claim is not judged on this run' there)."""
    from transformer_jax.studies.run import terminal

    verdict = terminal.read_verdict(REPO / "experiments" / "results" / f"{study}_verdict.json")
    assert verdict.short == short
    assert terminal.read_verdict(REPO / "no_such_verdict.json").short == "-"
