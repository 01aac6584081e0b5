"""The private pytest and xdist names the plugin uses are still there, in the shape it uses.

When a release renames one, the run still works on a plainer path (yellow summary colours, the
per-item protocol for cached items, requests sent ahead only for the items pytest has handed
out), but these tests fail and name what changed, so that it is seen."""

from __future__ import annotations

import pytest

from ragmatrix.plugin import pytest_internals

PROBE = """
from ragmatrix.plugin import pytest_internals


def test_probe(request):
    gone = pytest_internals.missing_in_run(request.node)
    assert not gone, "private API changed: " + "; ".join(gone)
"""


def test_the_installed_pytest_and_xdist_have_the_private_names_the_plugin_uses():
    gone = pytest_internals.missing()
    assert not gone, "private API changed: " + "; ".join(gone)


def test_a_running_item_shows_the_set_up_stack_and_its_fixture_names(pytester: pytest.Pytester):
    pytester.makepyfile(test_probe=PROBE)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_an_xdist_worker_shows_its_queue_of_items(pytester: pytest.Pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=1)


def test_what_the_plugin_reads_through_them(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_read="""
        import pytest

        from ragmatrix.plugin import pytest_internals


        def test_read(request, tmp_path):
            assert pytest_internals.fixture_names(request.node) == ("request", "tmp_path")
            stack = pytest_internals.setup_stack(request.node.session)
            assert stack is not None and stack[-1] is request.node
            # a report given the item's structured id keeps it, where pytest has one, unparsed
            given = pytest_internals.report_node_id(request.node)
            report = pytest.TestReport(given, request.node.location, {}, "passed", None, "call")
            assert report.nodeid == request.node.nodeid
            if int(pytest.__version__.split(".")[0]) >= 9:
                assert given is request.node.id and report._id is given
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_an_items_skip_mark_and_hook_proxy_are_the_ones_pytest_would_use(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_marks="""
        import pytest

        pytestmark = pytest.mark.skip(reason="module")


        @pytest.mark.skip(reason="own")
        @pytest.mark.parametrize("x", [1, pytest.param(2, marks=pytest.mark.skip(reason="param"))])
        def test_own(x):
            pass


        def test_inherited():
            pass
        """
    )
    pytester.makeconftest(
        """
        from ragmatrix.plugin import pytest_internals


        def pytest_collection_finish(session):
            for item in session.items:
                mark = pytest_internals.skip_mark(item)
                closest = item.get_closest_marker("skip")
                assert mark is not None and mark.kwargs == closest.kwargs, item.nodeid
                assert pytest_internals.hook_proxy(item) is pytest_internals.hook_proxy(item)
                assert type(pytest_internals.hook_proxy(item)) is type(item.ihook)
            reasons = [pytest_internals.skip_mark(item).kwargs["reason"] for item in session.items]
            assert reasons == ["own", "own", "module"], reasons
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(skipped=3)
