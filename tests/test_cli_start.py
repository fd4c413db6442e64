"""A CLI process imports only what its command needs: ``import jkofast`` and ``jkofast --help`` import no
NumPy and no Numba, a command loads its own module only, and the help lines of :data:`jkofast.cli.COMMANDS`
are the ones the command modules register."""

import json
import os
import pkgutil
import subprocess
import sys

import jkofast.commands
from jkofast import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(jkofast.__file__)))

PROBE = """
import json, sys
{code}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "numba", "jkofast"))))
"""


def _modules_after(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_jkofast_imports_no_numpy_no_numba():
    mods = _modules_after("import jkofast")
    assert not [m for m in mods if not m.startswith("jkofast")], mods
    assert mods == ["jkofast", "jkofast._lazy"]


def test_help_imports_no_numpy_no_numba_no_command():
    code = "from jkofast.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    mods = _modules_after(code)
    assert not [m for m in mods if not m.startswith("jkofast")], mods
    assert not [m for m in mods if m.startswith(("jkofast.commands.", "jkofast.studies"))], mods


def test_command_loads_its_module_only():
    code = (
        "from jkofast.cli import build_parser\n"
        "a = build_parser('evaluate').parse_args(['evaluate', '--run', 'r', '--qrels', 'q'])\n"
        "assert a.func.__module__ == 'jkofast.commands.evaluate'"
    )
    mods = _modules_after(code)
    assert [m for m in mods if m.startswith("jkofast.commands.")] == ["jkofast.commands.evaluate"]
    assert not [m for m in mods if m.split(".")[0] in ("numpy", "numba")], mods


def _sub(parser):
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")


def test_command_table_matches_the_modules():
    full = _sub(cli.build_parser())
    assert [(a.dest, a.help) for a in full._choices_actions] == [(n, h) for n, (_, h) in cli.COMMANDS.items()]
    mods = {m.name for m in pkgutil.iter_modules(jkofast.commands.__path__) if not m.name.startswith("_")}
    assert {m for m, _ in cli.COMMANDS.values()} == mods
    for name, (module, _) in cli.COMMANDS.items():
        assert full.choices[name].get_default("func").__module__ == f"jkofast.commands.{module}"


def test_lazy_parser_equals_full_parser():
    full = cli.build_parser()
    assert cli.build_parser("").format_help() == full.format_help()
    for name in cli.COMMANDS:
        lazy = cli.build_parser(name)
        assert lazy.format_help() == full.format_help()
        assert _sub(lazy).choices[name].format_help() == _sub(full).choices[name].format_help()


def test_command_word():
    assert cli._command([]) == ""
    assert cli._command(["--version"]) == ""
    assert cli._command(["evaluate", "--run", "x"]) == "evaluate"
    assert cli._command(["-h", "demo"]) == "demo"
