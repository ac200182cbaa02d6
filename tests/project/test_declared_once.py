"""Each limit of the product is declared once: a MAX_ constant is assigned in one module, by
value, and whoever else needs it imports it from there (the operations' limits from
mq.operations), so no second copy can drift from it."""

import ast
from collections import defaultdict

from repo_support import REPO

#: The folders pyproject.toml installs as the package mq.
PRODUCT = ("core", "http", "actors", "supervisor", "pipeline")


def limits_assigned() -> dict[str, list[tuple[str, ast.expr]]]:
    """MAX_ name -> (module path, value) of each module-level assignment of it."""
    found: dict[str, list[tuple[str, ast.expr]]] = defaultdict(list)
    for folder in PRODUCT:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.startswith("MAX_"):
                        found[target.id].append((str(path.relative_to(REPO)), node.value))
    return found


def test_every_limit_is_assigned_in_one_module_only():
    twice = {name: [path for path, _ in places] for name, places in limits_assigned().items()
             if len(places) > 1}
    assert not twice, twice


def test_no_limit_is_a_second_name_of_another():
    # An alias (MAX_BATCH = MAX_BATCH_MESSAGES) is a second declaration to keep in step:
    # import the one name instead.
    aliases = {name: path for name, places in limits_assigned().items()
               for path, value in places if isinstance(value, (ast.Name, ast.Attribute))}
    assert not aliases, aliases


def test_the_clients_take_the_operations_limits_from_mq_operations():
    from mq.client import batch_calls, calls, consuming, logging_handler
    from mq import operations

    assert consuming.MAX_WAIT_SECONDS is operations.MAX_WAIT_SECONDS
    assert calls.MAX_WAIT_SECONDS is operations.MAX_WAIT_SECONDS
    assert batch_calls.MAX_FETCH is operations.MAX_FETCH
    assert logging_handler.MAX_BATCH_MESSAGES is operations.MAX_BATCH_MESSAGES
