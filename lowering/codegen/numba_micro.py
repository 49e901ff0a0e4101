"""
Codegen of `micro.mma` for Numba: an `@intrinsic` that writes the micro-kernel's loop in
LLVM IR with explicit vector types.

Written as Python, an output-stationary tile does not vectorise (13 GFLOP/s at 512 f32
against BLAS's 174): its accumulators stay scalar, or in memory. So the tile is LLVM IR:
`rows x cols / lanes` vector accumulators as phi nodes, per k step vector loads of the
packed B panel, broadcast scalars of A, one `llvm.fmuladd` per accumulator; an explicit
`<16 x float>` gets zmm registers where Numba's auto-vectoriser picks 256 bits. The module
defines `micro_mma` once (`MMA_TEMPLATE`) and one intrinsic per tile shape
(`mma_binding`). `micro.num_threads` is `num_threads()` (`NUM_THREADS_TEMPLATE`), the
threading layer's symbol as parfors read it (`numba.get_num_threads()` would hold a ctypes
pointer, which Numba does not cache).
"""

from __future__ import annotations

MMA_IMPORTS: tuple[str, ...] = (
    "from llvmlite import ir",
    "from numba.core import cgutils",
    "from numba.extending import intrinsic",
)

MMA_TEMPLATE = '''
def micro_mma(rows, cols, lanes, sr=1, sk=None, skb=None):
    """acc[index][r, c] = (acc[index][r, c] if accumulate else 0) + sum(ap[a + r * sr + k *
    sk] * bp[b + k * skb + c] for k < kc), for r < rows, c < cols, with rows * cols / lanes
    vector accumulators in registers; packed panels by default (sk = rows, skb = cols)."""
    sk = rows if sk is None else sk
    skb = cols if skb is None else skb

    @intrinsic
    def mma(typingctx, ap, a, bp, b, kc, acc, index, accumulate):
        def codegen(context, builder, signature, args):
            i64, bytes_ptr = ir.IntType(64), ir.IntType(8).as_pointer()
            element = context.get_value_type(signature.args[0].dtype)
            vector = ir.VectorType(element, lanes)
            size = context.get_abi_sizeof(element)
            lhs, rhs, out = (
                context.make_array(signature.args[n])(context, builder, args[n])
                for n in (0, 2, 5)
            )

            def int64(value, typ):
                return context.cast(builder, value, typ, types.int64)

            def at(base, offset, typ, count=1):  # element `offset` (i64) of `base`, as `typ`
                byte = builder.mul(offset, ir.Constant(i64, size))
                pointer = builder.gep(builder.bitcast(base, bytes_ptr), [byte])
                return builder.load(builder.bitcast(pointer, typ.as_pointer()), align=size)

            index = cgutils.unpack_tuple(builder, args[6])
            strides = cgutils.unpack_tuple(builder, out.strides)
            origin = builder.gep(builder.bitcast(out.data, bytes_ptr), [ir.Constant(i64, 0)])
            for value, typ, stride in zip(index, signature.args[6], strides):
                origin = builder.gep(origin, [builder.mul(int64(value, typ), stride)])
            tile = []  # the accumulators' addresses in `acc`, row-major
            for r in range(rows):
                row = builder.gep(origin, [builder.mul(ir.Constant(i64, r), strides[-2])])
                for v in range(cols // lanes):
                    pointer = builder.gep(row, [ir.Constant(i64, v * lanes * size)])
                    tile.append(builder.bitcast(pointer, vector.as_pointer()))
            a0, b0 = int64(args[1], signature.args[1]), int64(args[3], signature.args[3])
            depth = int64(args[4], signature.args[4])
            # The tile of `acc` is fetched while the loop runs (a GEMM's output streams from
            # memory for large shapes) and added once at the end; the loop starts from 0.
            i32 = ir.IntType(32)
            prefetch = builder.module.globals.get("llvm.prefetch.p0") or ir.Function(
                builder.module,
                ir.FunctionType(ir.VoidType(), [bytes_ptr, i32, i32, i32]),
                name="llvm.prefetch.p0",
            )
            for r in range(rows):
                row = builder.gep(origin, [builder.mul(ir.Constant(i64, r), strides[-2])])
                for line in range(0, cols * size, 64):
                    address = builder.gep(row, [ir.Constant(i64, line)])
                    builder.call(prefetch, [address, *(ir.Constant(i32, v) for v in (1, 3, 1))])
            initial = [ir.Constant(vector, None)] * len(tile)
            entry = builder.block
            loop = builder.append_basic_block("mma.loop")
            done = builder.append_basic_block("mma.done")
            zero = ir.Constant(i64, 0)
            builder.cbranch(builder.icmp_signed(">", depth, zero), loop, done)
            builder.position_at_end(loop)
            k = builder.phi(i64)
            k.add_incoming(zero, entry)
            accs = [builder.phi(vector) for _ in initial]
            for phi, value in zip(accs, initial):
                phi.add_incoming(value, entry)
            b_row = builder.add(b0, builder.mul(k, ir.Constant(i64, skb)))
            b_vectors = [
                at(rhs.data, builder.add(b_row, ir.Constant(i64, v * lanes)), vector)
                for v in range(cols // lanes)
            ]
            name = f"llvm.fmuladd.v{lanes}f{size * 8}"
            fmuladd = builder.module.globals.get(name) or ir.Function(
                builder.module, ir.FunctionType(vector, [vector] * 3), name=name
            )
            a_row = builder.add(a0, builder.mul(k, ir.Constant(i64, sk)))
            splat = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
            updated = []
            for r in range(rows):
                scalar = at(lhs.data, builder.add(a_row, ir.Constant(i64, r * sr)), element)
                undefined = ir.Constant(vector, ir.Undefined)
                single = builder.insert_element(undefined, scalar, ir.Constant(i32, 0))
                broadcast = builder.shuffle_vector(single, undefined, splat)
                for v, b_vector in enumerate(b_vectors):
                    acc = accs[r * len(b_vectors) + v]
                    updated.append(builder.call(fmuladd, [broadcast, b_vector, acc]))
            k_next = builder.add(k, ir.Constant(i64, 1))
            k.add_incoming(k_next, loop)
            for phi, value in zip(accs, updated):
                phi.add_incoming(value, loop)
            builder.cbranch(builder.icmp_signed("<", k_next, depth), loop, done)
            builder.position_at_end(done)
            finals = [builder.phi(vector) for _ in tile]  # phis first: LLVM wants them
            for final, before, after in zip(finals, initial, updated):
                final.add_incoming(before, entry)
                final.add_incoming(after, loop)
            flag = context.cast(builder, args[7], signature.args[7], types.boolean)
            with builder.if_else(flag) as (add, overwrite):
                with add:
                    for final, pointer in zip(finals, tile):
                        total = builder.fadd(builder.load(pointer, align=size), final)
                        builder.store(total, pointer, align=size)
                with overwrite:
                    for final, pointer in zip(finals, tile):
                        builder.store(final, pointer, align=size)
            return context.get_dummy_value()

        return types.none(ap, a, bp, b, kc, acc, index, accumulate), codegen

    return mma
'''.strip()


NUM_THREADS_TEMPLATE = '''
@intrinsic
def num_threads(typingctx):
    """Numba's thread count now, read as its parfors read it (a cacheable call)."""
    get_num_threads()  # starts the threading layer, which defines the symbol

    def codegen(context, builder, signature, args):
        count = ir.FunctionType(context.get_value_type(types.intp), [])
        function = cgutils.get_or_insert_function(builder.module, count, "get_num_threads")
        return builder.call(function, [])

    return types.intp(), codegen
'''.strip()


MmaKey = tuple[int, int, int, int, int, int]
"""(rows, cols, lanes, sr, sk, skb): one intrinsic each (`MmaOp.tile` + `MmaOp.layout`)."""


def mma_name(key: MmaKey) -> str:
    """The generated module's name of the intrinsic for a tile and its operand layout."""
    rows, cols, lanes, sr, sk, skb = key
    name = f"micro_mma_{rows}x{cols}x{lanes}"
    return name if (sr, sk, skb) == (1, rows, cols) else f"{name}_s{sr}_{sk}_{skb}"


def mma_binding(key: MmaKey) -> str:
    """The module-level line that makes the intrinsic for `key`."""
    rows, cols, lanes, sr, sk, skb = key
    packed = (sr, sk, skb) == (1, rows, cols)
    arguments = key[:3] if packed else key
    return f"{mma_name(key)} = micro_mma({', '.join(map(str, arguments))})"


__all__ = [
    "MMA_IMPORTS",
    "MMA_TEMPLATE",
    "NUM_THREADS_TEMPLATE",
    "MmaKey",
    "mma_binding",
    "mma_name",
]
