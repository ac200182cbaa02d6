"""The import contracts of pyproject.toml ([tool.importlinter]) hold for the installed package:
its layers, the clients kept apart from the daemon, and no cycles among the actors' modules."""

import tomllib

from repo_support import REPO, lint_imports


def test_every_import_contract_is_kept():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_layers_turned_upside_down_are_reported_broken(tmp_path):
    # The check must see what it guards: mq.http (a namespace portion) and mq.actors included.
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in settings["contracts"] if c["id"] == "layers"]
    config = tmp_path / "upside_down.ini"
    config.write_text("[importlinter]\nroot_packages =\n" + "".join(
        f"    {package}\n" for package in settings["root_packages"]) +
        "\n[importlinter:contract:upside-down]\nname = upside down\ntype = layers\nlayers =\n" +
        "".join(f"    {layer}\n" for layer in reversed(contract["layers"])))
    result = lint_imports(str(config))
    assert result.returncode == 1 and "Broken contracts" in result.stdout, result.stdout + result.stderr
    broken = result.stdout[result.stdout.index("Broken contracts"):]
    assert "mq.http." in broken and "mq.actors." in broken and "mq.store." in broken
