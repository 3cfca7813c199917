"""`pytest --shard K/N`: run only part K of N of the selected tests (the nightly's pytest step, docs/sharding.md).

The selected tests (after `-m`, `-k` and `--deselect`) are cut in collection
order by `harness.runs.shard`, the partition `run --shard` uses: contiguous
slices of about equal count, every test in exactly one of the N parts, the same
cut on every machine and in every pytest-xdist worker. The tests of the other
parts are reported as deselected, and the run ends with a line saying how many
of the selected tests this part ran, so a shard's pass never reads as the
whole suite's. Registered by conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import pytest

from harness.errors import SetupError
from harness.runs import shard as sharding

SUMMARY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shard", metavar="K/N", default=None,
                     help="run only part K of N of the selected tests, a contiguous cut in collection order "
                          "(docs/sharding.md)")


@pytest.hookimpl(trylast=True)  # after -m, -k and --deselect: what they selected is what is cut
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    text = config.getoption("--shard")
    if text is None:
        return
    try:
        shard = sharding.Shard.parse(text)
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    kept, dropped = split(items, shard)
    config.stash[SUMMARY] = (f"shard {shard}: {len(kept)} of the {len(items)} selected tests are this shard's; "
                             "the other shards run the rest")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def split(items: list[pytest.Item], shard: sharding.Shard) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(the tests of `shard`, the others), each list in collection order."""
    part = sharding.partition("pytest", [sharding.Unit(item.nodeid, "test") for item in items], shard)
    owned = [part.owns(item.nodeid, "test") for item in items]
    return ([i for i, mine in zip(items, owned, strict=True) if mine],
            [i for i, mine in zip(items, owned, strict=True) if not mine])


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    line = config.stash.get(SUMMARY, None)
    if line:
        terminalreporter.write_line(line)
