"""A QDQ ResNet-50 from onnxruntime's quantizer: glow cpu int8 against onnxruntime int8, OpenVINO and glow fp32.

    python benchmarks/int8_resnet.py                          # 1 thread, host ISA
    GLOW_CPU_ISA=avx2 python benchmarks/int8_resnet.py --no-write     # glow as on an AVX2 host
    GLOW_CPU_ISA=avx2 python benchmarks/int8_resnet.py --reduce-range  # 7-bit weights (AVX2 advice)

The fp32 model is the onnx wheel's light ResNet-50 with its constant (0.02) weights replaced by
random ones (He-scaled convolutions, batch norms near identity), upgraded to opset 13, then
quantized by onnxruntime.quantization.quantize_static in the QDQ format (per-channel int8 weights,
uint8 activations, min-max calibration on 4 random 224 x 224 images). glow runs the int8 file
(its DQ -> Conv -> Q islands become QLinearConv, on the cpu integer convolution) and the fp32
file; onnxruntime runs both files. Each pair is interleaved in one process on a new random image
every call (glow and onnxruntime alternate which runs first), then glow and OpenVINO (where the
openvino package is installed; at its default precision, which runs a QDQ model's convolutions in
int8 and, on AVX512-BF16 and AMX hosts, an fp32 model in bf16) the same way; the table shows the
median of the rounds' medians. $GLOW_CPU_ISA makes glow lower and compile as on a host of that instruction-set
level (both of glow's runs; onnxruntime keeps the host's). `--reduce-range` quantizes the weights
to 7 bits (quantize_static's reduce_range, onnxruntime's advice for AVX2 without VNNI), which AVX2's
`vpmaddubsw` multiplies exactly. `--preprocess` runs onnxruntime's quant_pre_process on the fp32
model first, the step its quantization guide asks for: batch norms folded into the convolutions,
so the int8 model has no float BatchNormalization between a DequantizeLinear and a QuantizeLinear
(both engines then run the folded fp32 file too). Results go to
benchmarks/results-int8-resnet[-ISA][-7bit][-pre].json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, interleaved, ort_session, write_results  # noqa: E402 (benchmarks/host.py, next to this script)

SHAPE = (1, 3, 224, 224)


def random_resnet50(rng):
    """The light ResNet-50 with random weights (its ConstantOfShape weights become initializers)."""
    import numpy as np
    import onnx
    from glow.bench import resolve_model
    from onnx import numpy_helper as nh
    from onnx import version_converter

    m = onnx.load(resolve_model("resnet50")[0])
    shapes = {i.name: nh.to_array(i) for i in m.graph.initializer}
    keep = []
    for node in m.graph.node:
        if node.op_type != "ConstantOfShape":
            keep.append(node)
            continue
        name, shape = node.output[0], tuple(int(d) for d in shapes[node.input[0]])
        if name.endswith("_riv_0"):  # batch-norm variance
            v = rng.uniform(0.5, 1.5, shape)
        elif name.endswith("_s_0"):  # batch-norm scale
            v = rng.uniform(0.5, 1.0, shape)
        elif len(shape) >= 2:  # conv / fc weights
            v = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
        else:  # biases, means
            v = rng.standard_normal(shape) * 0.1
        m.graph.initializer.append(nh.from_array(v.astype(np.float32), name))
    del m.graph.node[:]
    m.graph.node.extend(keep)
    used = {i for n in keep for i in n.input}
    kept = [i for i in m.graph.initializer if i.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    inits = {i.name for i in kept}
    feeds = [i for i in m.graph.input if i.name in used and i.name not in inits]  # the image alone
    del m.graph.input[:]
    m.graph.input.extend(feeds)
    m.ir_version = 7  # initializers need not be graph inputs (the light model is IR 3)
    return version_converter.convert_version(m, 13)


def quantize(fp32_path, int8_path, rng, reduce_range=False):
    import logging

    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    images = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"gpu_0/data_0": x} for x in images)

        def get_next(self):
            return next(self.it, None)

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(fp32_path, int8_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range)


def measure(path, threads, rounds, calls, rng) -> dict:
    import glow
    import numpy as np

    sess = ort_session(path, threads)
    name = sess.get_inputs()[0].name
    exe = glow.compile(path, backend="cpu", threads=threads)
    gm, om, (got, want) = interleaved(exe, sess, lambda: {name: rng.standard_normal(SHAPE).astype("float32")},
                                      rounds, calls)
    (got,), (want,) = got.values(), want
    row = {"glow_ms": gm * 1e3, "ort_ms": om * 1e3, "ratio": gm / om,
           "max_abs_diff": float(np.abs(got.astype("float64") - want).max())}
    ov = _openvino(path, threads)
    if ov is not None:  # OpenVINO runs a QDQ model in int8 (its low-precision transformations)
        gm, vm, _ = interleaved(exe, ov, lambda: {name: rng.standard_normal(SHAPE).astype("float32")}, rounds, calls)
        row.update(ov_ms=vm * 1e3, ratio_ov=gm / vm, ratio_fastest=max(row["ratio"], gm / vm))
    return row


class _openvino:
    """OpenVINO's CPU plugin behind onnxruntime's `run(None, feeds)`, at its default precision
    (what a user gets: int8 kernels for a QDQ model), or None without the openvino package."""

    def __new__(cls, path, threads):
        try:
            import openvino as ov
        except ImportError:
            return None
        self = super().__new__(cls)
        core = ov.Core()
        self.compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                                        "NUM_STREAMS": 1,
                                                                        "PERFORMANCE_HINT": "LATENCY"})
        self.request = self.compiled.create_infer_request()
        return self

    def run(self, _, feeds):
        self.request.infer(feeds)
        return [self.request.get_output_tensor(0).data.copy()]


def main(argv=None) -> int:
    import numpy as np
    import onnx
    from glow.backends.cpu.jit import host_isa
    from glow.backends.cpu.jit import isa as isa_level

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reduce-range", action="store_true")
    ap.add_argument("--preprocess", action="store_true", help="onnxruntime's quant_pre_process before quantizing")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(random_resnet50(rng), fp32)
        if args.preprocess:
            from onnxruntime.quantization.shape_inference import quant_pre_process

            quant_pre_process(fp32, fp32, skip_symbolic_shape=True)
        quantize(fp32, int8, rng, args.reduce_range)
        for fmt, path in (("fp32", fp32), ("qdq int8", int8)):
            rows[fmt] = measure(path, args.threads, args.rounds, args.calls, rng)
    cpu, isa = cpu_model(), isa_level()
    print(f"CPU: {cpu}; glow ISA {isa}; weights {7 if args.reduce_range else 8}-bit; threads {args.threads}; "
          f"{'pre-processed (batch norms folded); ' if args.preprocess else ''}"
          f"a new image every call; medians of {args.rounds} rounds x {args.calls} calls")
    print(f"{'ResNet-50':<10} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'max |diff|':>11} {'OpenVINO ms':>12} "
          f"{'ratio':>6}")
    for fmt, r in rows.items():
        ov = f" {r['ov_ms']:>12.2f} {r['ratio_ov']:>6.2f}" if "ov_ms" in r else ""
        print(f"{fmt:<10} {r['glow_ms']:>8.2f} {r['ort_ms']:>8.2f} {r['ratio']:>6.2f} {r['max_abs_diff']:>11.3g}{ov}")
    speedup = rows["fp32"]["glow_ms"] / rows["qdq int8"]["glow_ms"]
    print(f"glow fp32 ms / glow int8 ms = {speedup:.2f}")
    if not args.no_write:
        suffix = (("" if isa == host_isa() else f"-{isa}") + ("-7bit" if args.reduce_range else "")
                  + ("-pre" if args.preprocess else ""))
        write_results(f"int8-resnet{suffix}", {"cpu": cpu, "isa": isa, "threads": args.threads,
                                              "weight_bits": 7 if args.reduce_range else 8,
                                              "preprocessed": args.preprocess, "rows": rows,
                                              "int8_speedup_over_fp32": speedup})
    return 0


if __name__ == "__main__":
    sys.exit(main())
