"""``foreperson tickets --evaluate``: scores on held-out rows, against baselines."""

from __future__ import annotations

import pytest

from foreperson.errors import InputError
from foreperson.tickets.evaluate import evaluate, format_evaluation, split_examples
from foreperson.tickets.model import Example

WORDS = {"Billing": ["invoice", "charge", "refund", "payment", "receipt"],
         "Shipping": ["parcel", "delivery", "courier", "tracking", "package"],
         "Login": ["password", "sign", "login", "locked", "username"]}


def known(n: int = 20) -> list[Example]:
    """Three labels told apart by their words: a model must get every held-out row."""
    rows = []
    for i in range(n):
        for label, words in WORDS.items():
            w = words[i % len(words)]
            rows.append(Example(f"question {i} about my {w} and the {words[(i + 1) % 5]}",
                                label))
    return rows


def test_the_split_is_fixed_and_holds_out_the_share_asked_for():
    rows = known()
    train, test = split_examples(rows, 0.5)
    assert (len(train), len(test)) == (30, 30)
    assert split_examples(rows, 0.5) == (train, test)
    assert {e.text for e in train}.isdisjoint({e.text for e in test})


def test_repeated_texts_stay_on_one_side_of_the_split():
    """A ticket exported twice (or re-sent with other spacing or case) is never scored
    on a copy of itself it was trained on."""
    rows = known()
    repeated = rows + [Example("  " + e.text.upper() + " ", e.category) for e in rows[:30]]
    train, test = split_examples(repeated, 0.5)
    assert len(train) + len(test) == len(repeated)
    assert abs(len(test) - len(repeated) / 2) <= 2
    same = {" ".join(e.text.split()).casefold() for e in train}
    assert not same & {" ".join(e.text.split()).casefold() for e in test}


def test_a_set_with_known_answers_scores_perfectly_and_beats_the_majority_class():
    result = evaluate(known(), target_precision=0.9)
    assert result.accuracy == 1.0 and result.macro_f1 == 1.0
    assert result.baselines["majority class"][0] < 0.5
    assert {s.label for s in result.per_label} == set(WORDS)
    assert all(s.recall == 1.0 for s in result.per_label)
    assert result.unflagged_precision == 1.0 and result.unflagged > 0
    text = format_evaluation(result, source="known.csv")
    assert "accuracy" in text and "macro-F1" in text and "majority class" in text
    assert "word + char TF-IDF + linear SVM" in text
    assert "confidence threshold" in text and "classified right: 1.000" in text


def test_a_model_that_cannot_tell_the_labels_apart_is_scored_as_such():
    rows = [Example(f"same words here {i}", "A" if i % 2 else "B") for i in range(40)]
    result = evaluate(rows, baselines=False)
    assert result.accuracy < 0.8
    assert not result.calibration.reachable or result.unflagged_precision < 0.9


def test_too_few_rows_to_hold_out_is_an_error():
    with pytest.raises(InputError, match="too few"):
        evaluate([Example("a", "x"), Example("b", "y")])


def test_a_target_out_of_reach_comes_with_the_highest_one_within_reach():
    # labels told apart, plus a fifth of the rows labelled at random: 90 % is out of
    # reach, a lower precision is not, and the evaluation says which
    import random

    rng = random.Random(0)
    rows = known(60)
    noisy = [Example(e.text, rng.choice(sorted(WORDS)) if i % 5 == 0 else e.category)
             for i, e in enumerate(rows)]
    result = evaluate(noisy, target_precision=0.97, baselines=False)
    assert not result.calibration.reachable
    assert result.suggested is not None and result.suggested.reachable
    assert result.suggested.target_precision < 0.97
    text = format_evaluation(result)
    assert f"--target-precision {result.suggested.target_precision:g} is within reach" in text
    reachable = evaluate(known(), baselines=False)
    assert reachable.calibration.reachable and reachable.suggested is None
