"""docs/pretrained.md's numbers are what scripts/pretrained_page.py writes from the committed
results files (the parity measurement and the study pretrained_claims), not typed."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pretrained_page", REPO / "scripts" / "pretrained_page.py")
page = importlib.util.module_from_spec(spec)
spec.loader.exec_module(page)


def test_the_page_is_what_the_results_files_give():
    assert page.main(["--check"]) == 0


def test_a_retyped_number_is_found(tmp_path, capsys):
    text = page.PAGE.read_text()
    generated = text[text.index(page.START):text.index(page.END)]
    digit = next(i for i, c in enumerate(generated) if c.isdigit())
    changed = generated[:digit] + str((int(generated[digit]) + 1) % 10) + generated[digit + 1:]
    planted = tmp_path / "pretrained.md"
    planted.write_text(text.replace(generated, changed))
    assert page.main(["--check", f"--page={planted}"]) == 1
    assert "out of date" in capsys.readouterr().err
