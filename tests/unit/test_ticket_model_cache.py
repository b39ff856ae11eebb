"""The offline classifier kept as JSON between processes: read back, it predicts exactly
as the model trained here; other examples or library versions train again; a process
that reads it never imports scikit-learn; the numpy features are scikit-learn's."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foreperson.tickets import _cache, _tfidf
from foreperson.tickets._classifier import FEATURES, VARIANTS, Features, LinearClassifier, train
from foreperson.tickets.model import Example, TicketModel, bundled_examples

SHIPPED = Path(__file__).resolve().parents[2] / "src" / "foreperson" / "tickets" / "data"

PROBES = [
    "I was charged twice, please refund the second payment",
    "Phishing-Mail mit Ihrem Logo erhalten, Sicherheitsproblem",
    "El servicio está caído para todos los usuarios",
    "Je veux un remboursement", "Quero cancelar a minha conta", "URGENT: nothing works!!!",
    "", "   ", "12345", "x", "Ünïcödé\tand\n\nwhite   space İstanbul",
]


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("FOREPERSON_CACHE_DIR", str(tmp_path))
    return tmp_path


def answered(n: int = 6) -> list[Example]:
    """Two labels, each with answers (drafts from the nearest answered example)."""
    out = []
    for i in range(n):
        out += [Example(f"My invoice {i} shows the wrong amount, please correct it",
                        "Billing", f"We are checking invoice {i} for you.", "low", "en"),
                Example(f"The app crashes when I open the report screen {i}", "Technical",
                        "Please update the app and tell us the version you use.", "high",
                        "en")]
    return out


def figures(model: TicketModel) -> dict:
    """Everything a model reports about its training and calibration."""
    fitted = [model.categories] + ([model.priorities] if model.priorities else [])
    return {"calibration": model.calibration, "labels": model.labels,
            "languages": model.example_languages,
            "reachable": model.reachable_target(), "calibrated": model.calibrate(0.6),
            "fitted": [(f.variant, f.classes, f.temperature, f.held_out, f.groups, f.accuracy,
                        f.weights.tolist(), f.intercept.tolist()) for f in fitted]}


def outputs(model: TicketModel, texts: list[str]) -> tuple[list, list]:
    verdicts = model.classify_many(texts)
    drafts = model.draft_many([(t, v.category, v.language) for t, v in zip(texts, verdicts,
                                                                           strict=True)])
    return verdicts, drafts


@pytest.mark.parametrize("examples", [bundled_examples(), answered()],
                         ids=["bundled", "with answers"])
def test_a_cached_classifier_predicts_and_reports_exactly_as_the_trained_one(cache, examples):
    trained = TicketModel(examples)
    assert not trained.cached
    [path] = cache.glob("classifier-*.json")
    os.utime(path, (1, 1))
    reloaded = TicketModel(examples)
    assert reloaded.cached and path.stat().st_mtime > 1          # marked as just used
    texts = PROBES + [e.text for e in examples] + [e.answer for e in examples if e.answer]
    assert outputs(reloaded, texts) == outputs(trained, texts)
    assert figures(reloaded) == figures(trained)
    state = json.loads(path.read_text(encoding="utf-8"))
    assert set(state) == {"format", "languages", "features", "categories", "priorities"}
    assert state["categories"]["classes"] == sorted({e.category for e in examples})


@pytest.mark.parametrize("examples", [bundled_examples(), answered()],
                         ids=["eight labels", "two labels"])
def test_the_numpy_scores_are_scikit_learns_decision_function(examples):
    import numpy
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    texts = [e.text for e in examples]
    state = train(texts, [e.category for e in examples], [e.priority for e in examples],
                  ["en"] * len(texts))
    features = Features(state["features"])
    # the same vocabularies (a deterministic fit), through scikit-learn's own transform
    vectorizers = [TfidfVectorizer(analyzer=kind, ngram_range=grams, sublinear_tf=True,
                                   max_features=most).fit(texts)
                   for kind, grams, most in FEATURES]
    assert [v.idf_.tolist() for v in vectorizers] == [b["idf"] for b in state["features"]]
    probes = [*PROBES, *texts]
    words, chars = (v.transform(probes) for v in vectorizers)
    matrices = {"char": chars, "both": sparse.hstack([words, chars]).tocsr() / math.sqrt(2)}
    rows = features.rows(probes)
    for name, matrix in matrices.items():
        ours = numpy.zeros(matrix.shape)
        for i, (columns, values) in enumerate(rows[name]):
            ours[i, columns] = values
        assert ours == pytest.approx(matrix.toarray(), rel=0, abs=1e-12)
    # the trained coefficients, and random ones for every variant (whichever it chose)
    trained = state["categories"]
    random = numpy.random.default_rng(0)
    for variant, (name, _) in [(trained["variant"], VARIANTS[trained["variant"]]),
                               *VARIANTS.items()]:
        coef = (trained["coef"] if variant == trained["variant"]
                else random.normal(size=(len(trained["coef"]), features.width[name])).tolist())
        fitted = LinearClassifier.from_state({**trained, "variant": variant, "coef": coef},
                                             features.width)
        svm = LinearSVC()
        svm.coef_, svm.intercept_ = numpy.array(coef), fitted.intercept
        svm.classes_ = numpy.array(fitted.classes)
        expected = svm.decision_function(matrices[name])
        if expected.ndim == 1:                   # two labels: one score, for the second
            expected = numpy.column_stack([-expected, expected])
        assert fitted.scores(rows) == pytest.approx(expected, rel=0, abs=1e-12)
        assert fitted.predict(rows)[0] == svm.classes_[expected.argmax(1)].tolist()


def test_a_changed_example_set_or_library_is_trained_again(cache, monkeypatch):
    examples = answered()
    first = TicketModel(examples)
    [path] = cache.glob("classifier-*.json")
    # tampered with, the cached state is what a new model of the same examples uses
    state = json.loads(path.read_text(encoding="utf-8"))
    state["categories"]["intercept"] = [-50.0]          # two labels: one column, Billing
    path.write_text(json.dumps(state), encoding="utf-8")
    ticket = "The app crashes when I open the report screen"
    assert first.classify(ticket).category == "Technical"
    assert TicketModel(examples).classify(ticket).category == "Billing"
    changed = [*examples[:-1], dataclasses.replace(examples[-1], text=examples[-1].text + "!")]
    for other in (changed, examples[::-1], examples + [Example("Refund me", "Billing")]):
        model = TicketModel(other)
        assert not model.cached and model.classify(ticket).category == "Technical"
    assert len(list(cache.glob("classifier-*.json"))) == 4
    real = _cache.library_version
    monkeypatch.setattr(_cache, "library_version",
                        lambda name: "0.0" if name == "scikit-learn" else real(name))
    assert not TicketModel(examples).cached
    assert len(list(cache.glob("classifier-*.json"))) == 5
    assert not TicketModel(examples, cache=False).cached
    assert len(list(cache.glob("classifier-*.json"))) == 5        # nothing written


def test_a_broken_or_foreign_cache_file_is_trained_over(cache):
    examples = answered(3)
    TicketModel(examples)
    [path] = cache.glob("classifier-*.json")
    good = json.loads(path.read_text(encoding="utf-8"))
    broken = {**good, "categories": {**good["categories"],
                                     "coef": [good["categories"]["coef"][0][:-1]]}}
    for text in ["{not json", "[]", json.dumps({**good, "format": -1}), json.dumps(broken),
                 json.dumps({**good, "languages": good["languages"][:-1]})]:
        path.write_text(text, encoding="utf-8")
        assert not TicketModel(examples).cached
        assert TicketModel(examples).cached                  # trained, and written anew


def test_only_the_most_recently_used_states_are_kept(tmp_path):
    for age in range(5):
        path = tmp_path / f"classifier-{age}.json"
        assert _cache.write(path, {"age": age})
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    (tmp_path / "triage-x.json").write_text("{}")
    _cache.touch(tmp_path / "classifier-4.json")                    # used just now
    _cache.keep_newest(tmp_path, "classifier-*.json", 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "classifier-0.json", "classifier-4.json", "triage-x.json"]
    assert _cache.load(tmp_path / "classifier-4.json", lambda s: s["age"]) == 4
    assert not _cache.write(tmp_path / "triage-x.json" / "under-a-file.json", {})
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == "triage-x.json"   # no leftovers


def _texts() -> list[str]:
    rows = [json.loads(line) for line in (SHIPPED / "examples.jsonl").read_text(
        encoding="utf-8").splitlines() if line]
    lines = [json.loads(line)["text"] for path in sorted((SHIPPED / "triage").glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines()[:150] if line]
    return PROBES + [r["text"] for r in rows] + [r.get("answer", "") for r in rows] + lines


@pytest.mark.parametrize(("kind", "grams"), [("word", (1, 2)), ("char_wb", (2, 5)),
                                             ("word", (1, 1)), ("word", (2, 3)),
                                             ("char_wb", (1, 3))])
def test_the_numpy_analyzers_split_as_scikit_learns(kind, grams):
    from sklearn.feature_extraction.text import TfidfVectorizer

    theirs = TfidfVectorizer(analyzer=kind, ngram_range=grams).build_analyzer()
    ours = _tfidf.analyzer(kind, grams)
    for text in _texts():
        assert ours(text) == theirs(text), text


def test_the_numpy_rows_and_similarities_are_scikit_learns():
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = _texts()
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)
    theirs = vectorizer.fit_transform(texts[20:]).tocsr()
    vocabulary = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
    block = _tfidf.TfidfBlock("char_wb", (2, 5), vocabulary, vectorizer.idf_.tolist())
    probes = vectorizer.transform(texts[:40]).toarray()
    for text, row in zip(texts[:40], probes, strict=True):
        columns, values = block.row(text)
        dense = [0.0] * len(block)
        for column, value in zip(columns.tolist(), values.tolist(), strict=True):
            dense[column] = value
        assert dense == pytest.approx(row.tolist(), abs=1e-12)
    index = _tfidf.Similarities([block.row(t) for t in texts[20:]], len(block))
    expected = (vectorizer.transform(texts[:40]) @ theirs.T).toarray()
    for text, row in zip(texts[:40], expected, strict=True):
        assert index.dot(*block.row(text)).tolist() == pytest.approx(row.tolist(), abs=1e-12)


PROCESS = """
import json, sys
from foreperson.tickets.model import TicketModel, bundled_examples

model = TicketModel(bundled_examples())
texts = json.loads(sys.argv[1])
verdicts = model.classify_many(texts)
drafts = model.draft_many([(t, v.category, v.language) for t, v in zip(texts, verdicts)])
reasons = [model.triage(t, v, d["flags"]).reasons for t, v, d in zip(texts, verdicts, drafts)]
print(json.dumps({"cached": model.cached, "verdicts": [v.__dict__ for v in verdicts],
                  "drafts": drafts, "reasons": reasons,
                  "threshold": model.calibration.threshold,
                  "imported": sorted(m for m in ("sklearn", "scipy") if m in sys.modules)}))
"""


@pytest.mark.slow
def test_a_process_with_a_valid_cache_never_imports_scikit_learn(tmp_path):
    env = {**os.environ, "FOREPERSON_CACHE_DIR": str(tmp_path)}

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", PROCESS, json.dumps(PROBES)], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        return json.loads(done.stdout)

    first, second = run(), run()             # trains (and caches), then reads the cache
    assert not first.pop("cached") and first.pop("imported") == ["scipy", "sklearn"]
    assert second.pop("cached") and second.pop("imported") == []
    assert second == first
    assert any(reasons for reasons in first["reasons"])      # the triage rules had a say
