// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-contract,tess-gpu-reduce,tess-gpu-map,canonicalize,cse' -t numba | filecheck %s

// tess programs through the cuda pipeline to Numba CUDA source (the emitted side of
// tests/filecheck/gpu/): an elementwise chain over a broadcast is one grid-stride kernel;
// a matmul with its bias and relu is one kernel: both operands' tiles double-buffered in
// 16-byte aligned shared memory, unsigned indices, 4x4 outputs per thread, the epilogue
// before the one store; the seed's zip+reduce is the same kind of kernel (a matmul in
// disguise) and no (3,5,4) buffer exists (the host allocates nothing); the intermediate of
// two matmuls is a window into the workspace, made on the first call and kept in
// `buffers`.

func.func @chain(%x: tensor<7x33xf32>, %b: tensor<33xf32>) -> tensor<7x33xf32> {
  %0 = tess.add %x, %b : tensor<7x33xf32>, tensor<33xf32> -> tensor<7x33xf32>
  %1 = tess.relu %0 : tensor<7x33xf32>
  %2 = tess.mul %1, %x : tensor<7x33xf32>, tensor<7x33xf32> -> tensor<7x33xf32>
  func.return %2 : tensor<7x33xf32>
}

func.func @layer(%x: tensor<45x33xf32>, %w: tensor<33x40xf32>, %b: tensor<40xf32>) -> tensor<45x40xf32> {
  %0 = tess.matmul %x, %w : tensor<45x33xf32>, tensor<33x40xf32> -> tensor<45x40xf32>
  %1 = tess.add %0, %b : tensor<45x40xf32>, tensor<40xf32> -> tensor<45x40xf32>
  %2 = tess.relu %1 : tensor<45x40xf32>
  func.return %2 : tensor<45x40xf32>
}

func.func @twice(%x: tensor<5x6xf32>, %w: tensor<6x7xf32>, %v: tensor<7x3xf32>) -> tensor<5x3xf32> {
  %0 = tess.matmul %x, %w : tensor<5x6xf32>, tensor<6x7xf32> -> tensor<5x7xf32>
  %1 = tess.matmul %0, %v : tensor<5x7xf32>, tensor<7x3xf32> -> tensor<5x3xf32>
  func.return %1 : tensor<5x3xf32>
}

func.func @seed(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %0 = tess.mul %a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32> -> tensor<3x5x4xf32>
  %1 = tess.sum %0 dims = [1] : tensor<3x5x4xf32> -> tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}

// CHECK:      TESSC_TARGET = "cuda"
// The simulator rejects an alignment; NVVM needs one to load 4 floats at once.
// CHECK:      SHARED_ALIGNMENT = None if config.ENABLE_CUDASIM else 16

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def layer_kernel_0(out0, x, w, b):
// CHECK-NEXT:     [[TA:row_tile]] = cuda.shared.array((2, 16, 68), dtype=np.float32, alignment=SHARED_ALIGNMENT)
// CHECK-NEXT:     [[TB:col_tile]] = cuda.shared.array((2, 16, 68), dtype=np.float32, alignment=SHARED_ALIGNMENT)
// Unsigned index arithmetic: no wraparound check on any access. Constants named once.
// CHECK:          [[U0:u0]] = np.uint64(0)
// CHECK:          [[U2:u2]] = np.uint64(2)
// CHECK:          [[U15:u15]] = np.uint64(15)
// CHECK:          tx = np.uint64(cuda.threadIdx.x)
// CHECK-NEXT:     ty = np.uint64(cuda.threadIdx.y)
// CHECK:              ld{{[0-9]+}} = x[
// CHECK:          [[TA]]{{\[}}[[U0]], tx, ty] =
// CHECK:          [[TB]]{{\[}}[[U0]], ty, tx] =
// CHECK:          cuda.syncthreads()
// CHECK:          for kt in range([[U2]]):
// CHECK:                  ld{{[0-9]+}} = x[
// CHECK:                  ld{{[0-9]+}} = w[
// CHECK:              ld{{[0-9]+}} = [[TA]]{{\[}}remui{{[0-9]+}}, [[U0]], mul{{[0-9]+}}]
// CHECK:              ld{{[0-9]+}} = [[TB]]{{\[}}remui{{[0-9]+}}, [[U15]], add{{[0-9]+}}]
// CHECK:              [[TA]]{{\[}}remui{{[0-9]+}}, tx, ty] =
// CHECK:              cuda.syncthreads()
// CHECK:          ld{{[0-9]+}} = b[
// CHECK-NEXT:         add{{[0-9]+}} = add{{[0-9]+}} + ld{{[0-9]+}}
// CHECK-NEXT:         max{{[0-9]+}} = np.maximum(
// CHECK-NEXT:         out0[
// CHECK-COUNT-15:     np.maximum(

// CHECK:      def seed_kernel_0(out0, a, b):
// CHECK-NEXT:     cuda.shared.array((2, 16, 68), dtype=np.float32, alignment=SHARED_ALIGNMENT)
// CHECK-NEXT:     cuda.shared.array((2, 16, 68), dtype=np.float32, alignment=SHARED_ALIGNMENT)
// CHECK:          cuda.syncthreads()

// CHECK:      def chain_kernel_0(x, b, out0):
// CHECK-NOT:  cuda.shared
// CHECK-NOT:  cuda.syncthreads
// CHECK:          while [[L:[a-z0-9_]+]] < u231:
// CHECK-NOT:  @cuda.jit

// CHECK:      def chain(x, b, out0, buffers):
// CHECK-NEXT:     chain_kernel_0[strided_grid(1, 1, 1, 256), (256, 1, 1)](x, b, out0)
// CHECK:      def layer(x, w, b, out0, buffers):
// CHECK-NEXT:     layer_kernel_0[fixed_grid(1, 1, 1), (16, 16, 1)](out0, x, w, b)
// CHECK:      def twice(x, w, v, out0, workspace, buffers):
// CHECK-NEXT:     view0 = buffers.get("twice.view0")
// CHECK-NEXT:     if view0 is None:
// CHECK-NEXT:         view0 = buffers["twice.view0"] = workspace[0:{{[0-9]+}}].view(np.float32).reshape((5, 7))
// CHECK-NEXT:     twice_kernel_0_0[fixed_grid(1, 1, 1), (16, 16, 1)](view0, x, w)
// CHECK-NEXT:     twice_kernel_0_1[fixed_grid(1, 1, 1), (16, 16, 1)](view0, out0, v)
// CHECK:      def seed(a, b, out0, buffers):
// CHECK-NEXT:     seed_kernel_0[fixed_grid(1, 1, 1), (16, 16, 1)](out0, a, b)
// CHECK-NOT:  device_buffer(
