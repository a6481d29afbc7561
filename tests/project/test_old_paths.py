"""The module paths that moved still work for one release, and warn once per process, naming the
new path, at the user's line (transformer_jax._moved); the release after, they are gone and the
changelog says where each went; the package root's names do not warn."""
import importlib.util
import json
import subprocess
import sys
import warnings
from pathlib import Path

import transformer_jax
from transformer_jax._moved import REMOVED, removed_paths_readable

REPO = Path(__file__).resolve().parents[2]
CHANGELOG = REPO / "docs" / "changelog.md"
# Deprecated, still working: old path -> (new path, a name to import through it).
MOVED = {"transformer_jax.train.hugepages": ("transformer_jax.runtime.hugepages",
                                             "reexec_if_useful"),
         "transformer_jax.train.compile_memory": ("transformer_jax.runtime.compile_memory",
                                                  "give_back"),
         # studies/ in rooms (issue 67, item 1): a module and one name each
         **{f"transformer_jax.studies.{module}": (f"transformer_jax.studies.{room}.{module}", name)
            for room, module, name in (
                ("render", "markdown", "markdown_table"), ("render", "bounds", "metric_bounds"),
                ("render", "plots", "plot_curves"), ("render", "forest", "verdict_class"),
                ("render", "verdict_text", "verdict_markdown"), ("render", "pages", "main"),
                ("render", "board", "COMPARE_DIR"), ("run", "sweep", "main"),
                ("run", "jobs", "Task"), ("run", "schedule", "Sweep"),
                ("run", "plan", "Plan"), ("run", "terminal", "headline_metric"),
                ("run", "evaluate", "main"), ("records", "record", "FILE"),
                ("records", "provenance", "this_machine"), ("records", "history", "Change"),
                ("records", "preregistration", "record"), ("records", "export", "ExportError"),
                ("records", "suite_time", "file_name"), ("records", "cap_reason", "cap_lines"),
                ("design", "loading", "load_study"), ("design", "catalog", "DECLARED"),
                ("design", "measured_code", "refs"), ("design", "judged_code", "describe"),
                ("design", "syntax", "sha"), ("judge", "stats", "decide"),
                ("judge", "multiplicity", "holm_survives"))}}

# Each old path used three ways in one fresh process (the warning is once per process): `from
# ... import`, an attribute of `import ... as`, and again; what warned, where, and whether the
# names are the new module's very objects.
SCRIPT = '''
import importlib, json, sys, warnings
moved = json.loads(sys.argv[1])
out = {}
for old, (new, name) in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(f"from {old} import {name} as first", globals())
        exec(f"import {old} as module; second = module.{name}", globals())
        third = getattr(importlib.import_module(old), name)
    same = first is second is third is getattr(importlib.import_module(new), name)
    out[old] = {"same": same, "names": name in dir(module),
                "warnings": [(w.category.__name__, str(w.message), w.filename) for w in caught]}
print(json.dumps(out))
'''


def test_each_old_path_works_and_warns_once_naming_the_new_one(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), json.dumps(MOVED)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    for old, (new, _) in MOVED.items():
        assert seen[old]["same"] and seen[old]["names"], old
        [(category, message, filename)] = seen[old]["warnings"]  # exactly one
        assert category == "DeprecationWarning" and f"import {new} instead" in message, message
        assert message.startswith(f"{old} is deprecated"), message
        assert filename == "<string>", filename  # the user's line (exec's), not the shim's


def test_the_removed_paths_are_gone_and_the_changelog_says_where_each_went():
    rows = [line for line in CHANGELOG.read_text().splitlines() if line.startswith("| `")]
    for old, new in REMOVED.items():
        assert importlib.util.find_spec(old) is None, f"{old} is still importable"
        assert importlib.util.find_spec(new) is not None, new
        assert f"| `{old}` | `{new}` |" in rows, f"docs/changelog.md does not say {old} -> {new}"
    for old, (new, _) in MOVED.items():  # the ones still warning are listed as such
        assert importlib.util.find_spec(old) is not None, old
        assert f"| `{old}` | `{new}` |" in rows, f"docs/changelog.md does not list {old}"


def test_an_old_commits_file_reads_a_removed_path_only_while_history_asks():
    """studies/records/history.py loads old experiment files, which import removed paths: inside
    removed_paths_readable they import silently, as the new module's very objects; after it,
    they are gone again (not in sys.modules, not an attribute of the package)."""
    assert len(REMOVED) == 7
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with removed_paths_readable():
            from transformer_jax.study import Study  # noqa: F401 (an old experiment file's line)
            import transformer_jax.blocks as old_blocks
            star = {}
            exec("from transformer_jax.defaults import *", star)  # an old file's star import
    from transformer_jax.model import blocks
    from transformer_jax.studies import study
    from transformer_jax.train import defaults
    assert Study is study.Study and old_blocks.Block is blocks.Block
    assert star["base_config"] is defaults.base_config
    for old in REMOVED:
        assert old not in sys.modules and importlib.util.find_spec(old) is None, old
    assert not hasattr(transformer_jax, "study") and not hasattr(transformer_jax, "blocks")


def test_the_package_roots_names_do_not_warn():
    code = ("import warnings\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import transformer_jax as tj\n"
            "    tj.scaled_dot_product_attention, tj.ModelConfig, tj.Transformer, tj.Block\n"
            "    from transformer_jax import ModelConfig, Transformer, make_norm\n"
            "print([str(w.message) for w in caught if 'transformer_jax' in str(w.message)])\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "[]"


def test_an_old_command_path_still_runs_and_names_the_new_command():
    """`python -m transformer_jax.studies.pages` (documented before the rooms) warns once with
    the new command, then is that command: the same arguments reach it, its exit status too."""
    proc = subprocess.run([sys.executable, "-W", "default", "-m", "transformer_jax.studies.pages",
                           "--no-such-flag"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]  # argparse's, for the bad flag
    warned = [line for line in proc.stderr.splitlines() if "DeprecationWarning" in line]
    assert len(warned) == 1 and "run python -m transformer_jax.studies.render.pages instead" \
        in warned[0], proc.stderr[-3000:]
    assert "python -m transformer_jax.studies.render.pages: error: unrecognized arguments: " \
        "--no-such-flag" in proc.stderr, proc.stderr[-3000:]
