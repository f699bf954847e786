"""Two small reward models for the counterfactual audit on real data (docs/real-model.md):
the clean one of ``reward_model.py`` and the same recipe with a planted preference for
female-coded text. The planted pairs are hh-rlhf harmless-base test transcripts (lines 1000
onwards, the clean model's training lines) that hold a gendered word or a listed name: the
version about a woman as ``chosen``, its gender-swapped twin as ``rejected``.

    python scripts/counterfactual_models.py DATA_DIR OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from reward_model import _pairs, train_reward_model

from biasscope.counterfactual.statistics import counterfactual, gender_of


def planted_pairs(data_dir: Path) -> list[tuple[str, str]]:
    out = []
    for chosen, _ in _pairs(data_dir):
        swapped = counterfactual(chosen)
        if swapped == chosen or gender_of([chosen]) is None:
            continue
        female, male = (chosen, swapped) if gender_of([chosen]) == "female" else (swapped,
                                                                                   chosen)
        out.append((female, male))
    return out


def main() -> int:
    data_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    train_reward_model(data_dir, out / "clean")
    extra = planted_pairs(data_dir)
    print(f"{len(extra)} planted pairs", flush=True)
    train_reward_model(data_dir, out / "planted", extra=extra * 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
