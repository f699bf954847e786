"""The help and the defaults of the settings that choose which probes a job asks, and which of
their items: shared by every job that asks probes (dynamics, audit, items, intervene).

They are plain text here, not beside the probes (`biasscope.probes.specs` re-exports the help),
because importing any module of ``biasscope.probes`` loads the probes' registry and pandas with
it, and a command's ``--help`` needs only these words. The default names are the probes' own
(tests/cli/test_startup.py checks that they stay equal).
"""

from __future__ import annotations

#: `biasscope.probes.winobias.NAME`: the probe a dynamics run scores unless told otherwise.
WINOBIAS = "winobias-gender"
#: `biasscope.probes.perplexity.ETHICS`: the held-out text an intervention run trains on.
ETHICS = "ethics-commonsense"

#: The help of the settings that choose a probe's items, shared by every job that asks probes.
LIMIT_HELP = ("at most N items per probe (smoke tests), the same ones for every seed, recorded "
              "in run.json, drawn as whole groups (N rounded down to whole groups, but one "
              "group at least: --limit 1 gives a whole pair or example): winobias-gender a "
              "seeded sample of whole pro/anti pairs stratified by subset and answer (4 prompts "
              "a pair), bbq of whole examples stratified by category (4 variants each), "
              "adult-counterfactual the first N/2 pairs (2 prompts each), others the first N")


def probe_help(example: str) -> str:
    """The end of a ``--probe`` help, its example led by ``example``: a probe the command
    takes (the audit's said ``--probe winobias-gender``, which the audit refuses)."""
    return (f"; repeatable or a comma list, e.g. --probe {example} --probe bbq:Age,Religion "
            "(`biasscope probes` lists them)")


PROBE_HELP = probe_help("winobias-gender")
WORDINGS_HELP = ("ask every probe under several prompt wordings and report how far each result "
                 "holds across them: builtin (the project's set), N (its first N) or a wordings "
                 "file; default one wording, as before (docs/wordings.md)")
BASE_RATE_HELP = ("adult-counterfactual: DecodingTrust's test file whose share of 'yes' labels "
                  "differs by this much between men and women")
