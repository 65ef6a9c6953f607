"""The user documentation: the parameter reference matches the nodes' tables, and neither the docs nor the code carry
the project's working history (that lives in CHANGELOG.md; measured figures live in docs/benchmarks.md)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Words of a lab notebook, not of a user's guide: working sessions, tracker numbers, who lent which machine, and
# "the seed" (an internal design document users never see: say "the PARA v4 design" or cite the paper).
HISTORY = re.compile(
    r"\bsessions?\s+\d+|\b(this|that|earlier|later|previous|next|last|every)\s+sessions?\b"
    r"|\bissues?\s*#?\d+|\blent\b|\bthe seed\b",
    re.IGNORECASE,
)
# Python and pytest API names that contain the word "session" and are not history.
API_NAMES = re.compile(r"start_new_session|pytest_sessionfinish\(session", re.IGNORECASE)
CHECKED_DIRS = ("para_core", "para_ros", "bench", "scripts", "launch", "config", "test", "docs", "interfaces", ".ci")
CHECKED_FILES = (
    "README.md",
    "setup.py",
    "setup.cfg",
    "pytest.ini",
    "package.xml",
    "ruff.toml",
    "requirements.txt",
    "requirements-robot.txt",
)
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".xml", ".cfg", ".ini", ".toml", ".txt", ".rviz", ".msg", ""}
NOT_CHECKED = {Path(__file__).resolve(), (REPO / "CHANGELOG.md").resolve()}


def checked_files() -> list[Path]:
    files = [REPO / name for name in CHECKED_FILES if (REPO / name).exists()]
    for top in CHECKED_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return [f for f in files if f.resolve() not in NOT_CHECKED]


def history_lines(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: text`` of every line of ``path`` that uses one of the history words."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []  # not a text file
    return [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if HISTORY.search(API_NAMES.sub("", line))
    ]


def test_the_history_check_finds_each_word_and_spares_the_api_names(tmp_path):
    # Each pattern must fire on the phrasing it is for (else the check below passes vacuously), and not on API names.
    for bad in (
        "measured in session 8",
        "Sessions 4-6",
        "figures of this session",
        "as in the previous session",
        "see issue 12",
        "(issue #24)",
        "no GPU was lent",
        "the seed's paper table",
        "The Seed says",
    ):
        assert HISTORY.search(API_NAMES.sub("", bad)), bad
    for fine in (
        "subprocess.Popen(cmd, start_new_session=True)",
        "def pytest_sessionfinish(session, exitstatus):",
        "a random seed",
        "seed_q_rad",
        "--seed 100000",
        "the seeded solver",
        "silent",
        "issues a command",
        "session.open_bag(out)",
        "a capture session records the samples",
    ):
        assert not HISTORY.search(API_NAMES.sub("", fine)), fine
    (tmp_path / "x.md").write_text("fine\nas in session 3\n")
    assert history_lines(tmp_path / "x.md", tmp_path) == ["x.md:2: as in session 3"]


def test_no_project_history_in_user_docs_or_code():
    files = checked_files()
    assert any(f.name == "README.md" for f in files) and any(f.suffix == ".py" for f in files)
    found = [hit for path in files for hit in history_lines(path)]
    assert not found, (
        "project history in user docs or code (move it to CHANGELOG.md, measured figures to "
        "docs/benchmarks.md; name the design 'the PARA v4 design' or cite the paper):\n" + "\n".join(found)
    )


def _parameters_doc():
    spec = importlib.util.spec_from_file_location("parameters_doc", REPO / "scripts" / "parameters_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_parameter_reference_is_generated_from_the_tables():
    doc = _parameters_doc()
    assert doc.main([]) == 0, "docs/parameters.md differs from the tables: run scripts/parameters_doc.py --write"


def test_the_parameter_reference_lists_every_parameter_with_its_default_and_rule():
    # Read back independently of the generator: under each node's heading, one row per parameter of that node's
    # table, naming its default and whether it is read-only; a page from a stale or partial table cannot pass.
    from para_ros.nodes.parameter_registry import tables

    sections = re.split(r"^## ", (REPO / "docs" / "parameters.md").read_text(), flags=re.MULTILINE)[1:]
    rows = {}
    for section in sections:
        node = section.splitlines()[0].strip()
        rows[node] = {line.split("|")[1].strip(" `"): line for line in section.splitlines() if line.startswith("| `")}
    assert set(rows) == set(tables())
    for node, (table, _file) in tables().items():
        assert list(rows[node]) == [p.name for p in table.params], node
        for p in table.params:
            row = rows[node][p.name]
            assert ("read-only" in row) == (not p.dynamic), row
            assert row.split("|")[2].strip() == ("(unset)" if p.optional else f"`{json.dumps(p.default)}`"), row


def _console_scripts() -> dict[str, str]:
    """Console script name -> module, from setup.py's entry points (so the check follows the code if it moves)."""
    text = (REPO / "setup.py").read_text()
    return dict(re.findall(r'"([\w-]+) = ([\w.]+):main"', text))


def readme_commands() -> list[tuple[int, str, list[str]]]:
    """(line, command, arguments) of every project command in the README's shell blocks; ``scripts/demo`` passes its
    arguments to ``para-deploy``, and ``torchrun ... -m MODULE`` runs that module's command."""
    import shlex

    scripts = _console_scripts()
    found, in_shell, pending = [], False, ""
    for n, line in enumerate((REPO / "README.md").read_text().splitlines(), 1):
        if line.startswith("```"):
            in_shell, pending = line.strip() == "```bash", ""
            continue
        if not in_shell:
            continue
        if line.endswith("\\"):  # a command continued on the next line (reported at its last line)
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "scripts/demo":
            found.append((n, "para-deploy", words[1:]))
        elif words[0] in scripts:
            found.append((n, words[0], words[1:]))
        elif words[0] == "torchrun" and "-m" in words:
            module = words[words.index("-m") + 1]
            name = next(k for k, v in scripts.items() if v == module)
            found.append((n, name, words[words.index("-m") + 2 :]))
    return found


def test_every_command_in_the_readme_parses_with_its_real_parser():
    # Each command line of the README goes through the command's own argparse parser (nothing is run): a renamed or
    # removed option or subcommand, or a missing required argument, fails here naming the README line.
    scripts = _console_scripts()
    commands = readme_commands()
    assert {"para-deploy", "para-sim", "para-bag", "para-train"} <= {name for _n, name, _a in commands}
    for n, name, args in commands:
        parser = importlib.import_module(scripts[name]).build_parser()
        try:
            parser.parse_args(args)
        except SystemExit:
            raise AssertionError(
                f"README.md:{n}: '{name} {' '.join(args)}' does not parse with {name}'s parser"
            ) from None
