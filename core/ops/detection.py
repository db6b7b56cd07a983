"""Object-detection ops: RoiAlign, MaxRoiPool, NonMaxSuppression."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from .registry import NN, Attr, Tier, op

FLT = frozenset({dt.float32, dt.float64, dt.float16, dt.bfloat16})
I64 = frozenset({dt.int64})


def _dim(shape, i):
    return shape[i] if shape is not None else None


def _check_rois(ctx, i, width, what):
    s = ctx.shape(i)
    if s is None:
        return None
    if len(s) != 2 or (isinstance(s[1], int) and s[1] != width):
        raise ctx.error(f"{what} shape {list(s)} should be (num_rois, {width})")
    return s[0]


def _check_feature_map(ctx):
    if ctx.rank(0) is not None and ctx.rank(0) != 4:
        raise ctx.error(f"X must be a 4-D (N, C, H, W) feature map, got rank {ctx.rank(0)}")
    return _dim(ctx.shape(0), 1)


# -- RoiAlign --------------------------------------------------------------------------------------

def _roialign_infer(ctx):
    a = ctx.attrs
    if a["mode"] not in ("avg", "max"):
        raise ctx.error(f"mode '{a['mode']}' is not one of avg, max")
    if a["coordinate_transformation_mode"] not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"coordinate_transformation_mode '{a['coordinate_transformation_mode']}' is not "
                        "one of half_pixel, output_half_pixel")
    if a["output_height"] < 1 or a["output_width"] < 1:
        raise ctx.error(f"output size {a['output_height']}x{a['output_width']} must be positive")
    if a["sampling_ratio"] < 0:
        raise ctx.error(f"sampling_ratio {a['sampling_ratio']} must be >= 0")
    c = _check_feature_map(ctx)
    r = _check_rois(ctx, 1, 4, "rois")
    b = ctx.shape(2)
    if b is not None:
        if len(b) != 1:
            raise ctx.error(f"batch_indices shape {list(b)} should be (num_rois,)")
        if isinstance(b[0], int) and isinstance(r, int) and b[0] != r:
            raise ctx.error(f"batch_indices has {b[0]} entries but there are {r} rois")
        r = r if r is not None else b[0]
    return [dt.TensorType((r, c, a["output_height"], a["output_width"]), ctx.dtype(0))]


def _bilinear_taps(pos, size):
    """Per-sample (low, high) indices and weights along one axis, with RoiAlign's border rules.

    Samples more than one pixel outside the map get zero weight; the rest clamp to the border.
    """
    valid = (pos >= -1.0) & (pos <= size)
    p = np.maximum(pos, 0.0)
    low = np.floor(p).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    p = np.where(at_end, low, p)
    frac = p - low
    w = np.stack([1 - frac, frac], -1) * valid[..., None]
    return np.stack([low, high], -1), w


def _roialign_ref(x, rois, batch_indices, *, coordinate_transformation_mode, mode, output_height,
                  output_width, sampling_ratio, spatial_scale):
    n, c, h, w = x.shape
    ph, pw = output_height, output_width
    half = coordinate_transformation_mode == "half_pixel"
    out = np.zeros((rois.shape[0], c, ph, pw))
    xf = x.astype(np.float64)
    for r in range(rois.shape[0]):
        b = int(batch_indices[r])
        if not 0 <= b < n:
            raise ValueError(f"batch index {b} of roi {r} is out of range for batch size {n}")
        shift = 0.5 if half else 0.0
        x1, y1, x2, y2 = (float(v) * spatial_scale - shift for v in rois[r])
        rw, rh = x2 - x1, y2 - y1
        if not half:  # the legacy mode forces malformed rois to 1x1
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / ph))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / pw))
        if gh <= 0 or gw <= 0:
            continue
        ys = y1 + np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh  # (ph, gh)
        xs = x1 + np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw  # (pw, gw)
        yi, wy = _bilinear_taps(ys, h)
        xi, wx = _bilinear_taps(xs, w)
        fm = xf[b]
        if mode == "avg":
            # Separable: pool rows, then columns, with dense (bins x pixels) weight matrices.
            ay = np.zeros((ph, h))
            np.add.at(ay, (np.arange(ph)[:, None, None], yi), wy)
            ax = np.zeros((pw, w))
            np.add.at(ax, (np.arange(pw)[:, None, None], xi), wx)
            out[r] = ay @ fm @ ax.T / (gh * gw)
        else:
            # Each sample takes the largest weighted corner (not the interpolated value), as in
            # ONNX's definition; then the bin takes its largest sample.
            v = fm[:, yi[:, :, :, None, None, None], xi[None, None, None, :, :, :]]
            wt = wy[:, :, :, None, None, None] * wx[None, None, None, :, :, :]
            out[r] = (v * wt).max(axis=(3, 6)).max(axis=(2, 4))
    return out.astype(x.dtype)


def _roialign_from_onnx(ic):
    attrs = dict(ic.attrs)
    if ic.opset < 16:  # before opset 16 the input coordinates were not shifted by half a pixel
        attrs.setdefault("coordinate_transformation_mode", "output_half_pixel")
    return ic.emit("RoiAlign", ic.inputs, attrs)


op("RoiAlign", inputs=("X:T1", "rois:T1", "batch_indices:T2"), outputs=("Y:T1",),
   types={"T1": FLT, "T2": I64},
   attrs=(Attr("coordinate_transformation_mode", "string", "half_pixel"), Attr("mode", "string", "avg"),
          Attr("output_height", "int", 1), Attr("output_width", "int", 1), Attr("sampling_ratio", "int", 0),
          Attr("spatial_scale", "float", 1.0)),
   infer=_roialign_infer, reference=_roialign_ref, groups={NN}, tier=Tier.HIGH, onnx_since=10,
   from_onnx=_roialign_from_onnx,
   doc="Pool each region of interest to a fixed grid of bins, averaging (or maxing) bilinear samples "
       "without quantizing coordinates (Mask R-CNN).")


# -- MaxRoiPool ------------------------------------------------------------------------------------

def _maxroipool_infer(ctx):
    ps = ctx.attrs["pooled_shape"]
    if len(ps) != 2 or any(v < 1 for v in ps):
        raise ctx.error(f"pooled_shape {list(ps)} should be two positive ints (height, width)")
    c = _check_feature_map(ctx)
    r = _check_rois(ctx, 1, 5, "rois")
    return [dt.TensorType((r, c, ps[0], ps[1]), ctx.dtype(0))]


def _round_half_away(v):
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def _maxroipool_ref(x, rois, *, pooled_shape, spatial_scale):
    n, c, h, w = x.shape
    ph, pw = pooled_shape
    out = np.zeros((rois.shape[0], c, ph, pw), x.dtype)
    for r in range(rois.shape[0]):
        b = int(rois[r, 0])
        if not 0 <= b < n:
            raise ValueError(f"batch index {b} of roi {r} is out of range for batch size {n}")
        x1, y1, x2, y2 = (_round_half_away(float(v) * spatial_scale) for v in rois[r, 1:])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            hs = min(max(math.floor(i * rh / ph) + y1, 0), h)
            he = min(max(math.ceil((i + 1) * rh / ph) + y1, 0), h)
            for j in range(pw):
                ws = min(max(math.floor(j * rw / pw) + x1, 0), w)
                we = min(max(math.ceil((j + 1) * rw / pw) + x1, 0), w)
                if he > hs and we > ws:  # empty bins stay 0
                    out[r, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


op("MaxRoiPool", inputs=("X:T", "rois:T"), outputs=("Y:T",), types={"T": FLT},
   attrs=(Attr("pooled_shape", "ints"), Attr("spatial_scale", "float", 1.0)),
   infer=_maxroipool_infer, reference=_maxroipool_ref, groups={NN}, tier=Tier.HIGH, onnx_since=1,
   doc="Max-pool each region of interest [batch, x1, y1, x2, y2] (rounded to pixels) into a fixed "
       "grid of bins (Fast R-CNN).")


# -- NonMaxSuppression -----------------------------------------------------------------------------

def _nms_infer(ctx):
    if ctx.attrs["center_point_box"] not in (0, 1):
        raise ctx.error(f"center_point_box must be 0 or 1, got {ctx.attrs['center_point_box']}")
    b, s = ctx.shape(0), ctx.shape(1)
    if b is not None and (len(b) != 3 or (isinstance(b[2], int) and b[2] != 4)):
        raise ctx.error(f"boxes shape {list(b)} should be (num_batches, num_boxes, 4)")
    if s is not None and len(s) != 3:
        raise ctx.error(f"scores shape {list(s)} should be (num_batches, num_classes, num_boxes)")
    if b is not None and s is not None:
        for i, j, what in ((0, 0, "batches"), (1, 2, "boxes")):
            if isinstance(b[i], int) and isinstance(s[j], int) and b[i] != s[j]:
                raise ctx.error(f"boxes has {b[i]} {what} but scores has {s[j]}")
    for i, what in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"), (4, "score_threshold")):
        if ctx.has(i) and ctx.shape(i) is not None and len(ctx.shape(i)) > 1:
            raise ctx.error(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
    return [dt.TensorType((None, 3), dt.int64)]


def _scalar(v, default, kind=float):
    if v is None or np.asarray(v).size == 0:
        return default
    return kind(np.asarray(v).reshape(-1)[0])


def _corners(boxes, center_point_box):
    """(y_min, x_min, y_max, x_max) arrays, in the boxes' precision."""
    if center_point_box:
        xc, yc, bw, bh = (boxes[..., k] for k in range(4))
        return yc - bh / 2, xc - bw / 2, yc + bh / 2, xc + bw / 2
    y1, x1, y2, x2 = (boxes[..., k] for k in range(4))
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _nms_ref(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None, *,
             center_point_box):
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} do not fit")
    limit = _scalar(max_output_boxes_per_class, 0, int)
    # The overlap test runs in the boxes' precision, like the threshold it is compared against.
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
            kept = _nms_greedy(y1[n][order], x1[n][order], y2[n][order], x2[n][order], area[n][order],
                               limit, iou_t)
            picked.extend((n, c, int(order[p])) for p in kept)
    return np.asarray(picked, np.int64).reshape(-1, 3)


def _nms_greedy(y1, x1, y2, x2, area, limit, iou_t):
    """Positions kept by greedy NMS over candidates already in order (best first): a candidate is
    kept unless a box kept before it overlaps it by IoU > iou_t (`_suppresses`), up to `limit`.

    When a box is kept, it marks every later candidate it suppresses at once; the loop only skips
    the marked ones. Suppression needs a positive height and width of the intersection, so only
    candidates whose y interval meets the kept box's are looked at: those come from a binary
    search in the candidates sorted by y_min (y_min below the kept box's y_max) and the running
    maximum of y_max in that order (above its y_min); x is checked on what is left. These are
    exact comparisons of the same values, implied by the test, and the test itself is the one
    formula: the same marks as testing every candidate against every kept box."""
    m = y1.shape[0]
    kept: list[int] = []
    if limit <= 0 or m == 0:
        return kept
    with np.errstate(invalid="ignore"):
        # Boxes with a NaN corner or no area neither suppress nor are suppressed.
        live = ~(np.isnan(y1) | np.isnan(x1) | np.isnan(y2) | np.isnan(x2)) & (area > 0)
    by_y = np.flatnonzero(live)
    by_y = by_y[np.argsort(y1[by_y], kind="stable")]
    y1_s, x1_s, y2_s, x2_s = y1[by_y], x1[by_y], y2[by_y], x2[by_y]  # in by_y order
    y2_reach = np.maximum.accumulate(y2_s) if by_y.size else y2_s
    gone = np.zeros(m, bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for p in range(m):
            if gone[p]:
                continue
            kept.append(p)
            if len(kept) >= limit:
                break
            if not live[p]:
                continue
            top, bottom = y1[p], y2[p]
            lo = int(y2_reach.searchsorted(top, "right"))  # from here y_max reaches below top
            hi = int(y1_s.searchsorted(bottom, "left"))  # up to here y_min is above bottom
            if lo >= hi:
                continue
            near = (y2_s[lo:hi] > top) & (x1_s[lo:hi] < x2[p]) & (x2_s[lo:hi] > x1[p])
            q = by_y[lo:hi][near]
            q = q[(q > p) & ~gone[q]]
            if q.size:
                gone[q[_suppresses(y1, x1, y2, x2, area, q, p, iou_t)]] = True
    return kept


def _suppresses(y1, x1, y2, x2, area, cand, k, iou_t):
    """Whether kept box k suppresses each candidate box in `cand`: IoU > iou_t, in the boxes'
    precision, with a positive intersection and areas (the candidate's operand first, as in a
    test of one candidate against the kept boxes: IoU is symmetric, and so is every float step)."""
    ih = np.minimum(y2[cand], y2[k]) - np.maximum(y1[cand], y1[k])
    iw = np.minimum(x2[cand], x2[k]) - np.maximum(x1[cand], x1[k])
    inter = ih * iw
    union = area[cand] + area[k] - inter
    overlap = (ih > 0) & (iw > 0) & (area[cand] > 0) & (area[k] > 0) & (union > 0)
    return overlap & (inter / union > iou_t)


FBOX = frozenset({dt.float32, dt.float64, dt.float16})
op("NonMaxSuppression",
   inputs=("boxes:T", "scores:T", "max_output_boxes_per_class:I?", "iou_threshold:T?", "score_threshold:T?"),
   outputs=("selected_indices:I",), types={"T": FBOX, "I": I64},
   attrs=(Attr("center_point_box", "int", 0),), infer=_nms_infer, reference=_nms_ref, groups={NN},
   tier=Tier.HIGH, onnx_since=10,
   doc="Greedy per-batch, per-class selection of the highest-scoring boxes, dropping boxes whose IoU "
       "with a kept box exceeds iou_threshold; returns [batch, class, box] rows.")
