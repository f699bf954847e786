"""`load_probe` takes a probe as `--probe` names it, so a notebook loads what a command asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from bbq_fixture import TEMPLATES, write_bbq
from biasscope.core.errors import BiasscopeError
from biasscope.probes import load_probe


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("load-probe")
    by = {t.category: t for t in TEMPLATES}
    write_bbq(root, [by["Age"]] * 2 + [by["Religion"]] * 2)
    return root


def test_a_selection_after_the_colon_is_the_keyword(data_dir: Path) -> None:
    spelled = load_probe(" bbq: Age ", data_dir=data_dir).items(0)
    keyword = load_probe("bbq", data_dir=data_dir, categories=["Age"]).items(0)
    assert [i.id for i in spelled] == [i.id for i in keyword]
    assert spelled and all(i.groups["category"] == "Age" for i in spelled)


@pytest.mark.parametrize(("name", "says"), [
    ("bbq:Age,,Religion", "has an empty entry between commas"),
    ("bbq:Age,Age", "names Age more than once"),
    ("bbq:", "name what to select after ':'"),
    ("winobias-gender:Age", "winobias-gender takes no selection after ':'"),
    ("bqq:Age", "unknown probe 'bqq'"),
])
def test_a_bad_selection_is_one_line(data_dir: Path, name: str, says: str) -> None:
    with pytest.raises(BiasscopeError, match=says):
        load_probe(name, data_dir=data_dir)


def test_a_selection_given_twice_is_refused(data_dir: Path) -> None:
    with pytest.raises(BiasscopeError, match="both select"):
        load_probe("bbq:Age", data_dir=data_dir, categories=["Religion"])


@pytest.mark.parametrize(("name", "option", "says"), [
    ("lambada", {"templat": "x"}, "probe 'lambada' takes no option templat; it takes only "
                                  "data_dir"),
    ("stereoset", {"limit": 5}, "probe 'stereoset' takes no option limit; it takes only "
                                "data_dir"),
    ("bbq", {"categorys": ["Age"]}, "probe 'bbq' takes no option categorys; it takes "
                                    "categories, limit, template"),
    ("winogender", {"templat": "x"}, "probe 'winogender' takes no option templat; it takes "
                                     "template"),
    ("crows-pairs", {"versions": ["revised"]}, "probe 'crows-pairs' takes no option "
                                               "versions; it takes version"),
    ("perplexity", {"max_word": 5}, "probe 'perplexity' takes no option max_word; it takes "
                                    "fraction, max_words, split_seed, text"),
])
def test_an_unknown_option_is_named_with_the_known_ones(data_dir: Path, name: str,
                                                        option: dict[str, object],
                                                        says: str) -> None:
    """Before: lambada, stereoset, winogender, crows-pairs and perplexity took any keyword,
    so a typo passed silently."""
    with pytest.raises(BiasscopeError, match=f"^{says}$"):
        load_probe(name, data_dir=data_dir, **option)
