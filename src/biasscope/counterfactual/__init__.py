"""The counterfactual check of scorers (``biasscope counterfactual``): do reward models and
LLM judges score a text differently when its gendered words and first names are swapped?

``statistics``: the paired difference and the verdict flips of one scorer; ``scorers``: the
pairs (built-in or the user's) scored by every reward model and judge; ``job``: the command as
one library call, `job.run(CounterfactualConfig)`; ``settings``: that config alone, which the
command's flags are built from.
"""
