"""An installed package is named by its first file, found without importing the package."""

from __future__ import annotations

import sys

from ragmatrix.foundations.installs import install_stamp


def test_a_package_is_named_by_its_first_file_without_being_imported(tmp_path, monkeypatch):
    package = tmp_path / "stamped_package"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    install_stamp.cache_clear()
    first = install_stamp("stamped_package")
    assert first is not None and first.startswith(str(package / "__init__.py"))
    assert "stamped_package" not in sys.modules

    (package / "__init__.py").write_text("raise RuntimeError('imported again, by a reinstall')\n")
    install_stamp.cache_clear()
    assert install_stamp("stamped_package") not in (None, first)


def test_a_missing_package_has_no_stamp():
    assert install_stamp("no_such_package_here") is None
    assert install_stamp("no_such_package_here.sub") is None
