"""The contract between a program's generated code and the code that calls it (runtime.py, the
profiling twin, bundle.py): the entry's name and its context array, the weights' alignment, and
the record where kernels leave the first bad index of a run. Kept apart from the code generator
so that running a program (a saved one: glow.load) does not import the generator and its kernels.

The entry is `void glow_run(ptr ctx, i64 tid, i64 nthreads)`; ctx holds the arena, the weights
blob, the sync state, then every input's and output's address in the IR function's order.
"""

from __future__ import annotations

import ctypes

from glow.ops.index import recorded_index_error

ENTRY = "glow_run"
CTX_ARENA, CTX_WEIGHTS, CTX_SYNC, CTX_FIRST_INPUT = 0, 1, 2, 3
WEIGHT_ALIGN = 64

#: The module's error record, int64[4]: kind (0: no error; WRAPS / NON_NEGATIVE), site (the
#: instruction's site_id), the bad index, the bound. One per module, i.e. per compiled program,
#: whose runs are serialised.
ERRORS = "glow_index_errors"


def check_index_errors(program) -> None:
    """After a run of a NativeProgram: raise the InputError its kernels recorded, if any (and
    clear the record for the next run). One 8-byte read when nothing went wrong."""
    addr = getattr(program, "_index_errors", None)
    if addr is None:
        addr = program._index_errors = program.module.engine.get_global_value_address(ERRORS)
    if not addr:
        return  # no indexing kernel in this program
    rec = (ctypes.c_int64 * 4).from_address(addr)
    if rec[0] == 0:
        return
    err = recorded_index_error(list(rec), program.sites)
    ctypes.memset(addr, 0, 4 * 8)
    raise err
