// RUN: tessc-opt %s -t numba | filecheck %s

// Gpu-level IR (level 5g) to a Numba CUDA module. Hand-written in upstream MLIR's generic
// form of the `gpu` ops (xDSL 0.74 has no custom syntax for them):
// - @scale: an elementwise kernel, one thread per element with a grid-stride loop, 33
//   elements over 2 blocks of 8 threads (not a multiple of the block);
// - @dot: the sum of x * y over a (5, 33) tensor into a 0-d output: a zero-init kernel,
//   then per block a strided partial sum, a shared-memory tree (a workgroup attribution of
//   the gpu.func; a barrier per step) and
//   one atomic add per block into an intermediate the host allocates, copied to the output.
// tests/cuda/test_to_cuda.py runs both in Numba's CUDA simulator.

"builtin.module"() ({
  "func.func"() <{sym_name = "scale", function_type = (memref<33xf32>, memref<33xf32>, memref<33xf32>) -> ()}> ({
  ^bb0(%x: memref<33xf32>, %y: memref<33xf32>, %out0: memref<33xf32>):
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    %g = "arith.constant"() <{value = 2 : index}> : () -> index
    %b = "arith.constant"() <{value = 8 : index}> : () -> index
    "gpu.launch_func"(%g, %c1, %c1, %b, %c1, %c1, %out0, %x, %y) <{kernel = @scale_kernels::@scale_kernel_0, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 0>}> : (index, index, index, index, index, index, memref<33xf32>, memref<33xf32>, memref<33xf32>) -> ()
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "scale_kernels"}> ({
    "gpu.func"() <{function_type = (memref<33xf32>, memref<33xf32>, memref<33xf32>) -> ()}> ({
    ^bb0(%out0: memref<33xf32>, %x: memref<33xf32>, %y: memref<33xf32>):
      %n = "arith.constant"() <{value = 33 : index}> : () -> index
      %tid = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
      %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> : () -> index
      %bdim = "gpu.block_dim"() <{dimension = #gpu<dim x>}> : () -> index
      %gdim = "gpu.grid_dim"() <{dimension = #gpu<dim x>}> : () -> index
      %0 = arith.muli %bid, %bdim : index
      %start = arith.addi %0, %tid : index
      %stride = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %stride {
        %a = memref.load %x[%i] : memref<33xf32>
        %b2 = memref.load %y[%i] : memref<33xf32>
        %m = arith.mulf %a, %b2 : f32
        %e = math.exp %m : f32
        memref.store %e, %out0[%i] : memref<33xf32>
      }
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "scale_kernel_0", tess.grid_stride} : () -> ()
  }) : () -> ()
  "func.func"() <{sym_name = "dot", function_type = (memref<5x33xf32>, memref<5x33xf32>, memref<f32>) -> ()}> ({
  ^bb0(%x: memref<5x33xf32>, %y: memref<5x33xf32>, %out0: memref<f32>):
    %c1 = "arith.constant"() <{value = 1 : index}> : () -> index
    %g = "arith.constant"() <{value = 3 : index}> : () -> index
    %b = "arith.constant"() <{value = 8 : index}> : () -> index
    %buf = "memref.alloc"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> memref<f32>
    "gpu.launch_func"(%c1, %c1, %c1, %c1, %c1, %c1, %buf) <{kernel = @dot_kernels::@zero, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0>}> : (index, index, index, index, index, index, memref<f32>) -> ()
    "gpu.launch_func"(%g, %c1, %c1, %b, %c1, %c1, %buf, %x, %y) <{kernel = @dot_kernels::@sum, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 0>}> : (index, index, index, index, index, index, memref<f32>, memref<5x33xf32>, memref<5x33xf32>) -> ()
    "memref.copy"(%buf, %out0) : (memref<f32>, memref<f32>) -> ()
    "func.return"() : () -> ()
  }) {tess.num_outputs = 1 : i64} : () -> ()
  "gpu.module"() <{sym_name = "dot_kernels"}> ({
    "gpu.func"() <{function_type = (memref<f32>) -> ()}> ({
    ^bb0(%acc: memref<f32>):
      %z = arith.constant 0.0 : f32
      memref.store %z, %acc[] : memref<f32>
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "zero"} : () -> ()
    "gpu.func"() <{function_type = (memref<f32>, memref<5x33xf32>, memref<5x33xf32>) -> ()}> ({
    ^bb0(%acc: memref<f32>, %x: memref<5x33xf32>, %y: memref<5x33xf32>, %tile: memref<8xf32, #gpu.address_space<workgroup>>):
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %rows = arith.constant 5 : index
      %cols = arith.constant 33 : index
      %z = arith.constant 0.0 : f32
      %tid = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
      %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> : () -> index
      %bdim = "gpu.block_dim"() <{dimension = #gpu<dim x>}> : () -> index
      %gdim = "gpu.grid_dim"() <{dimension = #gpu<dim x>}> : () -> index
      %part = scf.for %r = %bid to %rows step %gdim iter_args(%a = %z) -> (f32) {
        %inner = scf.for %j = %tid to %cols step %bdim iter_args(%b = %a) -> (f32) {
          %u = memref.load %x[%r, %j] : memref<5x33xf32>
          %v = memref.load %y[%r, %j] : memref<5x33xf32>
          %uv = arith.mulf %u, %v : f32
          %s = arith.addf %b, %uv : f32
          scf.yield %s : f32
        }
        scf.yield %inner : f32
      }
      memref.store %part, %tile[%tid] : memref<8xf32, #gpu.address_space<workgroup>>
      "gpu.barrier"() : () -> ()
      %lt4 = arith.cmpi ult, %tid, %c4 : index
      scf.if %lt4 {
        %o = arith.addi %tid, %c4 : index
        %p = memref.load %tile[%tid] : memref<8xf32, #gpu.address_space<workgroup>>
        %q = memref.load %tile[%o] : memref<8xf32, #gpu.address_space<workgroup>>
        %pq = arith.addf %p, %q : f32
        memref.store %pq, %tile[%tid] : memref<8xf32, #gpu.address_space<workgroup>>
      }
      "gpu.barrier"() : () -> ()
      %lt2 = arith.cmpi ult, %tid, %c2 : index
      scf.if %lt2 {
        %o = arith.addi %tid, %c2 : index
        %p = memref.load %tile[%tid] : memref<8xf32, #gpu.address_space<workgroup>>
        %q = memref.load %tile[%o] : memref<8xf32, #gpu.address_space<workgroup>>
        %pq = arith.addf %p, %q : f32
        memref.store %pq, %tile[%tid] : memref<8xf32, #gpu.address_space<workgroup>>
      }
      "gpu.barrier"() : () -> ()
      %is0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %is0 {
        %p = memref.load %tile[%c0] : memref<8xf32, #gpu.address_space<workgroup>>
        %q = memref.load %tile[%c1] : memref<8xf32, #gpu.address_space<workgroup>>
        %pq = arith.addf %p, %q : f32
        %old = "memref.atomic_rmw"(%pq, %acc) <{kind = 0 : i64}> : (f32, memref<f32>) -> f32
      }
      "gpu.return"() : () -> ()
    }) {gpu.kernel, sym_name = "sum", workgroup_attributions = 1 : i64} : () -> ()
  }) : () -> ()
}) {gpu.container_module} : () -> ()

// CHECK:      # Generated by tessc (tessc.lowering.codegen.to_cuda) from gpu-level IR. Do not edit.
// CHECK-NEXT: import math
// CHECK-EMPTY:
// CHECK-NEXT: import numpy as np
// CHECK-NEXT: from numba import config, cuda
// CHECK-NEXT: from tessc.runtime.cuda_launch import fixed_grid, strided_grid
// CHECK:      TESSC_TARGET = "cuda"
// CHECK:      "scale": {
// CHECK-NEXT:     "function": "scale",
// CHECK-NEXT:     "inputs": [((33,), "float32"), ((33,), "float32")],
// CHECK-NEXT:     "input_names": ["x", "y"],
// CHECK-NEXT:     "outputs": [((33,), "float32")],
// CHECK:      "dot": {
// CHECK:          "outputs": [((), "float32")],

// CHECK:      def device_buffer(buffers, key, shape, dtype):

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def scale_kernel_0(out0, x, y):
// CHECK-NEXT:     tid = cuda.threadIdx.x
// CHECK-NEXT:     bid = cuda.blockIdx.x
// CHECK-NEXT:     bdim = cuda.blockDim.x
// CHECK-NEXT:     gdim = cuda.gridDim.x
// CHECK-NEXT:     mul0 = bid * bdim
// CHECK-NEXT:     start = mul0 + tid
// CHECK-NEXT:     stride = gdim * bdim
// A loop from a thread id is a while loop: no trip count for LLVM to hoist and keep live.
// CHECK-NEXT:     i = start
// CHECK-NEXT:     while i < 33:
// CHECK-NEXT:         a = x[i]
// CHECK-NEXT:         b2 = y[i]
// CHECK-NEXT:         m = a * b2
// CHECK-NEXT:         e = math.exp(m)
// CHECK-NEXT:         out0[i] = e
// CHECK-NEXT:         i += stride

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def zero(acc):
// CHECK-NEXT:     acc[()] = np.float32(0.0)

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def sum_(acc, x, y):
// CHECK-NEXT:     tile = cuda.shared.array((8,), dtype=np.float32, alignment=SHARED_ALIGNMENT)
// CHECK:          while r < 5:
// CHECK:              while j < 33:
// CHECK:          tile[tid] = a
// CHECK-NEXT:     cuda.syncthreads()
// CHECK-NEXT:     lt4 = tid < 4
// CHECK-NEXT:     if lt4:
// CHECK:          cuda.syncthreads()
// CHECK:          cuda.syncthreads()
// CHECK-NEXT:     is0 = tid == 0
// CHECK-NEXT:     if is0:
// CHECK:              old = cuda.atomic.add(acc.reshape(1), 0, pq_1)

// CHECK:      def scale(x, y, out0, buffers):
// A tess.grid_stride kernel: grid x from the device (at most 2 blocks), each launch counted.
// CHECK-NEXT:     scale_kernel_0[strided_grid(2, 1, 1, 8), (8, 1, 1)](out0, x, y)

// CHECK:      def dot(x, y, out0, buffers):
// CHECK-NEXT:     buf = device_buffer(buffers, "dot.0", (), np.float32)
// CHECK-NEXT:     zero[fixed_grid(1, 1, 1), (1, 1, 1)](buf)
// CHECK-NEXT:     sum_[fixed_grid(3, 1, 1), (8, 1, 1)](buf, x, y)
// CHECK-NEXT:     out0.copy_to_device(buf)
