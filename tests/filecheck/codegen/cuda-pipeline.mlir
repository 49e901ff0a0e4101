// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-reduce,tess-gpu-map,canonicalize,cse' -t numba | filecheck %s

// tess programs through the cuda pipeline to Numba CUDA source (the emitted side of
// tests/filecheck/gpu/): an elementwise chain over a broadcast is one grid-stride kernel;
// the seed's zip+reduce is one kernel with a shared-memory tree and barriers, and no
// (3,5,4) buffer exists (the host allocates nothing).

func.func @chain(%x: tensor<7x33xf32>, %b: tensor<33xf32>) -> tensor<7x33xf32> {
  %0 = tess.add %x, %b : tensor<7x33xf32>, tensor<33xf32> -> tensor<7x33xf32>
  %1 = tess.relu %0 : tensor<7x33xf32>
  %2 = tess.mul %1, %x : tensor<7x33xf32>, tensor<7x33xf32> -> tensor<7x33xf32>
  func.return %2 : tensor<7x33xf32>
}

func.func @seed(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %0 = tess.mul %a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32> -> tensor<3x5x4xf32>
  %1 = tess.sum %0 dims = [1] : tensor<3x5x4xf32> -> tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}

// CHECK:      TESSC_TARGET = "cuda"

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def seed_kernel_0(out0, a, b):
// CHECK-NEXT:     [[TREE:[a-z0-9_]+]] = cuda.shared.array((8, 32), dtype=np.float32)
// CHECK:              ld{{[0-9]+}} = a[
// CHECK:              ld{{[0-9]+}} = b[
// CHECK:          [[TREE]][ty, tx] =
// CHECK-NEXT:     cuda.syncthreads()
// CHECK:          cuda.syncthreads()
// CHECK:              out0[{{.*}}] =

// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def chain_kernel_0(x, b, out0):
// CHECK-NOT:  cuda.shared
// CHECK-NOT:  cuda.syncthreads
// CHECK:          for [[L:[a-z0-9_]+]] in range({{.*}}, 231, {{.*}}):
// CHECK-NOT:  @cuda.jit

// CHECK:      def chain(x, b, out0, buffers):
// CHECK-NEXT:     chain_kernel_0[(1, 1, 1), (256, 1, 1)](x, b, out0)
// CHECK:      def seed(a, b, out0, buffers):
// CHECK-NEXT:     seed_kernel_0[(1, 1, 1), (32, 8, 1)](out0, a, b)
// CHECK-NOT:  device_buffer(
