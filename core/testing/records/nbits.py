"""Records for block-quantized weights (glow.ops.nbits): MatMulNBits at 2, 4 and 8 bits, with and
without zero points (packed uint8 and float), K not a multiple of the block, a bias; and
GatherBlockQuantized from a packed uint8 table, with default and given zero points."""

import numpy as np

from ..op_records import Const, In, OpRecord

MS = "com.microsoft"
_rng = np.random.default_rng(41)


def _codes(*shape):
    return Const(_rng.integers(0, 256, shape, dtype=np.uint8))


def _scales(*shape):
    return Const((_rng.standard_normal(shape) * 0.1).astype(np.float32))


def _nbits(name, m, k, n, bits, bs, zp=None, bias=False):
    kb = -(-k // bs)
    ins = [In((m, k)), _codes(n, kb, bs * bits // 8), _scales(n, kb)]
    if zp == "packed":
        ins.append(_codes(n * -(-kb * bits // 8)))
    elif zp == "float":
        ins.append(Const(_rng.uniform(0, 2 ** bits - 1, (n * kb,)).astype(np.float32)))
    if bias:
        ins += [None] * (5 - len(ins)) + [In((n,))]
    return OpRecord("MatMulNBits", ins, dict(K=k, N=n, bits=bits, block_size=bs), name=name, domain=MS,
                    rtol=1e-5, atol=1e-5)


RECORDS = [
    _nbits("4bit", 3, 64, 8, 4, 32),
    _nbits("4bit-zp-ragged-k", 2, 70, 5, 4, 32, zp="packed"),
    _nbits("8bit-zp", 2, 128, 6, 8, 64, zp="packed"),
    _nbits("2bit-zp", 2, 64, 8, 2, 32, zp="packed"),
    _nbits("float-zp", 1, 96, 4, 4, 16, zp="float"),
    _nbits("bias", 2, 64, 8, 4, 32, bias=True),
    OpRecord("GatherBlockQuantized", [_codes(10, 16), Const(np.array([[0, 9], [-1, 3]], np.int64)), _scales(10, 2)],
             dict(block_size=16, bits=4), name="uint8-4bit", domain=MS),
    OpRecord("GatherBlockQuantized", [_codes(10, 16), Const(np.array([2, 5], np.int32)), _scales(10, 2),
                                      _codes(10, 1)], dict(block_size=16, bits=4), name="uint8-4bit-zp", domain=MS),
]
