"""Sparse-only JKO-RAG, third attempt (issue #5 stretch target >= 0.69): the analyser of the first stage.

Declared before any figure of this attempt was computed.  No transformer, no neural vector.
Every choice is made on ALL 809 SciFact TRAIN queries; TEST (300 queries) is evaluated once,
at the end, for the selected recipe and its ablation rows only.

Stage E0 -- analyser of the first stage.  BM25 lucene (k1 1.2, b 0.75, Lucene defaults; k1/b are
NOT searched), Porter stemmer always on (applied after stop-word removal), lowercase.  Grid
(3 x 3 x 3 = 27 candidates, in this order; the current analyser is the first):

  token pattern
    * ``sklearn``   ``(?u)\\b\\w\\w+\\b`` (current; tokens of >= 2 characters)
    * ``word``      ``(?u)\\b\\w+\\b`` (= ``(?u)\\w+``, jkofast.text.WORD; keeps 1-character tokens:
                    "IL-6" -> il, 6; "type 2 diabetes" -> type, 2, diabet)
    * ``sklearn+compounds``  the ``sklearn`` tokens plus, for every maximal match of
                    ``(?u)\\w+(?:[-\\u2010]\\w+)+`` (word runs joined by ASCII hyphen U+002D or the
                    Unicode hyphen U+2010) in the lowercased text, that match with its hyphens
                    removed, as ONE extra token (``Analyzer(compounds=True)``):
                    "IL-6" -> il, il6; "COVID-19" -> covid, covid19; "T-cell-mediated" -> cell,
                    mediated, tcellmediated; the joined token then passes the same stop list and
                    stemmer as every other token;
  stop list
    * ``english``   scikit-learn's ENGLISH_STOP_WORDS, 318 words (current)
    * ``lucene``    Lucene EnglishAnalyzer's default 33 words (a, an, and, are, as, at, be, but,
                    by, for, if, in, into, is, it, no, not, of, on, or, such, that, the, their,
                    then, there, these, they, this, to, was, will, with)
    * ``none``
  title repeats t in {2, 3, 4} (``title x t + abstract``; current 3).

  Criterion: train nDCG@10 of the full-corpus BM25 top-10 (= the read-out of its top-200 pool),
  max over the grid (first in grid order on an exact tie), the rule the first attempt used for
  the stemmer and the title weight.  Reported alongside (not a gate): the paired 95 % bootstrap
  CI (2000 resamples, seed 0) of the winner's per-query gain over the current analyser.

  If E0 keeps the current analyser (sklearn, english, t 3): stop; no new test evaluation.

Otherwise, on the new base, the second attempt's later stages run unchanged
(scripts/sparse_only_v2.py, imported and parametrised with the analyser and title repeats;
``--gate ci``): E1 query model, E2 second signal, E3 propagation (each kept only if the paired
95 % CI of its train gain over the stage holder is above 0), G geometry (tfidf / bm25 / ppmi /
sgr_centres at published#3 and fast), J JKO point (the same 35 points, W mode,
grad="implicit"; best train mean).  Then TEST once: the new base's read-out, the selected recipe,
recipe vs its read-out (paired), and the second attempt's rows alongside (previous point #3,
LSA-128, KL-Prox, no-prox, BW-JKO -- reported, never used to choose), plus the old base's
read-out (sklearn, english, t 3; its test figure 0.6921 was already published).

Usage: python scripts/sparse_only_v3.py [--out scripts/results/sparse_only_v3.json]
       [--cache scripts/results/sparse_only_v3_cache.json] [--n-train N (smoke test)]
"""
