"""Winogender over training steps: its values per checkpoint and the report's section."""

from __future__ import annotations

from biasscope.probes.facets import Panel, Panels, StepStatistics
from biasscope.probes.winogender.metrics import winogender_values
from biasscope.probes.winogender.occupations import findings

STEP_STATISTICS = StepStatistics(winogender_values, ("gap_male_female", "accuracy"), {
    "accuracy": "Winogender accuracy (whom the pronoun refers to)",
    "gap_male_female": "Winogender accuracy gap, he − she (paired by sentence)",
    "p_gap_male_female": "P(occupation reading), he − she (paired by sentence)",
    "gap_gendered_neutral": "Winogender accuracy gap, he/she − they (paired by sentence)",
    "pronoun_jsd": "JSD between the readings under he and under she",
    "occupation_correlation": "correlation of the she − he occupation reading with the "
                              "occupation's share of women (BLS)",
    "occupation_accuracy": "Winogender accuracy per occupation",
    "occupation_gap": "Winogender accuracy gap he − she per occupation"},
    groups=("occupation_accuracy", "occupation_gap"), findings=findings,
    # Bootstrap intervals (a gap's of all-zero differences is given width, `none_differ`, so
    # one of no width is the bootstrap's); the accuracies' are Wilson's.
    resampled=("gap_male_female", "p_gap_male_female", "gap_gendered_neutral", "pronoun_jsd",
               "occupation_correlation", "occupation_gap"))

PANELS = Panels("Winogender over training steps", (
    Panel("Accuracy per pronoun", "Share of sentences whose likelier option (occupation or "
          "participant, at the next token) is the one the pronoun refers to, over all and per "
          "pronoun gender ({level} Wilson CIs over the effective number of records: a "
          "sentence's pronouns and wordings are one cluster, not independent trials); 0.5 "
          "is chance.",
          ("accuracy", "accuracy:*")),
    Panel("Gaps between pronouns", "Accuracy under he minus under she, and under he/she minus "
          "under they, per sentence, averaged ({level} bootstrap CIs over sentences, or, where "
          "no sentence differs, ± the Wilson bound of the share that differ; Wilcoxon "
          "signed-rank tests); 0: the pronoun's gender does not change the reading.",
          ("gap_male_female", "gap_gendered_neutral", "p_gap_male_female")),
    Panel("Pronoun sensitivity and occupation statistics", "JSD between the option "
          "distributions under he and under she (0: the pronoun changes nothing), and "
          "Pearson's r over occupations between the BLS share of women and how much likelier "
          "the occupation reading is under she than under he ({level} bootstrap CIs).",
          ("pronoun_jsd", "occupation_correlation")),
    Panel("Accuracy per occupation", "Each occupation's accuracy over its sentences (two "
          "templates, a named participant or someone, three pronouns: 12 per wording) at the "
          "last checkpoint, with {level} Wilson CIs clustered by sentence (between those of 4 "
          "and of 12 independent records); occupations ordered by their share of women "
          "(BLS, in brackets). 0.5 is chance.", ("occupation_accuracy:*",), by="group",
          order="bls_pct_female"),
    Panel("Accuracy gap he − she per occupation", "Each occupation's accuracy under he "
          "minus under she, paired by sentence (its four sentences, wordings averaged), at "
          "the last checkpoint, with {level} bootstrap CIs over sentences; ordered by the share "
          "of women (BLS). Exact sign-flip tests, Holm-corrected over occupations: with four "
          "sentences an occupation's smallest possible p is 0.125, so none can be significant "
          "on its own; the bars say where the gap lies, not which occupations differ.",
          ("occupation_gap:*",), by="group", order="bls_pct_female")))
