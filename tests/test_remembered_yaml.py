"""A data file read once is remembered in the cache folder and loaded from there while its bytes
are the same: the same document, the same checks, and a file edited since is read again."""

from __future__ import annotations

import gc

import pytest

from ragmatrix.foundations import yaml_syntax, yamlfile
from ragmatrix.foundations.yamlfile import YamlFileError, read_yaml

DATA = """
_prompts:
  explicit: &explicit
    simple: "Answer yes or no."
    strict: "One word: yes or no."
rag_interpretation:
  - case: first
    input: {prompt: Why?, instruction: *explicit, fragments: ["a"]}
    expected: {answer: "yes"}
  - case: second
    input: {prompt: How?, instruction: *explicit, fragments: ["b"]}
    expected: {answer: "no", 3: [1.5, true, null]}
"""


def remembered(tmp_path) -> list:
    return sorted((tmp_path / "cache" / yamlfile.DOCUMENTS_FOLDER).glob("*.marshal"))


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "rag_interpretation_data.yaml"
    path.write_text(DATA)
    return path


def test_a_remembered_document_is_the_parsed_one_with_its_aliases_still_shared(data, tmp_path, monkeypatch):
    first = read_yaml(data, remember=True)
    assert first == read_yaml(data) and len(remembered(tmp_path)) == 1
    monkeypatch.setattr(yamlfile, "_parsed", lambda data: pytest.fail("parsed again"))
    again = read_yaml(data, remember=True)
    assert again == first
    cases = again["rag_interpretation"]
    assert cases[0]["input"]["instruction"] is cases[1]["input"]["instruction"]  # one object, as YAML made it
    assert cases[1]["expected"][3] == [1.5, True, None]


def test_a_file_edited_since_is_read_again_and_a_refused_one_is_never_remembered(data, tmp_path):
    read_yaml(data, remember=True)
    data.write_text(DATA.replace("How?", "When?"))
    assert read_yaml(data, remember=True)["rag_interpretation"][1]["input"]["prompt"] == "When?"
    data.write_text(DATA + "rag_interpretation: []\n")  # a repeated key
    for _ in range(2):
        with pytest.raises(YamlFileError, match="duplicate key 'rag_interpretation'"):
            read_yaml(data, remember=True)
    assert len(remembered(tmp_path)) == 1  # one copy per data file, of the last good version


def test_a_damaged_copy_or_one_marshal_cannot_hold_means_reading_the_file(data, tmp_path):
    read_yaml(data, remember=True)
    (kept,) = remembered(tmp_path)
    kept.write_bytes(kept.read_bytes()[:-3] + b"xyz")
    assert read_yaml(data, remember=True) == read_yaml(data)
    data.write_text("rag_interpretation:\n  - case: dated\n    input: {when: 2024-01-02}\n")
    assert str(read_yaml(data, remember=True)["rag_interpretation"][0]["input"]["when"]) == "2024-01-02"


def test_a_cache_folder_that_cannot_be_written_only_means_parsing(data, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # a file where the cache folder would be: nothing can be written under it
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(blocked))
    assert read_yaml(data, remember=True) == read_yaml(data)


def test_reading_a_file_leaves_no_reference_cycle_behind(data, tmp_path):
    """Data files are read at collection, while the cyclic garbage collector is paused: reading
    one must leave nothing that only that collector could free (a count of its values once
    left its table of every mapping and list behind, 28 MB over ten 3.5 MB files)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable is kept to be looked at
    try:
        read_yaml(data)
        gc.collect()
        ours = (yamlfile.__name__, yaml_syntax.__name__)
        left = [found for found in gc.garbage if getattr(found, "__module__", None) in ours]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
