"""A rendered kernel, and the writer kernel templates use to build one.

Every kernel takes the same kind of arguments: one pointer to the executable's device memory
(`mem`, a byte pointer), one byte offset per operand, then the int sizes it reads at run time
(`w.param`). The runtime places weights, the activation arena, inputs and outputs in that one
allocation, so an operand is just an offset, and two instructions with the same shapes share one
kernel (its text names no address). A template that reads its sizes through `w.param` is shared
by instructions of other sizes too: one build of the device compiler serves all of them.

    w = KernelWriter(renderer, "add", instr)
    a, y = w.arg(instr.inputs[0]), w.arg(instr.outputs[0], out=True)
    i = w.flat_index(n)                      # one work-item per element, bounds-checked
    w.line(f"{w.store(y, i, dtype, w.load(a, i, dtype) + ...)}")
    kernel = w.finish()
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as dt
from ..errors import BackendError
from .cstyle import NARROW_TYPES, CStyleRenderer
from .helpers import narrow_decode, narrow_encode
from .sizes import Size, unmark

#: Largest element count indexed with 32-bit ints (faster on every device).
INT32_LIMIT = (1 << 31) - 1


@dataclass(frozen=True)
class Kernel:
    """One kernel: its name and text, the helpers and features it needs, and how to launch it."""

    name: str
    source: str
    helpers: frozenset
    features: frozenset
    global_size: tuple  # work-items per axis (not rounded up to the work-group size)
    local_size: tuple | None  # work-group size, or None to let the runtime pick
    operands: tuple  # IR operands (Buffer | View), in argument order after `mem`
    instr: object = field(default=None, compare=False)  # the instruction it was rendered for
    scalars: tuple = ()  # this launch's values of the int parameters (after the offsets)

    @property
    def launch(self) -> tuple:
        """(global size rounded up to whole work-groups, local size)."""
        if self.local_size is None:
            return self.global_size, None
        g = tuple(-(-n // l) * l for n, l in zip(self.global_size, self.local_size))
        return g, self.local_size


class KernelWriter:
    def __init__(self, r: CStyleRenderer, base: str, instr=None, derived: dict | None = None,
                 params=None):
        self.r = r
        self.params = params  # the DeviceParams rendered for (None: not known, GPU-like)
        self.derived = {} if derived is None else derived  # shared per program: key -> Buffer
        self.instr = instr
        self.base = base
        self.operands: list = []
        self.scalars: dict[str, int] = {}  # parameter name -> this instruction's value
        self.prologue: list[str] = []
        self.body: list[str] = []
        self.helpers: set[str] = set()
        self.features: set[str] = set()
        self.global_size: tuple = (1,)
        self.local_size: tuple | None = None
        self._depth = 1

    # -- arguments -----------------------------------------------------------------------------
    def arg(self, operand, *, out: bool = False, dtype=None) -> str:
        """A typed pointer to `operand`'s first element; returns its C name. Operands named
        twice share one argument."""
        for k, o in enumerate(self.operands):
            if o is operand:
                return f"p{k}"
        k = len(self.operands)
        self.operands.append(operand)
        dtype = dtype or operand.type.dtype
        self.uses(dtype)
        g = f"{self.r.global_qualifier} " if self.r.global_qualifier else ""
        const = "" if out else "const "
        st = self.r.storage(dtype)
        self.prologue.append(f"{g}{const}{st}* p{k} = ({g}{const}{st}*)(mem + o{k});")
        return f"p{k}"

    def param(self, name: str, value: int) -> str:
        """An int kernel argument `name` holding `value` for this instruction; returns `name`.
        The text then names no value, so instructions that differ only in such sizes share one
        kernel (and one device-compiler build)."""
        if name in self.scalars:
            raise BackendError(f"kernel parameter '{name}' declared twice")
        value = int(value)
        if not -INT32_LIMIT <= value <= INT32_LIMIT:
            raise BackendError(f"kernel parameter {name}={value} does not fit a 32-bit int")
        self.scalars[name] = value
        return name

    def _size_param(self, name: str, value: int) -> str:
        """The argument for a marked size (glow.render.sizes.unmark asks once per name; a template
        that declared the same name itself is an error, not a silent merge)."""
        if name in self.scalars and self.scalars[name] != int(value):
            raise BackendError(f"kernel parameter '{name}' declared twice with different values")
        return name if name in self.scalars else self.param(name, value)

    def weight(self, key, make) -> str:
        """A pointer to a weight the kernel derives at compile time (packed or transposed
        constants), made by `make()` -> ndarray once per `key` per program. It is uploaded with
        the other weights; the kernel text does not depend on its values."""
        from ..ir.instr import WEIGHT, Buffer

        buf = self.derived.get(key)
        if buf is None:
            data = np.ascontiguousarray(make())
            buf = self.derived[key] = Buffer(f"derived{len(self.derived)}",
                                             dt.TensorType(data.shape, dt.from_numpy(data.dtype)), WEIGHT, data)
        return self.arg(buf)

    def uses(self, dtype) -> None:
        """Record what a value of `dtype` needs (fp64 pragmas, conversion helpers)."""
        if dtype == dt.float64:
            self.features.add("fp64")
        if dtype == dt.float16:
            self.helpers.update(("glow_h2f", "glow_f2h"))
        elif dtype == dt.bfloat16:
            self.helpers.update(("glow_bf2f", "glow_f2bf"))

    def need(self, helper: str) -> None:
        self.helpers.add(helper)

    # -- memory --------------------------------------------------------------------------------
    def load(self, ptr: str, index: str, dtype) -> str:
        """The element at `index` as a value of its compute type."""
        self.uses(dtype)
        v = f"{ptr}[{index}]"
        if dtype == dt.float16:
            return f"glow_h2f({v})"
        if dtype == dt.bfloat16:
            return f"glow_bf2f({v})"
        if dtype in NARROW_TYPES:
            return narrow_decode(self, dtype, v)
        return v

    def store(self, ptr: str, index: str, dtype, value: str) -> str:
        """The statement storing a compute-type `value` at `index`."""
        return f"{ptr}[{index}] = {self.to_storage(value, dtype)};"

    def to_storage(self, value: str, dtype) -> str:
        if dtype == dt.float16:
            return f"glow_f2h({value})"
        if dtype == dt.bfloat16:
            return f"glow_f2bf({value})"
        if dtype == dt.bool_:
            return f"({self.r.storage(dtype)})(({value}) != 0)"
        if dtype in NARROW_TYPES:  # a value of the format already (only Cast rounds to it)
            return narrow_encode(self, dtype, value)
        return value

    def round_half(self, value: str, dtype) -> str:
        """`value` rounded to `dtype` when that is a 16-bit float (a NumPy op rounds each step)."""
        if dtype == dt.float16:
            return f"glow_h2f(glow_f2h({value}))"
        if dtype == dt.bfloat16:
            return f"glow_bf2f(glow_f2bf({value}))"
        return value

    # -- work distribution ---------------------------------------------------------------------
    def flat_index(self, n: int, local: int = 64, name: str = "i") -> str:
        """One work-item per element of a flat range of `n`; declares and bounds-checks `name`."""
        check_size(n)
        # A size that varies between calls keeps whole work-groups (the check masks the rest),
        # so the text does not name it.
        self.global_size, self.local_size = (n,), (local if isinstance(n, Size) else min(local, max(n, 1)),)
        self.line(f"const int {name} = {self.r.global_id(0)};")
        # The count is an argument: kernels that differ only in it (a fused BatchNorm + ReLU
        # over other channel counts) share one text and one build.
        self.line(f"if ({name} >= {self.param('NUMEL', n)}) return;")
        return name

    def grid(self, global_size: tuple, local_size: tuple | None) -> None:
        for n in global_size:
            check_size(n)
        self.global_size, self.local_size = tuple(global_size), local_size

    # -- text ----------------------------------------------------------------------------------
    def line(self, text: str = "") -> None:
        self.body.append("  " * self._depth + text if text else "")

    def open(self, text: str) -> None:
        self.line(text + " {" if text else "{")
        self._depth += 1

    def close(self, text: str = "}") -> None:
        self._depth -= 1
        self.line(text)

    def finish(self) -> Kernel:
        # Sizes that vary between calls were written as markers; they become int arguments.
        body = unmark("\n".join(["  " + p for p in self.prologue] + self.body), self._size_param)
        if "glow_udiv(" in body or "glow_umod(" in body:
            self.helpers.add("glow_udiv")
        local = None if self.local_size is None else tuple(int(n) for n in self.local_size)
        params = [f"{self.r.global_qualifier} unsigned char* mem".strip()]
        params += [f"const {self.r.offset_type} o{k}" for k in range(len(self.operands))]
        params += [f"const int {n}" for n in self.scalars]
        header = self.r.kernel_header("@NAME@", params, local)
        text = header + " {\n" + body + "\n}\n"
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        name = f"{self.base}_{digest}"
        return Kernel(name, text.replace("@NAME@", name), frozenset(self.helpers),
                      frozenset(self.features), tuple(int(n) for n in self.global_size), local,
                      tuple(self.operands), self.instr, tuple(self.scalars.values()))


def check_size(n: int) -> None:
    if n > INT32_LIMIT:
        # Backstop: CStyleBackend.compile_graph already refused such tensors naming the node.
        raise BackendError(f"{n} elements: kernels index with 32-bit ints (at most {INT32_LIMIT})")
