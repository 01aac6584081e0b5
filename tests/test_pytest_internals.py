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


def test_an_items_skip_mark_hook_proxy_and_keywords_are_the_ones_pytest_would_use(pytester: pytest.Pytester):
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
    # A conftest of a subfolder hears the reports of its own items only.
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "conftest.py").write_text("def pytest_runtest_logstart(nodeid, location):\n    pass\n")
    (pytester.path / "sub" / "test_sub.py").write_text("def test_sub():\n    pass\n")
    pytester.makeconftest(
        """
        from ragmatrix.plugin import pytest_internals


        def heard_by(hooks):
            return len(hooks.pytest_runtest_logstart.get_hookimpls())


        def pytest_collection_finish(session):
            marked = [item for item in session.items if "sub" not in item.nodeid]
            for item in marked:
                mark = pytest_internals.skip_mark(item)
                closest = item.get_closest_marker("skip")
                assert mark is not None and mark.kwargs == closest.kwargs, item.nodeid
            reasons = [pytest_internals.skip_mark(item).kwargs["reason"] for item in marked]
            assert reasons == ["own", "own", "module"], reasons
            for item in session.items:  # each folder's items, through the proxy of their own file
                assert heard_by(pytest_internals.hook_proxy(item)) == heard_by(item.ihook), item.nodeid
            counts = {heard_by(pytest_internals.hook_proxy(item)) for item in session.items}
            assert len(counts) == 2, counts
            for item in session.items:  # a report's keywords, in the order pytest gives them
                expected = list(dict.fromkeys(item.keywords, 1))
                assert list(pytest_internals.keywords_of(item)) == expected, item.nodeid
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(skipped=3, passed=1)
