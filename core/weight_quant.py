"""Weight-only block quantization (`glow quantize MODEL --weights int4|int8`, `glow.quantize_weights`):
every MatMul whose B is a constant 2-D float matrix becomes onnxruntime's MatMulNBits (glow.ops.nbits),
its weight stored as 4- or 8-bit codes in blocks of `block_size` along K with a scale per block
(and a zero point per block unless symmetric), and every Gather of an embedding table
GatherBlockQuantized (an embedding tied to the LM head reads the head's own codes): what
onnxruntime-genai's builder writes for `-p int4`, so onnxruntime, onnxruntime-genai and glow all run
the result. No calibration data is needed.

Rounding is to nearest (the place where GPTQ or AWQ would choose codes later):
* asymmetric (default): the block's range widened to hold 0, scale = (max - min) / (2^bits - 1),
  zero point = round(-min / scale), codes = clip(round(w / scale) + zero point);
* symmetric (`symmetric=True`): scale = max|w| / (2^(bits-1) - 1), codes = round(w / scale) +
  2^(bits-1), no zero-point tensor (the op's default is that midpoint).
A block of zeros gets scale 1 (its codes dequantize to exactly 0). K need not be a multiple of the
block: the last block is padded with zero weights.

A folder (onnxruntime-genai's, with genai_config.json; an optimum export) is quantized file by
file: every .onnx in it, the other files (configs, tokenizer) copied along, the result written to a
new folder that appears whole or not at all.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile

import numpy as np

from .errors import InputError

MS = "com.microsoft"
LARGE = 1 << 26  # from this size the tensors go to MODEL.onnx.data, which glow and onnxruntime map, not read


def block_quantize(w: np.ndarray, bits: int, block_size: int, symmetric: bool):
    """W [K, N] -> (codes [N, blocks, block_size] uint8, scales [N, blocks], zero points [N, blocks]
    uint8 or None) as the module docstring says."""
    k, n = w.shape
    kb = -(-k // block_size)
    x = np.zeros((n, kb * block_size), np.float32)
    x[:, :k] = np.asarray(w, np.float32).T
    x = x.reshape(n, kb, block_size)
    top = (1 << bits) - 1
    if symmetric:
        mid = 1 << (bits - 1)
        scale = np.abs(x).max(axis=-1) / np.float32(mid - 1)
        scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
        codes = np.clip(np.rint(x / scale[..., None]) + mid, 0, top).astype(np.uint8)
        return codes, scale, None
    lo = np.minimum(x.min(axis=-1), 0.0)
    hi = np.maximum(x.max(axis=-1), 0.0)
    scale = ((hi - lo) / np.float32(top)).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    zp = np.clip(np.rint(-lo / scale), 0, top).astype(np.uint8)
    codes = np.clip(np.rint(x / scale[..., None]) + zp[..., None], 0, top).astype(np.uint8)
    return codes, scale, zp


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes along the last axis packed 8 / bits to a byte, low bits first (odd counts padded)."""
    per = 8 // bits
    if per == 1:
        return np.ascontiguousarray(codes, np.uint8)
    pad = (-codes.shape[-1]) % per
    if pad:
        codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), np.uint8)], axis=-1)
    c = codes.reshape(codes.shape[:-1] + (-1, per)).astype(np.uint8)
    out = np.zeros(c.shape[:-1], np.uint8)
    for i in range(per):
        out |= c[..., i] << np.uint8(bits * i)
    return out


def _check(bits: int, block_size: int, accuracy_level: int):
    if bits not in (4, 8):
        raise InputError(f"--weights int{bits}: glow quantizes weights to int4 or int8")
    if not isinstance(block_size, int) or block_size < 16 or block_size & (block_size - 1):
        raise InputError(f"block size {block_size} must be a power of 2 of at least 16 (16, 32, 64, 128, ...)")
    if accuracy_level not in (0, 1, 2, 3, 4):
        raise InputError(f"accuracy level {accuracy_level} must be 0..4 (4: int8 activations)")


def _skipped(patterns, node, weight: str) -> bool:
    """A pattern names a node, its weight or its output (shell wildcards; a plain word matches a part of
    the name); `lm_head` also matches the MatMul that makes `logits`, `embeddings` is accepted for the
    embedding tables (Gathers, never quantized here)."""
    names = [node.name, weight, *node.output]
    for p in patterns:
        if p == "lm_head" and "logits" in node.output:
            return True
        if any(fnmatch.fnmatchcase(n, p) or (not any(ch in p for ch in "*?[") and p in n) for n in names):
            return True
    return False


def quantize_weights(model, *, bits: int = 4, block_size: int = 32, symmetric: bool = False, skip=(),
                     accuracy_level: int = 4):
    """The model (an onnx.ModelProto, or a path) with its constant-weight MatMuls as MatMulNBits.
    Returns (model, number of MatMuls quantized)."""
    import onnx
    from onnx import helper, numpy_helper

    _check(bits, block_size, accuracy_level)
    if isinstance(model, (str, os.PathLike)):
        model = _load(str(model))
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    float_types = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16}
    made: dict[str, tuple[str, ...]] = {}
    count = 0
    nodes = []
    for node in g.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and node.domain in ("", "ai.onnx") else None
        if w is None or len(w.dims) != 2 or w.data_type not in float_types or _skipped(skip, node, w.name):
            nodes.append(node)
            continue
        k, n = int(w.dims[0]), int(w.dims[1])
        if w.name not in made:
            made[w.name] = _add_blocks(g, numpy_helper.to_array(w), w.name.replace("/", "_"),
                                       float_types[w.data_type], bits, block_size, symmetric)
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], *made[w.name]], list(node.output),
                                      name=(node.name or f"matmul{count}") + f"_Q{bits}", domain=MS, K=k, N=n,
                                      bits=bits, block_size=block_size, accuracy_level=accuracy_level))
        count += 1
    if not count:
        return model, 0
    replaced = set(made)
    nodes = _embeddings(nodes, inits, made, g, bits, block_size, symmetric, skip, float_types, replaced)
    del g.node[:]
    g.node.extend(nodes)
    used = {i for nd in g.node for i in nd.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used or t.name not in replaced]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain == MS for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS, 1))
    return model, count


def _add_blocks(g, w, base: str, dtype, bits: int, block_size: int, symmetric: bool) -> tuple[str, ...]:
    """W [K, N] block-quantized into new initializers of graph g: (codes, scales[, zero points]) names,
    MatMulNBits' inputs B, scales and zero_points."""
    from onnx import numpy_helper

    codes, scales, zp = block_quantize(w, bits, block_size, symmetric)
    names = [f"{base}_Q{bits}", f"{base}_scales"]
    g.initializer.extend([numpy_helper.from_array(pack_bits(codes, bits), names[0]),
                          numpy_helper.from_array(scales.astype(dtype), names[1])])
    if zp is not None:
        names.append(f"{base}_zero_points")
        g.initializer.append(numpy_helper.from_array(pack_bits(zp, bits), names[2]))
    return tuple(names)


def _embeddings(nodes, inits, made, g, bits, block_size, symmetric, skip, float_types, replaced):
    """Gathers of embedding tables as GatherBlockQuantized (rows quantized along the hidden dim), as
    the builder writes them: a table that is the transpose of a weight quantized above (an embedding
    tied to the LM head: Gather(Transpose(W))) reads W's own codes through a Reshape, so the model
    holds them once; another constant table is quantized here. Skipped for `embeddings` in `skip`,
    and where the hidden size is not a multiple of the block (the op's rows are whole blocks)."""
    from onnx import helper, numpy_helper

    if "embeddings" in skip:
        return nodes
    producer = {o: nd for nd in nodes for o in nd.output}
    out, orphans = [], []
    for nd in nodes:
        src = nd.input[0] if nd.op_type == "Gather" and nd.domain in ("", "ai.onnx") and nd.input else None
        axis = next((a.i for a in nd.attribute if a.name == "axis"), 0)
        t = producer.get(src)
        tied = (t is not None and t.op_type == "Transpose" and t.input[0] in made and t.input[0] in inits
                and [list(a.ints) for a in t.attribute if a.name == "perm"] in ([[1, 0]], []))
        table = inits.get(src)
        if src is None or axis != 0 or _skipped(skip, nd, src):
            out.append(nd)
            continue
        if tied:
            w = inits[t.input[0]]
            hidden, vocab = int(w.dims[0]), int(w.dims[1])
            names = made[t.input[0]]
        elif table is not None and len(table.dims) == 2 and table.data_type in float_types:
            vocab, hidden = int(table.dims[0]), int(table.dims[1])
            names = None
        else:
            out.append(nd)
            continue
        if hidden % block_size:
            out.append(nd)
            continue
        base = (t.input[0] if tied else src).replace("/", "_")
        if tied:
            orphans.append(t)
        else:
            replaced.add(src)
        if names is None:  # rows quantized along the hidden size: the transpose's columns
            names = _add_blocks(g, numpy_helper.to_array(table).T, base, float_types[table.data_type], bits,
                                block_size, symmetric)
        rows = f"{base}_Q{bits}_rows"  # [vocab, blocks, bytes] seen as [vocab, hidden * bits / 8]
        if rows + "_shape" not in {i.name for i in g.initializer}:  # one Reshape however many Gathers
            g.initializer.append(numpy_helper.from_array(np.array([vocab, hidden * bits // 8], np.int64),
                                                         rows + "_shape"))
            out.append(helper.make_node("Reshape", [names[0], rows + "_shape"], [rows], name=rows + "/Reshape"))
        ins = [rows, nd.input[1], names[1]] + ([names[2]] if len(names) > 2 else [])
        out.append(helper.make_node("GatherBlockQuantized", ins, list(nd.output), name=(nd.name or rows) + "_Q",
                                    domain=MS, bits=bits, block_size=block_size, gather_axis=0, quantize_axis=1))
    # a tied table's Transpose read only by the Gather replaced goes too (else the float weight stays)
    used = {i for nd in out for i in nd.input} | {o.name for o in g.output}
    return [nd for nd in out if not (any(nd is t for t in orphans) and not any(o in used for o in nd.output))]


def _load(path: str):
    import onnx

    if not os.path.isfile(path):
        raise InputError(f"{path}: no such model file")
    try:
        return onnx.load(path)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds for a bad file
        raise InputError(f"{path}: not a readable ONNX model: {str(e).splitlines()[0][:200]}") from None


def _save(model, path: str):
    import onnx

    big = model.ByteSize() > LARGE if _fits_protobuf(model) else True
    if big:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(path) + ".data", size_threshold=1024)
    else:
        onnx.save(model, path)


def _fits_protobuf(model) -> bool:
    try:
        model.ByteSize()
        return True
    except Exception:  # noqa: BLE001 - past 2 GiB protobuf cannot even size it
        return False


def _usual_modes(folder: str):
    """The folder and its files as a plain mkdir and open would make them (mkdtemp's are private)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
    for f in os.listdir(folder):
        os.chmod(os.path.join(folder, f), 0o666 & ~mask)


def _external_files(path: str) -> set[str]:
    import onnx

    try:
        m = onnx.load(path, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds for a bad file
        raise InputError(f"{path}: not a readable ONNX model: {str(e).splitlines()[0][:200]}") from None
    out = set()
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                out.add(os.path.normpath(e.value))
    return out


def quantize_weights_to(src: str, out: str, **kw) -> dict:
    """Quantize a model file or a model folder (module docstring) into `out`; returns
    {file: MatMuls quantized}. Nothing is left at `out` unless the whole of it was written."""
    src = str(src)
    if os.path.abspath(out) == os.path.abspath(src):
        raise InputError(f"{out}: the output must not be the input")
    if os.path.isdir(src) and os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise InputError(f"{out}: the output folder exists and is not empty")
    if os.path.isdir(src):
        onnx_files = sorted(f for f in os.listdir(src) if f.endswith(".onnx"))
        if not onnx_files:
            raise InputError(f"{src}: the folder holds no .onnx model")
        data = set().union(*(_external_files(os.path.join(src, f)) for f in onnx_files))
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise InputError(f"{out}: folder {parent} does not exist")
        tmp = tempfile.mkdtemp(prefix=".glow-quantize-", dir=parent)
        try:
            counts = {}
            for f in os.listdir(src):
                p = os.path.join(src, f)
                if f in onnx_files or f in data or not os.path.isfile(p):
                    continue
                shutil.copy2(p, os.path.join(tmp, f))
            for f in onnx_files:
                model, n = quantize_weights(os.path.join(src, f), **kw)
                counts[f] = n
                _save(model, os.path.join(tmp, f))
            if not any(counts.values()):
                raise InputError(f"{src}: no MatMul with a constant 2-D float weight to quantize")
            _usual_modes(tmp)
            if os.path.isdir(out):
                os.rmdir(out)  # empty (checked above)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return counts
    model, n = quantize_weights(src, **kw)
    if not n:
        raise InputError(f"{src}: no MatMul with a constant 2-D float weight to quantize")
    from .fileio import check_writable

    check_writable(out, "quantized model")
    parent = os.path.dirname(os.path.abspath(out))
    tmp = tempfile.mkdtemp(prefix=".glow-quantize-", dir=parent)
    try:
        _save(model, os.path.join(tmp, os.path.basename(out)))
        _usual_modes(tmp)
        for f in os.listdir(tmp):  # the model, and its .data file when it has one
            os.replace(os.path.join(tmp, f), os.path.join(parent, f))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {os.path.basename(src): n}


__all__ = ["quantize_weights", "quantize_weights_to", "block_quantize", "pack_bits"]
