"""The reference NonMaxSuppression (glow.ops.detection._nms_ref): the vectorised greedy selection
against the straightforward one it replaced (kept below as the specification: every candidate
tested against every kept box), on random boxes with many overlaps, tied scores, degenerate and
inverted boxes, NaN and infinite corners, both box encodings, three float types; against
onnxruntime where it is installed; and fast on an SSD-sized call."""

import time

import numpy as np
import pytest
from glow.ops.detection import _corners, _nms_ref, _scalar


def nms_spec(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None, *,
             center_point_box):
    """The implementation before vectorisation, verbatim: the specification."""
    limit = _scalar(max_output_boxes_per_class, 0, int)
    ft = boxes.dtype.type
    iou_t = ft(_scalar(iou_threshold, 0.0))
    score_t = None if score_threshold is None or np.asarray(score_threshold).size == 0 else \
        _scalar(score_threshold, 0.0)
    y1, x1, y2, x2 = _corners(boxes, center_point_box)
    area = (y2 - y1) * (x2 - x1)
    picked = []
    for n in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[n, c]
            cand = np.arange(s.size) if score_t is None else np.nonzero(s > score_t)[0]
            order = cand[np.lexsort((cand, -s[cand].astype(np.float64)))]  # best score first, then index
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if kept:
                    k = np.asarray(kept)
                    ih = np.minimum(y2[n, i], y2[n, k]) - np.maximum(y1[n, i], y1[n, k])
                    iw = np.minimum(x2[n, i], x2[n, k]) - np.maximum(x1[n, i], x1[n, k])
                    inter = ih * iw
                    union = area[n, i] + area[n, k] - inter
                    overlap = (ih > 0) & (iw > 0) & (area[n, i] > 0) & (area[n, k] > 0) & (union > 0)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        if np.any(overlap & (inter / union > iou_t)):
                            continue
                kept.append(int(i))
            picked.extend((n, c, i) for i in kept)
    return np.asarray(picked, np.int64).reshape(-1, 3)


def random_case(rng, dtype, n_boxes, batches=2, classes=3, special=True):
    """Boxes crowded into a small square (many overlaps), some degenerate: zero height or width,
    corners swapped, points, duplicates; with `special`, NaN and infinite corners too. Scores on a
    coarse grid (ties)."""
    cy, cx = rng.uniform(0, 4, (2, batches, n_boxes))
    h, w = rng.uniform(0, 3, (2, batches, n_boxes))
    boxes = np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], -1)
    pick = rng.random((batches, n_boxes))
    boxes[pick < 0.1, 2] = boxes[pick < 0.1, 0]  # zero height
    boxes[(pick >= 0.1) & (pick < 0.15)] = boxes[(pick >= 0.1) & (pick < 0.15)][:, [2, 3, 0, 1]]  # swapped
    boxes[(pick >= 0.15) & (pick < 0.2), 3] = boxes[(pick >= 0.15) & (pick < 0.2), 1]  # zero width
    dup = (pick >= 0.2) & (pick < 0.3)
    boxes[dup] = boxes[:, :1].repeat(n_boxes, 1)[dup]  # copies of the first box
    if special:
        boxes[(pick >= 0.3) & (pick < 0.33), rng.integers(0, 4)] = np.nan
        boxes[(pick >= 0.33) & (pick < 0.36), rng.integers(0, 4)] = np.inf
        boxes[(pick >= 0.36) & (pick < 0.39), rng.integers(0, 4)] = -np.inf
    scores = np.round(rng.random((batches, classes, n_boxes)) * 8) / 8  # ties
    if special:
        scores[rng.random(scores.shape) < 0.03] = np.nan
    return boxes.astype(dtype), scores.astype(dtype)


def agree(boxes, scores, *args, center_point_box=0):
    want = nms_spec(boxes, scores, *args, center_point_box=center_point_box)
    with np.errstate(all="ignore"):
        got = _nms_ref(boxes, scores, *args, center_point_box=center_point_box)
    assert got.dtype == np.int64 and got.shape == want.shape and np.array_equal(got, want), (got, want)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms_matches_the_straightforward_selection(dtype, center_point_box):
    rng = np.random.default_rng(11 + center_point_box)
    with np.errstate(all="ignore"):  # the specification warns on the NaN and infinite corners
        for _trial in range(12):
            boxes, scores = random_case(rng, dtype, int(rng.integers(1, 120)))
            for limit in (0, 1, 5, 10_000):
                for iou in (0.0, 0.3, 0.5, 1.0, -0.5):
                    for score_t in (None, 0.4):
                        args = [np.array([limit], np.int64), np.array([iou], dtype)]
                        if score_t is not None:
                            args.append(np.array([score_t], dtype))
                        agree(boxes, scores, *args, center_point_box=center_point_box)


def test_nms_optional_inputs_and_empty_inputs():
    rng = np.random.default_rng(3)
    boxes, scores = random_case(rng, np.float32, 30, special=False)
    with np.errstate(all="ignore"):
        agree(boxes, scores)  # no limit: nothing selected
        agree(boxes, scores, np.array([4], np.int64))  # IoU threshold 0
        agree(boxes, scores, np.array([4], np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32))
        agree(np.zeros((1, 0, 4), np.float32), np.zeros((1, 2, 0), np.float32), np.array([3]), np.float32(0.5))
        agree(np.zeros((0, 5, 4), np.float32), np.zeros((0, 2, 5), np.float32), np.array([3]), np.float32(0.5))


def test_nms_many_boxes_in_clusters():
    """SSD-like: boxes crowded around a few objects per class, classes offset apart (torchvision's
    batched NMS), one call."""
    boxes, scores = clustered(3000)
    agree(boxes, scores, np.array([2**62], np.int64), np.float32(0.5))
    agree(boxes, scores, np.array([50], np.int64), np.float32(0.45), np.float32(0.3))


def clustered(n, groups=90, objects=4, seed=1):
    rng = np.random.default_rng(seed)
    g, o = rng.integers(0, groups, n), rng.integers(0, objects, n)
    centers, sizes = rng.random((groups, objects, 2)), rng.uniform(0.05, 0.5, (groups, objects, 2))
    c = centers[g, o] + rng.normal(0, 0.03, (n, 2))
    s = sizes[g, o] * rng.uniform(0.7, 1.3, (n, 2))
    boxes = np.concatenate([c - s / 2, c + s / 2], -1) + (g * 2.0)[:, None]
    return boxes[None].astype(np.float32), rng.random(n).astype(np.float32)[None, None]


def test_nms_ssd_sized_call_is_fast():
    """27,000 boxes in one call, as a torchvision SSD export makes it: 5.8 s before vectorising
    (every candidate against every kept box in Python), 0.16 s after, on the 2-core machine."""
    boxes, scores = clustered(27_000)
    t0 = time.perf_counter()
    out = _nms_ref(boxes, scores, np.array([2**62], np.int64), np.float32(0.5), center_point_box=0)
    elapsed = time.perf_counter() - t0
    assert len(out) > 1000
    assert elapsed < 2.0, f"{elapsed:.2f} s"


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms_matches_onnxruntime(center_point_box):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    model = helper.make_model(helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["o"], center_point_box=center_point_box)],
        "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("b", "s")]
        + [helper.make_tensor_value_info("m", TensorProto.INT64, [1]),
           helper.make_tensor_value_info("i", TensorProto.FLOAT, [1]),
           helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("o", TensorProto.INT64, None)]), opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    for trial in range(20):
        # ties in scores are left out: which of two equal scores onnxruntime takes first is its own
        boxes, _ = random_case(rng, np.float32, int(rng.integers(1, 200)), special=False)
        scores = rng.permutation(np.arange(boxes.shape[1] * 6, dtype=np.float32)).reshape(2, 3, -1) / (
            boxes.shape[1] * 6)
        for limit, iou, score_t in ((10_000, 0.5, 0.0), (7, 0.3, 0.2), (3, 0.0, 0.5)):
            feeds = {"b": boxes, "s": scores, "m": np.array([limit], np.int64),
                     "i": np.array([iou], np.float32), "t": np.array([score_t], np.float32)}
            want = sess.run(None, feeds)[0]
            got = agree(boxes, scores, feeds["m"], feeds["i"], feeds["t"], center_point_box=center_point_box)
            assert np.array_equal(got, want), (trial, limit, iou, score_t)
