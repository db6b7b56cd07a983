"""Token-id models with fresh inputs every call: glow cpu against onnxruntime (issue 16's targets).

    python benchmarks/dynamic.py                 # both models, static and symbolic shapes
    python benchmarks/dynamic.py --rounds 5 --calls 40 --threads 1 --no-write
    python benchmarks/dynamic.py --backend opencl   # results-dynamic-opencl.json

Models (glow.testing.nlp_models, written the way the PyTorch exporters write them): a BERT-tiny
sized encoder (2 layers, hidden 128, 2 heads, FFN 512, batch 2, sequence 32) and a GPT-style
decoder of the same size with a causal mask and a 1000-word head. Every call gets new random
token ids, drawn before the timer starts and fed to both engines; glow and onnxruntime alternate
which runs first; each round's figure is the median of its calls, and the table shows the median
of the rounds. `compiles` counts glow's compiles after the first call (must be 0).

For the symbolic-shape models it also times a *new* batch size and a new sequence length: from
the call to its result (the reference interpreter answers it while the shape compiles in the
background, glow.flow.tiered; GLOW_TIERED=0 makes the call wait for the compile), from the call
to the compiled code being ready (an empty object cache), then the steady ratio at that shape.
On opencl a new shape also says whether the device compiler built a program for it
(`programs_built`: 0 when the shape rendered the program text of a shape before). Results go to
benchmarks/results-dynamic.json (results-dynamic-opencl.json for opencl).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from host import cpu_model, interleaved, ort_session, write_results  # noqa: E402 (benchmarks/host.py, next to this script)


def _timed_rounds(exe, sess, model, batch, seq, rounds, calls, rng):
    from glow.testing.nlp_models import token_feeds

    g, o, _ = interleaved(exe, sess, lambda: token_feeds(model, batch, seq, rng), rounds, calls)
    return g, o


def measure(name, dynamic, threads, rounds, calls, backend="cpu") -> dict:
    import glow
    import numpy as np
    from glow.testing import nlp_models

    make = {"encoder": nlp_models.encoder, "decoder": nlp_models.decoder}[name]
    model = make(dynamic=dynamic)
    rng = np.random.default_rng(0)
    sess = ort_session(model.SerializeToString(), threads)
    t = time.perf_counter()
    exe = glow.compile(model, backend=backend, **({"threads": threads} if backend == "cpu" else {}))
    exe.run(nlp_models.token_feeds(model, 2, 32, rng))  # the first call (compiles a symbolic model)
    first = time.perf_counter() - t
    before = exe.stats.get("compiles", 0)
    g, o = _timed_rounds(exe, sess, model, 2, 32, rounds, calls, rng)
    row = {"model": name, "shapes": "symbolic" if dynamic else "static", "threads": threads,
           "first_result_s": first, "glow_ms": g * 1e3, "ort_ms": o * 1e3, "ratio": g / o,
           "compiles_after_first": exe.stats.get("compiles", 0) - before}
    if dynamic:
        for label, (b, s) in (("new batch 5", (5, 32)), ("new sequence 48", (2, 48))):
            feeds = nlp_models.token_feeds(model, b, s, rng)
            t = time.perf_counter()
            exe.run(feeds)  # answered by the interpreter while the shape compiles (glow.flow.tiered)
            new_first = time.perf_counter() - t
            if not exe.wait_compiles(timeout=600):
                raise SystemExit(f"{name} {label}: the background compile took over 600 s")
            compiled = time.perf_counter() - t
            g2, o2 = _timed_rounds(exe, sess, model, b, s, max(1, rounds // 2), calls, rng)
            row[label] = {"first_result_s": new_first, "compiled_s": compiled, "glow_ms": g2 * 1e3,
                          "ort_ms": o2 * 1e3, "ratio": g2 / o2}
            if "programs_built" in exe.stats:
                row[label]["programs_built"] = exe.stats["programs_built"]
        row["cache_bytes"] = exe.stats["cache_bytes"]
        row["specializations"] = exe.stats["specializations"]
        row["compiles"] = exe.stats["compiles"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "opencl"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for m in ("encoder", "decoder"):
        for d in (False, True):
            # an object cache of its own per model and shapes: cold, so a new shape pays its real
            # compile (only kernels of this same model whose shapes did not change are found)
            with tempfile.TemporaryDirectory() as cache:
                os.environ["GLOW_CACHE_DIR"] = cache
                rows.append(measure(m, d, args.threads, args.rounds, args.calls, args.backend))
    cpu = cpu_model()
    print(f"CPU: {cpu}; glow backend {args.backend}; threads {args.threads}; fresh token ids every call; "
          f"medians of {args.rounds} rounds x {args.calls} calls")
    print(f"{'model':<9} {'shapes':<9} {'glow ms':>8} {'ort ms':>8} {'ratio':>6} {'recompiles':>10} "
          f"{'first result s':>14}")
    for r in rows:
        print(f"{r['model']:<9} {r['shapes']:<9} {r['glow_ms']:>8.3f} {r['ort_ms']:>8.3f} {r['ratio']:>6.2f} "
              f"{r['compiles_after_first']:>10} {r['first_result_s']:>14.2f}")
        for label in ("new batch 5", "new sequence 48"):
            if label in r:
                x = r[label]
                print(f"  {label:<16} first result {x['first_result_s']:.3f} s; compiled code from "
                      f"{x['compiled_s']:.2f} s; then glow {x['glow_ms']:.3f} ms, ort {x['ort_ms']:.3f} ms, "
                      f"ratio {x['ratio']:.2f}"
                      + (f"; programs built {x['programs_built']}" if "programs_built" in x else ""))
        if "cache_bytes" in r:
            print(f"  cache: {r['specializations']} specialisation(s), {r['cache_bytes'] / 2**20:.1f} MiB held, "
                  f"{r['compiles']} compiles in all")
    if not args.no_write:
        write_results("dynamic" if args.backend == "cpu" else f"dynamic-{args.backend}",
                      {"cpu": cpu, "backend": args.backend, "threads": args.threads, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
