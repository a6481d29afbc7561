"""The config's fields on the command line: `--help` and `--helpfull` list them with this config
file's defaults and one-line descriptions read from the typed dataclasses, and exit 0;
`--show_config` prints the resolved config and exits 0 without a workdir."""
from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest

from helpers_train import MainServer
from transformer_jax.config import ModelConfig
from transformer_jax.data import DataConfig
from transformer_jax.studies.design.loading import load_config
from transformer_jax.train import config_help
from transformer_jax.train.workdir import flatten

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs").glob("*.py"))


@pytest.fixture(scope="module")
def main(tmp_path_factory):
    """main's command line, each command in a fork of one process that did main's imports once
    (helpers_train.MainServer; a fresh interpreter per command spent ~2 CPU-s on them)."""
    server = MainServer(tmp_path_factory.mktemp("main_server"))
    yield lambda *args: server.run(args)
    server.close()


def test_a_description_continues_on_the_comment_lines_below_its_field():
    assert config_help.field_comments(ModelConfig)["d_model"] == "width of the residual stream"
    assert config_help.field_comments(ModelConfig)["causal_mask"].endswith(
        "(it sees the future); evaluation masks whatever this says, as generation must")
    assert "repeat (decoder only" in config_help.field_comments(DataConfig)["task"]


@dataclasses.dataclass
class Grouped:
    """Two groups of fields, the second under a heading right below the first's last field."""
    width: int = 8  # the first field's description (which goes on
    # below its line, in lower case)
    # A heading: what the next fields are for. Not part of `width`'s description.
    depth: int = 2  # the second field


def test_a_description_stops_at_the_next_groups_heading():
    notes = config_help.field_comments(Grouped)
    assert notes == {"width": "the first field's description (which goes on below its line, in "
                              "lower case)", "depth": "the second field"}
    assert config_help.field_comments(ModelConfig)["dense_matmul"].endswith(
        "summed in float32; everything else in dtype)")


@pytest.mark.parametrize("cls", config_help.SECTIONS.values(), ids=lambda c: c.__name__)
def test_no_description_runs_into_a_heading_comment(cls):
    """A comment-only line that starts a sentence heads the fields below it: whichever field
    precedes it, its text is in no field's description."""
    headings = [line.strip().lstrip("#").strip() for line in inspect.getsource(cls).splitlines()
                if line.strip().startswith("#") and line.strip().lstrip("#").strip()[:1].isupper()]
    for field, note in config_help.field_comments(cls).items():
        assert not any(h in note for h in headings), (field, note)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_field_of_every_config_has_a_description(path):
    notes = config_help.descriptions()
    fields = flatten(load_config(path, "").to_dict())
    assert len(fields) > 40
    assert not [k for k in fields if not notes.get(k)], "fields without a comment"


@pytest.mark.parametrize("flag", ["--help", "--helpfull"])
def test_help_lists_the_configs_fields_with_defaults_and_exits_0(main, flag):
    done = main("--config=configs/synthetic.py:task=sort", flag)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("  --config.model.d_model: width of the residual stream")
    assert lines[at + 1] == "    (default: 128)"
    task = lines.index(next(l for l in lines if l.startswith("  --config.data.task: ")))
    assert "repeat" in " ".join(lines[task:task + 3]) and "    (default: 'sort')" in lines[task:task + 4]
    listed = {l.split(":")[0].strip()[len("--config."):] for l in lines if l.startswith("  --config.")}
    assert listed == set(flatten(load_config(REPO / "configs/synthetic.py", "").to_dict()))
    assert "  --workdir: Directory of this run (logs, checkpoints)." in lines
    absl_flag = any(l.startswith("  -v,--verbosity:") for l in lines)
    assert absl_flag == (flag == "--helpfull")  # --helpfull: absl's flags too


def test_help_without_a_config_names_the_config_files(main):
    done = main("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "Give --config=FILE with --help to list that config's fields; config files: "
        "configs/lm.py, configs/synthetic.py")
    missing = main("--config=configs/nope.py", "--help")  # a missing file is an error, help or not
    assert missing.returncode == 2 and missing.stderr.startswith(
        "error: --config='configs/nope.py' is not a file"), missing.stderr
    broken = main("--config=configs/synthetic.py:size=huge", "--help")
    assert broken.returncode == 0 and broken.stdout.splitlines()[-1] == (
        "(--config=configs/synthetic.py:size=huge did not load: without --help the command says why)")


def test_show_config_prints_the_resolved_config_and_exits(main):
    done = main("--config=configs/synthetic.py:tiny,task=sort", "--config.model.position=rotary",
                "--show_config")
    assert done.returncode == 0, done.stderr
    expected = load_config(REPO / "configs/synthetic.py", "tiny,task=sort").to_dict()
    expected["model"]["position"] = "rotary"
    assert json.loads(done.stdout) == expected
    bad = main("--config=configs/synthetic.py", "--config.model.position=rotory", "--show_config")
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "error: model.position='rotory' is not one of: sinusoidal, learned, rotary, alibi, none"]
    training = main("--config=configs/synthetic.py")  # without --show_config, a run needs a home
    assert training.returncode == 2 and training.stderr.splitlines() == [
        "error: --workdir is required: the directory of this run (logs, checkpoints)"]
