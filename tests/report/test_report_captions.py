"""The dynamics report says what it draws and writes its numbers one way: captions name a
dashed line, a seed band or error bars only where the figure has them, cite no figure
numbers, say which direction is bad and what a p of 0 is drawn at; p-values are drawn as
computed; the BLS scatter shows its legend and keeps its names apart; a spread beside an
estimate takes the estimate's decimals, a column of numbers three significant digits each."""

from __future__ import annotations

from typing import Any

from biasscope.core.numbers import pvalue, spread
from biasscope.report import breakdown, figures, probe_panels, stats_figures
from biasscope.report.headline import gap
from biasscope.report.plotting import View
from biasscope.report.tables import column


def checkpoint(step: int, male: float, female: float, std: float = 0.0) -> dict[str, Any]:
    mean = {"jsdp_correct/male": male, "jsdp_correct/female": female,
            "jsdp_gap": male - female, "jsdp_not_specified/male": 0.2,
            "jsdp_not_specified/female": 0.1}
    return {"model": "m", "probe": "winobias-gender", "step": step, "revision": None,
            "seeds": [0, 1] if std else [0], "items_per_seed": 10, "mean": mean,
            "std": {k: std for k in mean}, "per_seed": {}}


def captions(checkpoints: list[dict[str, Any]], model: dict[str, Any]) -> dict[str, str]:
    view = {"models": {"m": model}, "alpha": 0.01}
    return {p.title: p.caption for p in figures.panels(checkpoints, ["male", "female"], view)}


def test_captions_describe_only_the_markers_and_bands_drawn() -> None:
    one_seed = [checkpoint(s, 0.1, 0.1 + s / 1e4) for s in (0, 1000, 2000)]
    said = captions(one_seed, {})
    first = said["JSD-P per correct answer (male, female)"]
    assert "Dashed" not in first and "shaded band" not in first and "right axis" not in first
    assert not any("Fig." in c for c in said.values())

    seeds = [checkpoint(s, 0.1, 0.1 + s / 1e4, std=0.01) for s in (0, 1000, 2000)]
    first = captions(seeds, {"emergence": {"jsdp_correct": 1000}})[
        "JSD-P per correct answer (male, female)"]
    assert "Dashed vertical lines mark where the gap becomes significant for good." in first
    assert "recommended stop" not in first  # no performance, so no stop is drawn
    assert "The shaded band is ± one standard deviation over seeds." in first

    stopped = captions(seeds, {"emergence": {"jsdp_correct": 1000},
                               "recommendation": {"step": 2000}})
    assert ("Dashed vertical lines mark where the gap becomes significant for good and the "
            "recommended stop.") in stopped["JSD-P per correct answer (male, female)"]


def test_not_specified_caption_says_which_way_is_bad() -> None:
    said = captions([checkpoint(s, 0.1, 0.2) for s in (0, 1000)], {})
    assert "Higher is worse" in said["JSD-P of gendered options where “not specified” is "
                                    "correct"]


def test_audit_captions_name_no_band_or_stop_that_is_not_drawn() -> None:
    def values(step: int, seeds: int) -> dict[str, Any]:
        v = {"estimate": 0.01 * step, "low": 0.01 * step - 0.1, "high": 0.01 * step + 0.1,
             "n": 20, "seeds": seeds, "seed_low": 0.01 * step - 0.05,
             "seed_high": 0.01 * step + 0.05}
        return {"preference": v, "pronoun_effect": v, "stereotyped_rate": v}

    def html(seeds: int, emergence: dict[str, int]) -> str:
        result = {"steps": [0, 10], "emergence": emergence,
                  "checkpoints": [{"step": s, "values": values(s, seeds)} for s in (0, 10)]}
        section = {"models": {"m": result}, "names": {}, "headline": ["preference"]}
        return probe_panels.section_html({"professional-bias": section},
                                         lambda fig, i: "", 0, "Holm", 0.01)

    plain = html(1, {})
    assert "Dashed" not in plain and "shaded band" not in plain and "recommended" not in plain
    marked = html(3, {"preference": 10})
    assert ("Dashed vertical lines mark where the effect becomes significant for good. The "
            "shaded band is the range over seeds.") in marked
    assert "recommended stop" not in marked
    # The value's name once, above its table, not in each row.
    assert marked.count("preference") == plain.count("preference")


def p_rows(ps: list[float]) -> list[dict[str, Any]]:
    return [{"step": 1000 * i, "p_value": p, "p_adjusted": min(1.0, 3 * p), "significant": True,
             "effect_size": -0.5} for i, p in enumerate(ps)]


def test_p_values_are_drawn_as_computed_and_a_zero_is_said() -> None:
    view = View({"models": {"m": {"tests": {"jsdp_correct": p_rows([0.5, 1e-26])}}},
                 "alpha": 0.01})
    _, caption, fig, _ = stats_figures.specs(view)[0]
    raw = next(t for t in fig.data if t["name"] == "raw p")
    assert raw["y"] == [0.5, 1e-26]  # not floored at 1e-16
    assert fig.layout["yaxis"]["range"][0] < -26  # and on the axis
    assert "Fig." not in caption and "drawn at" not in caption
    assert "effect size r = -0.50" in raw["hovertext"][1]

    view = View({"models": {"m": {"tests": {"jsdp_correct": p_rows([0.5, 0.0])}}},
                 "alpha": 0.01})
    _, caption, fig, _ = stats_figures.specs(view)[0]
    raw = next(t for t in fig.data if t["name"] == "raw p")
    assert raw["y"] == [0.5, stats_figures.ZERO_AT]
    assert f"A p of 0 (smaller than a double holds) is drawn at {stats_figures.ZERO_AT:g}" \
        in caption


def test_bls_scatter_shows_its_legend_and_keeps_names_apart() -> None:
    names = ["nurse", "hairdresser", "secretary", "receptionist", "librarian", "cook", "ceo"]
    shares = {"nurse": 90.0, "hairdresser": 90.5, "secretary": 91.0, "receptionist": 90.2,
              "librarian": 79.0, "cook": 40.0, "ceo": 28.0}
    rows = [{"occupation": n, "not-referenced/lp_diff": {"estimate": -0.5 + 0.01 * i}}
            for i, n in enumerate(names)]
    view = View({"models": {"m": {"snapshot": True, "occupation_statistics": {
        "spearman": {"estimate": -0.8, "low": -0.95, "high": -0.4}},
        "breakdown": {"0": {"occupations": rows}}}},
        "occupation_statistics": {"bls_pct_female": shares}})
    assert breakdown.steps_of(view, "m") == [0]
    fig = breakdown.versus_statistics(view)
    assert fig is not None and fig.layout["showlegend"] is True
    assert "Spearman ρ = -0.80 (95% CI -0.95 to -0.40)" in fig.data[0]["name"]  # r-like: .2f
    view.data["models"]["m"]["occupation_statistics"]["spearman"].update(low=-1.0, high=-1.0)
    fig = breakdown.versus_statistics(view)
    assert fig is not None
    assert "ρ = -0.80 (at least 95% of resamples gave -1.00)" in fig.data[0]["name"]
    shown = [n for n in fig.data[0]["text"] if n]
    assert "cook" in shown and "ceo" in shown  # lone points keep their names
    assert breakdown.names_left_out(fig) == len(names) - len(shown) > 0  # the crowd does not
    assert all(n.startswith("<b>") for n in fig.data[0]["hovertext"])  # names on hover


def test_names_are_placed_without_overlap() -> None:
    points = [(50.0 + 0.3 * i, 1.0, f"occupation {i}") for i in range(6)] + [
        (10.0, 0.0, "alone")]
    places = breakdown.place_names(points, [0.0, 100.0], [-1.0, 2.0])
    assert places[-1] == "top center"
    boxes = []
    for (x, y, name), where in zip(points, places, strict=True):
        if where is None:
            continue
        offset = dict(breakdown.PLACES)[where]
        px, py = x / 100 * breakdown.PLOT_W, (2.0 - y) / 3 * breakdown.PLOT_H
        dx0, dy0, dx1, dy1 = offset(breakdown.CHAR_W * len(name), breakdown.LINE_H)
        boxes.append((px + dx0, py + dy0, px + dx1, py + dy1))
    assert len(boxes) >= 3
    assert not any(breakdown._overlaps(a, b) for i, a in enumerate(boxes)
                   for b in boxes[i + 1:])


def test_one_precision_per_bracket_and_per_column() -> None:
    assert pvalue(0.9996) == pvalue(1.0) == "1.0"  # not "1.00" beside "1.0"
    assert pvalue(0.0996) == pvalue(0.1) == "0.10"
    assert spread(0.000134, 3) == "< 0.001" and spread(0.0000176, 5) == "0.00002"
    ckpt = {"seeds": [0, 1, 2], "mean": {"jsdp_gap": -0.06521}, "std": {"jsdp_gap": 0.000134},
            "model": "m", "probe": "winobias-gender", "step": 600}
    view = View({"models": {"m": {"ci": {"600": {"jsdp_gap": [-0.0966, -0.0324]}}}}})
    assert gap(ckpt, view) == "-0.065 (95% CI -0.097 to -0.032; std over 3 seeds < 0.001)"
    assert column([1.0, 1.6, 3.0, -0.0200, 0.0]) == ["1.00", "1.60", "3.00", "-0.0200", "0"]


def test_the_methods_sentence_writes_the_level_as_chosen() -> None:
    """At 99.9% the error bars were "100% bootstrap confidence intervals" (`.0%` rounding)."""
    from biasscope.report.tables import method_sentence

    said = method_sentence(View({"confidence": 0.999, "alpha": 0.01, "n_resamples": 2000}))
    assert "Error bars are 99.9% bootstrap confidence intervals" in said and "100%" not in said


def test_the_methods_name_the_gap_test_its_rows_ran() -> None:
    """Over WinoBias pairs the gap is tested by signed rank (and the report said Mann-Whitney
    whatever ran); a run analysed before says Mann-Whitney, as its rows have no ``test``."""
    from biasscope.report.tables import method_sentence

    def said(*tests: str | None) -> tuple[str, str]:
        rows = [{"step": i, "p_value": 0.5, "p_adjusted": 0.5, **({"test": t} if t else {})}
                for i, t in enumerate(tests)]
        view = View({"confidence": 0.95, "alpha": 0.01, "correction": "holm",
                     "models": {"m": {"tests": {"jsdp_correct": rows}}}})
        caption = stats_figures.specs(view)[0][1]
        hover = stats_figures.row_hover("t", rows[0], (("male", "male"), ("female", "female")),
                                        view)
        return method_sentence(view) + caption, hover

    paired, hover = said("Wilcoxon signed-rank over pairs")
    assert paired.count("Wilcoxon signed-rank test of the male − female differences") == 2
    assert "Mann-Whitney" not in paired and "Wilcoxon signed-rank over pairs: p" in hover
    old, hover = said(None)
    assert "Wilcoxon" not in old and old.count("Mann-Whitney U test of") == 2
    assert "Mann-Whitney" not in hover
    mixed, _ = said("Wilcoxon signed-rank over pairs", "Mann-Whitney U")
    assert "where all pair up, else a two-sided Mann-Whitney U test" in mixed
