"""`extras.require`: a missing extra is the user's to install, any other missing module is a bug."""

from __future__ import annotations

import sys

import pytest

from perrec_eval.errors import MissingExtraError
from perrec_eval.extras import require


def test_require_names_the_extra_of_a_package_asked_for_by_name(monkeypatch):
    # a new backend's package needs no entry in extras.py: asking for it by name says which extra brings it
    monkeypatch.setitem(sys.modules, "some_new_backend", None)
    with pytest.raises(MissingExtraError, match=r'pip install "perrecbench\[newextra\]"') as err:
        require("some_new_backend.client", "newextra", by="the 'new' engine")
    assert err.value.name == "some_new_backend"


def test_require_keeps_the_traceback_of_a_module_no_extra_brings(monkeypatch, tmp_path):
    (tmp_path / "broken_plugin.py").write_text("import not_a_dependency_of_anything\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as err:
        require("broken_plugin", "hf", by="the 'hf' engine")
    assert not isinstance(err.value, MissingExtraError)
