"""String ops: StringConcat, StringNormalizer, StringSplit, RegexFullMatch, TfIdfVectorizer.

String tensors are NumPy object arrays of Python `str`.
"""

from __future__ import annotations

import operator
import re

import numpy as np

from .. import dtypes as dt
from ..errors import GraphError
from ._shape import broadcast_shapes
from .registry import STRING, Attr, Tier, op

STR = frozenset({dt.string})


def _strings(values) -> np.ndarray:
    """A list of Python str as a 1-D object array (np.asarray would make a fixed-width '<U' array)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


# -- StringConcat ----------------------------------------------------------------------------------
def _concat_infer(ctx):
    return [dt.TensorType(broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)), dt.string)]


_str_add = np.frompyfunc(operator.add, 2, 1)


def _concat_ref(x, y):
    # frompyfunc returns a bare str for 0-d operands; keep it an object array.
    r = _str_add(x, y)
    return r if isinstance(r, np.ndarray) else _strings([r]).reshape(())


op("StringConcat", inputs=("X:T", "Y:T"), outputs=("Z:T",), types={"T": STR},
   infer=_concat_infer, reference=_concat_ref, groups={STRING}, tier=Tier.HIGH, onnx_since=20,
   doc="Elementwise string concatenation X + Y, with NumPy broadcasting.")


# -- StringNormalizer ------------------------------------------------------------------------------
_CASE_ACTIONS = ("NONE", "LOWER", "UPPER")


def _normalizer_infer(ctx):
    shape = ctx.shape(0)
    a = ctx.attrs
    if a["case_change_action"] not in _CASE_ACTIONS:
        raise ctx.error(f"case_change_action must be one of {list(_CASE_ACTIONS)}, "
                        f"got '{a['case_change_action']}'")
    if shape is None:
        return [dt.TensorType(None, dt.string)]
    if len(shape) not in (1, 2) or (len(shape) == 2 and isinstance(shape[0], int) and shape[0] != 1):
        raise ctx.error(f"input must have shape [C] or [1, C], got {list(shape)}")
    if not a["stopwords"]:
        return [ctx.input(0)]  # nothing is dropped: same shape
    return [dt.TensorType(shape[:-1] + (None,), dt.string)]


def _normalizer_ref(x, stopwords, is_case_sensitive, case_change_action, locale):
    # `locale` is accepted for compatibility; Python's str casing is Unicode-aware already.
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise GraphError(f"StringNormalizer: input must have shape [C] or [1, C], got {list(x.shape)}")
    if is_case_sensitive:
        stop = set(stopwords)
        kept = [s for s in x.reshape(-1) if s not in stop]
    else:
        stop = {w.lower() for w in stopwords}
        kept = [s for s in x.reshape(-1) if s.lower() not in stop]
    if case_change_action == "LOWER":
        kept = [s.lower() for s in kept]
    elif case_change_action == "UPPER":
        kept = [s.upper() for s in kept]
    if not kept and x.size:  # ONNX: everything dropped gives one empty string
        kept = [""]
    out = _strings(kept)
    return out if x.ndim == 1 else out.reshape(1, -1)


op("StringNormalizer", inputs=("X:T",), outputs=("Y:T",), types={"T": STR},
   attrs=(Attr("stopwords", "strings", ()), Attr("is_case_sensitive", "int", 0),
          Attr("case_change_action", "string", "NONE"), Attr("locale", "string", "")),
   infer=_normalizer_infer, reference=_normalizer_ref, groups={STRING}, tier=Tier.HIGH,
   onnx_since=10,
   doc="Drops stopwords from a [C] or [1, C] string tensor, then optionally lower- or upper-cases.")


# -- StringSplit -----------------------------------------------------------------------------------
def _split_infer(ctx):
    if ctx.attrs["maxsplit"] is not None and ctx.attrs["maxsplit"] < 0:
        raise ctx.error(f"maxsplit must be non-negative, got {ctx.attrs['maxsplit']}")
    shape = ctx.shape(0)
    subs = None if shape is None else shape + (None,)
    return [dt.TensorType(subs, dt.string), dt.TensorType(shape, dt.int64)]


def _split_ref(x, delimiter, maxsplit):
    # No delimiter (or ""): split on runs of whitespace, dropping leading/trailing whitespace,
    # exactly Python's str.split(None, n).
    sep = delimiter or None
    n = -1 if maxsplit is None else maxsplit
    parts = [s.split(sep, n) for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    subs = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        subs[i, :len(p)] = p
    lengths = np.asarray([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return subs.reshape(x.shape + (width,)), lengths


op("StringSplit", inputs=("X:T1",), outputs=("Y:T1", "Z:T2"),
   types={"T1": STR, "T2": frozenset({dt.int64})},
   attrs=(Attr("delimiter", "string", None), Attr("maxsplit", "int", None)),
   infer=_split_infer, reference=_split_ref, groups={STRING}, tier=Tier.HIGH, onnx_since=20,
   doc="Splits each string on a delimiter (whitespace runs if none), padding the new last axis "
       "with empty strings; also returns the number of pieces per element.")


# -- RegexFullMatch --------------------------------------------------------------------------------
def _compile(pattern: str, where: str):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise GraphError(f"{where}: invalid regular expression {pattern!r}: {e}") from None


def _regex_infer(ctx):
    try:
        _compile(ctx.attrs["pattern"], "pattern")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    return [dt.TensorType(ctx.shape(0), dt.bool_)]


def _regex_ref(x, pattern):
    # Python `re` stands in for RE2: the two agree on the common syntax (classes, groups, \b, \w).
    rx = _compile(pattern, "RegexFullMatch")
    flat = [rx.fullmatch(s) is not None for s in x.reshape(-1)]
    return np.asarray(flat, dtype=np.bool_).reshape(x.shape)


op("RegexFullMatch", inputs=("X:T1",), outputs=("Y:T2",),
   types={"T1": STR, "T2": frozenset({dt.bool_})},
   attrs=(Attr("pattern", "string"),), infer=_regex_infer, reference=_regex_ref,
   groups={STRING}, tier=Tier.HIGH, onnx_since=20,
   doc="True where the whole string matches the regular expression `pattern`.")


# -- TfIdfVectorizer -------------------------------------------------------------------------------
_TFIDF_MODES = ("TF", "IDF", "TFIDF")


def _tfidf_pool(a, where):
    """The pool's n-grams as tuples, in pool order, with their output columns; raises on bad attrs."""
    if (a["pool_strings"] is None) == (a["pool_int64s"] is None):
        raise GraphError(f"{where}: exactly one of pool_strings and pool_int64s must be given")
    pool = list(a["pool_strings"] if a["pool_strings"] is not None else a["pool_int64s"])
    counts, indexes = list(a["ngram_counts"]), list(a["ngram_indexes"])
    lo, hi = a["min_gram_length"], a["max_gram_length"]
    if not 1 <= lo <= hi:
        raise GraphError(f"{where}: need 1 <= min_gram_length <= max_gram_length, got {lo}, {hi}")
    if a["mode"] not in _TFIDF_MODES:
        raise GraphError(f"{where}: mode must be one of {list(_TFIDF_MODES)}, got '{a['mode']}'")
    if a["max_skip_count"] < 0:
        raise GraphError(f"{where}: max_skip_count must be non-negative")
    grams = []
    # ngram_counts[i] is where the (i+1)-grams start in the pool.
    for i, start in enumerate(counts):
        end = counts[i + 1] if i + 1 < len(counts) else len(pool)
        n = i + 1
        if not 0 <= start <= end <= len(pool) or (end - start) % n:
            raise GraphError(f"{where}: ngram_counts {counts} do not split a pool of {len(pool)} "
                             f"entries into whole {n}-grams")
        grams += [tuple(pool[j:j + n]) for j in range(start, end, n)]
    if len(grams) != len(indexes):
        raise GraphError(f"{where}: the pool holds {len(grams)} n-grams but ngram_indexes has "
                         f"{len(indexes)} entries")
    if any(k < 0 for k in indexes):
        raise GraphError(f"{where}: ngram_indexes must be non-negative")
    w = a["weights"]
    if w is not None and len(w) != len(indexes):
        raise GraphError(f"{where}: weights has {len(w)} entries, ngram_indexes {len(indexes)}")
    return grams, indexes


def _tfidf_infer(ctx):
    a = ctx.attrs
    try:
        _, indexes = _tfidf_pool(a, "attributes")
    except GraphError as e:
        raise ctx.error(str(e)) from None
    is_str = ctx.dtype(0) == dt.string
    if is_str != (a["pool_strings"] is not None):
        raise ctx.error(f"input of type {ctx.dtype(0).name} needs "
                        f"{'pool_strings' if is_str else 'pool_int64s'}")
    width = max(indexes, default=-1) + 1
    shape = ctx.shape(0)
    if shape is None:
        return [dt.TensorType(None, dt.float32)]
    if len(shape) not in (1, 2):
        raise ctx.error(f"input must be 1-D [C] or 2-D [N, C], got rank {len(shape)}")
    return [dt.TensorType(shape[:-1] + (width,), dt.float32)]


def _tfidf_ref(x, **a):
    grams, indexes = _tfidf_pool(a, "TfIdfVectorizer")
    column = {g: k for g, k in zip(grams, indexes)}
    weight = dict(zip(grams, a["weights"] or [1.0] * len(grams)))
    lo, hi, skips = a["min_gram_length"], a["max_gram_length"], a["max_skip_count"]
    width = max(indexes, default=-1) + 1
    rows = x.reshape(-1, x.shape[-1]) if x.ndim == 2 else x.reshape(1, -1)
    out = np.zeros((rows.shape[0], width), dtype=np.float64)
    for r, row in enumerate(rows):
        items = [v if isinstance(v, str) else int(v) for v in row]
        counts: dict[tuple, int] = {}
        for n in range(lo, hi + 1):
            # A unigram has no gaps, so skipping would only count it again.
            for gap in range(1, (skips + 2) if n > 1 else 2):
                for start in range(len(items) - (n - 1) * gap):
                    g = tuple(items[start:start + (n - 1) * gap + 1:gap])
                    if g in column:
                        counts[g] = counts.get(g, 0) + 1
        for g, c in counts.items():
            if a["mode"] == "TF":
                v = c
            elif a["mode"] == "IDF":
                v = weight[g]  # presence (count > 0) times the n-gram's weight
            else:
                v = c * weight[g]
            out[r, column[g]] = v
    return out.astype(np.float32).reshape(x.shape[:-1] + (width,))


op("TfIdfVectorizer", inputs=("X:T",), outputs=("Y:T1",),
   types={"T": frozenset({dt.string, dt.int32, dt.int64}), "T1": frozenset({dt.float32})},
   attrs=(Attr("mode", "string"), Attr("min_gram_length", "int"), Attr("max_gram_length", "int"),
          Attr("max_skip_count", "int"), Attr("ngram_counts", "ints"), Attr("ngram_indexes", "ints"),
          Attr("pool_int64s", "ints", None), Attr("pool_strings", "strings", None),
          Attr("weights", "floats", None)),
   infer=_tfidf_infer, reference=_tfidf_ref, groups={STRING}, tier=Tier.HIGH, onnx_since=9,
   doc="Counts the pool's (skip-)n-grams in each row of X (TF), their presence (IDF) or counts "
       "(TFIDF) scaled by weights, as a float vector per row.")
