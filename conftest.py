# nnsight must be imported before any transformers.models module in every test process.
import nnterp  # noqa: F401

pytest_plugins = ["pytester"]


def pytest_configure(config):
    """The workspace's whole run takes the kit's process settings: one torch thread per xdist worker, no progress bars.

    The plugin gives them only to runs of the kit's own tests (nnterp_conformance.plugin's docstring); here every test
    loads tiny checkpoints, so every test wants them.
    """
    from nnterp_conformance.plugin import settle

    settle(config)


def pytest_terminal_summary(terminalreporter):
    """The mutation score of the run: how many of the mutants it ran their named checks killed."""
    ran = [
        report
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if report.when == "call" and "test_every_mutant_is_killed_by_its_check[" in report.nodeid
    ]
    if ran:
        killed = sum(report.passed for report in ran)
        terminalreporter.write_line(f"mutation score: {killed}/{len(ran)} ({100 * killed // len(ran)}%)")
