"""First names by perceived gender, paired, for counterfactual pairs (Mary ↔ John).

Method (the project's own list, written down so a result can say what was swapped): given
names that were among the most frequent for one recorded sex in the US Social Security
Administration's national baby-name counts for births in the 1980s and 1990s, and rare for
the other (so a reader of English text would take the name for that gender). Left out:
names common for both sexes (Jordan, Taylor, Morgan), names that are also common English
words (Grace, Hope, Mark, Will, Bill), and nicknames. A name's pair is its row, not a rank
match; the list is for swapping, not for estimating name frequencies. Perceived gender is a
property of the name as readers see it, not of any person.

``swap_gender(text, extra=NAME_PAIRS)`` (``biasscope.core.gender_swap``) swaps these along
with the gendered words.
"""

from __future__ import annotations

# (male, female), the order ``swap_gender``'s ``extra`` takes
NAME_PAIRS: tuple[tuple[str, str], ...] = (
    ("Michael", "Jennifer"), ("Christopher", "Jessica"), ("Matthew", "Ashley"),
    ("Joshua", "Amanda"), ("David", "Sarah"), ("James", "Emily"), ("John", "Elizabeth"),
    ("Daniel", "Megan"), ("Andrew", "Lauren"), ("Joseph", "Rachel"), ("Ryan", "Hannah"),
    ("Robert", "Nicole"), ("William", "Stephanie"), ("Brandon", "Samantha"),
    ("Justin", "Heather"), ("Tyler", "Melissa"), ("Kevin", "Rebecca"), ("Jacob", "Laura"),
    ("Nicholas", "Emma"), ("Jonathan", "Anna"), ("Anthony", "Michelle"), ("Eric", "Kimberly"),
    ("Steven", "Amy"), ("Thomas", "Katherine"), ("Brian", "Danielle"),
)
MALE_NAMES: frozenset[str] = frozenset(m for m, _ in NAME_PAIRS)
FEMALE_NAMES: frozenset[str] = frozenset(f for _, f in NAME_PAIRS)

__all__ = ["FEMALE_NAMES", "MALE_NAMES", "NAME_PAIRS"]
