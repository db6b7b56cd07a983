"""Decision-tree ensembles for ml.py: one evaluator for TreeEnsemble and its deprecated
TreeEnsembleRegressor / TreeEnsembleClassifier forms, and the scores' post-transforms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import GraphError
from .registry import Attr

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
_LEGACY_MODES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT,
                 "BRANCH_EQ": EQ, "BRANCH_NEQ": NEQ, "BRANCH_MEMBER": MEMBER}
AVERAGE, SUM, MIN, MAX = range(4)
TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")

TREE_ATTRS = (
    Attr("tree_roots", "ints"), Attr("nodes_modes", "tensor"), Attr("nodes_featureids", "ints"),
    Attr("nodes_splits", "tensor"), Attr("nodes_truenodeids", "ints"), Attr("nodes_trueleafs", "ints"),
    Attr("nodes_falsenodeids", "ints"), Attr("nodes_falseleafs", "ints"),
    Attr("leaf_targetids", "ints"), Attr("leaf_weights", "tensor"), Attr("n_targets", "int", None),
    Attr("aggregate_function", "int", SUM), Attr("post_transform", "int", 0),
    Attr("nodes_missing_value_tracks_true", "ints", None), Attr("nodes_hitrates", "tensor", None),
    Attr("membership_values", "tensor", None),
)

LEGACY_TREE_ATTRS = (
    Attr("nodes_treeids", "ints", None), Attr("nodes_nodeids", "ints", None),
    Attr("nodes_featureids", "ints", None), Attr("nodes_modes", "strings", None),
    Attr("nodes_values", "floats", None), Attr("nodes_values_as_tensor", "tensor", None),
    Attr("nodes_truenodeids", "ints", None), Attr("nodes_falsenodeids", "ints", None),
    Attr("nodes_missing_value_tracks_true", "ints", None), Attr("nodes_hitrates", "floats", None),
    Attr("nodes_hitrates_as_tensor", "tensor", None), Attr("base_values", "floats", None),
    Attr("base_values_as_tensor", "tensor", None), Attr("post_transform", "string", "NONE"),
)


@dataclass
class Forest:
    """Interior nodes (parallel lists), leaves (lists of (target, weight)), and tree roots.

    A branch target is (index, is_leaf); a root may be a leaf (a one-leaf tree).
    """

    modes: list
    features: list
    splits: list
    sets: list  # frozenset of members for MEMBER nodes, else None
    true_next: list
    false_next: list
    missing_true: list
    leaves: list
    roots: list
    n_targets: int
    agg: int = SUM
    base: np.ndarray | None = None

    # -- construction --------------------------------------------------------------------------
    @staticmethod
    def from_attrs(a, where) -> Forest:
        """The TreeEnsemble (ai.onnx.ml v5) encoding."""
        modes = [int(m) for m in np.asarray(a["nodes_modes"]).reshape(-1)]
        splits = [float(s) for s in np.asarray(a["nodes_splits"], np.float64).reshape(-1)]
        n = len(modes)
        lists = {k: a[k] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_trueleafs",
                                   "nodes_falsenodeids", "nodes_falseleafs")}
        lists["nodes_splits"] = splits
        if a["nodes_missing_value_tracks_true"] is not None:
            lists["nodes_missing_value_tracks_true"] = a["nodes_missing_value_tracks_true"]
        for k, v in lists.items():
            if len(v) != n:
                raise GraphError(f"{where}: {k} has {len(v)} entries but nodes_modes has {n}")
        weights = [float(w) for w in np.asarray(a["leaf_weights"], np.float64).reshape(-1)]
        targets = list(a["leaf_targetids"])
        if len(weights) != len(targets):
            raise GraphError(f"{where}: leaf_weights has {len(weights)} entries but leaf_targetids "
                             f"has {len(targets)}")
        n_targets = a["n_targets"] if a["n_targets"] is not None else max(targets, default=-1) + 1
        if a["aggregate_function"] not in range(4):
            raise GraphError(f"{where}: aggregate_function must be 0..3, got {a['aggregate_function']}")
        if a["post_transform"] not in range(5):
            raise GraphError(f"{where}: post_transform must be 0..4, got {a['post_transform']}")
        true_next = list(zip(a["nodes_truenodeids"], map(bool, a["nodes_trueleafs"])))
        false_next = list(zip(a["nodes_falsenodeids"], map(bool, a["nodes_falseleafs"])))
        f = Forest(modes, list(a["nodes_featureids"]), splits, _member_sets(modes, a, where),
                   true_next, false_next,
                   [bool(m) for m in (a["nodes_missing_value_tracks_true"] or [0] * n)],
                   [[(t, w)] for t, w in zip(targets, weights)],
                   [(r, False) for r in a["tree_roots"]], n_targets, a["aggregate_function"])
        f.check(where)
        return f

    def check(self, where):
        n, nl = len(self.modes), len(self.leaves)
        for m in self.modes:
            if m not in range(7):
                raise GraphError(f"{where}: node mode {m} is not one of 0..6")
        for j, leaf in self.true_next + self.false_next + self.roots:
            if not 0 <= j < (nl if leaf else n):
                raise GraphError(f"{where}: {'leaf' if leaf else 'node'} index {j} out of range")
        for leaf in self.leaves:
            for t, _ in leaf:
                if not 0 <= t < self.n_targets:
                    raise GraphError(f"{where}: target id {t} out of range for {self.n_targets} "
                                     "targets")
        if self.base is not None and self.base.size not in (0, self.n_targets):
            raise GraphError(f"{where}: {self.base.size} base values for {self.n_targets} targets")

    def targets_used(self) -> list[int]:
        return sorted({t for leaf in self.leaves for t, _ in leaf})

    # -- evaluation ----------------------------------------------------------------------------
    def _leaf(self, row, root) -> int:
        j, leaf = root
        steps = 0
        while not leaf:
            x = float(row[self.features[j]])
            j, leaf = self.true_next[j] if self._test(j, x) else self.false_next[j]
            steps += 1
            if steps > len(self.modes):
                raise GraphError("tree ensemble: the nodes form a cycle")
        return j

    def _test(self, j, x) -> bool:
        if math.isnan(x) and self.missing_true[j]:
            return True
        m, s = self.modes[j], self.splits[j]
        if m == LEQ:
            return x <= s
        if m == LT:
            return x < s
        if m == GTE:
            return x >= s
        if m == GT:
            return x > s
        if m == EQ:
            return x == s
        if m == NEQ:
            return x != s
        return x in self.sets[j]

    def aggregate(self, x: np.ndarray) -> np.ndarray:
        """[N, F] -> [N, n_targets] float64 scores, before the post-transform."""
        if x.ndim != 2:
            raise GraphError(f"tree ensemble: X must be 2-D [N, F], got shape {list(x.shape)}")
        used = max(self.features, default=-1)
        if used >= x.shape[1]:
            raise GraphError(f"tree ensemble: feature {used} out of range for {x.shape[1]} features")
        out = np.zeros((x.shape[0], self.n_targets))
        for r, row in enumerate(x):
            hits: list[list[float]] = [[] for _ in range(self.n_targets)]
            for root in self.roots:
                for t, w in self.leaves[self._leaf(row, root)]:
                    hits[t].append(w)
            for t, ws in enumerate(hits):
                if not ws:
                    continue  # a target no leaf reached scores 0
                if self.agg == SUM:
                    out[r, t] = math.fsum(ws)
                elif self.agg == AVERAGE:
                    out[r, t] = math.fsum(ws) / len(self.roots)
                elif self.agg == MIN:
                    out[r, t] = min(ws)
                else:
                    out[r, t] = max(ws)
        if self.base is not None and self.base.size:
            out += self.base
        return out


def _member_sets(modes, a, where):
    """Split membership_values at its NaN delimiters, one set per MEMBER node in order."""
    n_member = sum(m == MEMBER for m in modes)
    if not n_member:
        return [None] * len(modes)
    if a["membership_values"] is None:
        raise GraphError(f"{where}: BRANCH_MEMBER nodes need membership_values")
    groups, cur = [], []
    for v in np.asarray(a["membership_values"], np.float64).reshape(-1).tolist():
        if math.isnan(v):
            groups.append(frozenset(cur))
            cur = []
        else:
            cur.append(v)
    if cur:
        groups.append(frozenset(cur))
    if len(groups) != n_member:
        raise GraphError(f"{where}: membership_values holds {len(groups)} sets for {n_member} "
                         "BRANCH_MEMBER nodes")
    it = iter(groups)
    return [next(it) if m == MEMBER else None for m in modes]


def _tensor_or_list(a, name):
    t = a.get(f"{name}_as_tensor")
    if t is not None:
        return [float(v) for v in np.asarray(t, np.float64).reshape(-1)]
    v = a.get(name)
    return None if v is None else [float(e) for e in v]


def legacy_forest(a, prefix, where, n_targets=None) -> Forest:
    """The deprecated TreeEnsembleRegressor/Classifier encoding (node ids per tree, LEAF modes,
    `{prefix}_*` votes), converted to a Forest."""
    tree_ids, node_ids = a["nodes_treeids"] or (), a["nodes_nodeids"] or ()
    modes_s = a["nodes_modes"] or ()
    values = _tensor_or_list(a, "nodes_values") or [0.0] * len(modes_s)
    n = len(modes_s)
    if not n:
        raise GraphError(f"{where}: the ensemble has no nodes (nodes_modes is empty)")
    for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_truenodeids",
              "nodes_falsenodeids"):
        if len(a[k] or ()) != n:
            raise GraphError(f"{where}: {k} has {len(a[k] or ())} entries but nodes_modes has {n}")
    if len(values) != n:
        raise GraphError(f"{where}: nodes_values has {len(values)} entries but nodes_modes has {n}")
    if a["post_transform"] not in TRANSFORMS:
        raise GraphError(f"{where}: post_transform must be one of {list(TRANSFORMS)}")
    agg_name = a.get("aggregate_function", "SUM")
    aggs = ("AVERAGE", "SUM", "MIN", "MAX")
    if agg_name not in aggs:
        raise GraphError(f"{where}: aggregate_function must be one of {list(aggs)}")
    for m in modes_s:
        if m != "LEAF" and m not in _LEGACY_MODES:
            raise GraphError(f"{where}: unknown node mode '{m}'")
    key = {(t, i): j for j, (t, i) in enumerate(zip(tree_ids, node_ids))}
    if len(key) != n:
        raise GraphError(f"{where}: (tree id, node id) pairs are not unique")
    # Leaves get their own numbering; interior nodes keep their position.
    leaf_of = {j: k for k, j in enumerate(j for j in range(n) if modes_s[j] == "LEAF")}
    leaves: list[list] = [[] for _ in leaf_of]
    vt, vn, vi = (a[f"{prefix}_{s}"] or () for s in ("treeids", "nodeids", "ids"))
    vw = _tensor_or_list(a, f"{prefix}_weights") or []
    if not len(vt) == len(vn) == len(vi) == len(vw):
        raise GraphError(f"{where}: the {prefix}_* attributes differ in length")
    for t, i, c, w in zip(vt, vn, vi, vw):
        j = key.get((t, i))
        if j is None or j not in leaf_of:
            raise GraphError(f"{where}: {prefix} weight refers to tree {t} node {i}, which is not a "
                             "leaf")
        leaves[leaf_of[j]].append((c, w))

    def ref(tree, node_id):
        j = key.get((tree, node_id))
        if j is None:
            raise GraphError(f"{where}: tree {tree} has no node {node_id}")
        return (leaf_of[j], True) if j in leaf_of else (j, False)

    children = {(tree_ids[j], c) for j in range(n) if modes_s[j] != "LEAF"
                for c in (a["nodes_truenodeids"][j], a["nodes_falsenodeids"][j])}
    roots = [ref(tree_ids[j], node_ids[j]) for j in range(n)
             if (tree_ids[j], node_ids[j]) not in children]
    modes = [_LEGACY_MODES.get(m, LEQ) for m in modes_s]
    interior = [modes_s[j] != "LEAF" for j in range(n)]
    true_next = [ref(tree_ids[j], a["nodes_truenodeids"][j]) if interior[j] else (0, True)
                 for j in range(n)]
    false_next = [ref(tree_ids[j], a["nodes_falsenodeids"][j]) if interior[j] else (0, True)
                  for j in range(n)]
    if n_targets is None:
        n_targets = a.get("n_targets")
        if n_targets is None:
            n_targets = max((c for leaf in leaves for c, _ in leaf), default=-1) + 1
    base = _tensor_or_list(a, "base_values")
    f = Forest(modes, list(a["nodes_featureids"] or ()), values, [None] * n, true_next, false_next,
               [bool(m) for m in (a["nodes_missing_value_tracks_true"] or [0] * n)], leaves,
               roots, n_targets, aggs.index(agg_name),
               None if base is None else np.asarray(base, np.float64))
    f.check(where)
    return f


# -- post-transforms ---------------------------------------------------------------------------
def _erfinv(y: np.ndarray) -> np.ndarray:
    """Inverse error function: a rational first guess refined by Newton steps on math.erf."""
    out = np.empty_like(y, dtype=np.float64)
    for i, v in enumerate(y.reshape(-1).tolist()):
        if v <= -1 or v >= 1:
            out.reshape(-1)[i] = math.copysign(math.inf, v) if abs(v) == 1 else math.nan
            continue
        a = 0.147  # Winitzki's approximation, good to ~1e-3, as the starting point
        ln = math.log(1 - v * v)
        t = 2 / (math.pi * a) + ln / 2
        x = math.copysign(math.sqrt(math.sqrt(t * t - ln / a) - t), v)
        for _ in range(4):
            x -= (math.erf(x) - v) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        out.reshape(-1)[i] = x
    return out


def post_transform(scores: np.ndarray, kind) -> np.ndarray:
    """Apply a post-transform (index into TRANSFORMS, or its name) row-wise to [N, K] scores."""
    k = TRANSFORMS.index(kind) if isinstance(kind, str) else kind
    s = np.asarray(scores, np.float64)
    if k == 1:
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if k == 2:
        return 1.0 / (1.0 + np.exp(-s))
    if k == 3:  # softmax over the non-zero scores; zeros stay zero
        nz = s != 0
        m = np.where(nz, s, -np.inf).max(axis=-1, keepdims=True)
        e = np.where(nz, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    if k == 4:
        return math.sqrt(2) * _erfinv(2 * s - 1)
    return s
