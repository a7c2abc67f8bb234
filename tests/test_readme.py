"""The README stays true: its REPL tour runs, its pictures come from docs/make_figures.py, and
.ci/run runs exactly the test command it gives."""

from __future__ import annotations

import doctest
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def load_figure_script():
    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_repl_examples_produce_their_shown_output():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(README, {}, "README.md", str(ROOT / "README.md"), 0)
    assert len(test.examples) >= 8, "the tour lost its examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, "a README example no longer prints what the README shows"


def test_readme_pictures_are_made_by_the_script(tmp_path):
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.png)\)", README))
    assert linked, "the README should show at least one picture"
    script = load_figure_script()
    assert linked <= set(script.FIGURES), "a linked picture has no generator in make_figures.py"
    for name in linked:
        assert (ROOT / "docs" / name).is_file(), f"docs/{name} is missing: run the script"
    written = script.main(tmp_path)
    assert {p.name for p in written} == set(script.FIGURES)
    assert all(p.stat().st_size > 5_000 for p in written)


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```bash\n(.+?)\n```", README)
    test_commands = [c for c in commands if "pytest" in c]
    assert len(test_commands) == 1
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_commands[0] in ci.splitlines()
