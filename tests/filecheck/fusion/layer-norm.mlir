// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue{report=true},tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels' | filecheck %s

// `ts.nn.layer_norm(x, (64,), w, b)`, `ts.nn.rms_norm(x, (64,), w)` and the gradients of
// `sum(norm(x) * c)` with respect to x, as `jit` traces them: each host calls ONE kernel.
// `tess-fuse-epilogue` groups the row statistics (the mean and variance, the mean square,
// in the gradients the row sums) with the normalisation that reads them, so each row is
// read while in cache. (The weight and bias gradients are column sums over the rows: a
// kernel each, as they cannot share the row loop.)

// CHECK-LABEL: func.func @layer_norm(
// CHECK:         func.call @layer_norm_kernel_0(
// CHECK-NOT:     func.call
// CHECK-LABEL: func.func private @layer_norm_kernel_0(
// CHECK-SAME:    tess.kernel
// CHECK-LABEL: func.func @layer_norm_dx(
// CHECK:         func.call @layer_norm_dx_kernel_0(
// CHECK-NOT:     func.call
// CHECK-LABEL: func.func private @layer_norm_dx_kernel_0(
// CHECK-LABEL: func.func @rms_norm(
// CHECK:         func.call @rms_norm_kernel_0(
// CHECK-NOT:     func.call
// CHECK-LABEL: func.func private @rms_norm_kernel_0(
// CHECK-LABEL: func.func @rms_norm_dx(
// CHECK:         func.call @rms_norm_dx_kernel_0(
// CHECK-NOT:     func.call
// CHECK-LABEL: func.func private @rms_norm_dx_kernel_0(
// CHECK-NOT:   func.func

builtin.module {
  func.func @layer_norm(%x: tensor<16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<16x64xf32> {
    %0 = tess.mean %x dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %1 = tess.sub %x, %0 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %2 = tess.mul %1, %1 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %3 = tess.mean %2 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %4 = tess.fill 1.000000e-05 : tensor<f32>
    %5 = tess.add %3, %4 : tensor<16x1xf32>, tensor<f32> -> tensor<16x1xf32>
    %6 = tess.sqrt %5 : tensor<16x1xf32>
    %7 = tess.reciprocal %6 : tensor<16x1xf32>
    %8 = tess.mul %1, %7 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %9 = tess.mul %8, %w : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf32>
    %10 = tess.add %9, %b : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf32>
    func.return %10 : tensor<16x64xf32>
  }

  func.func @layer_norm_dx(%x: tensor<16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %0 = tess.mean %x dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %1 = tess.sub %x, %0 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %2 = tess.mul %1, %1 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %3 = tess.mean %2 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %4 = tess.fill 1.000000e-05 : tensor<f32>
    %5 = tess.add %3, %4 : tensor<16x1xf32>, tensor<f32> -> tensor<16x1xf32>
    %6 = tess.sqrt %5 : tensor<16x1xf32>
    %7 = tess.reciprocal %6 : tensor<16x1xf32>
    %8 = tess.mul %c, %w : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf32>
    %9 = tess.mul %8, %7 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %10 = tess.mul %8, %1 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %11 = tess.sum %10 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %12 = tess.mul %7, %7 : tensor<16x1xf32>, tensor<16x1xf32> -> tensor<16x1xf32>
    %13 = tess.mul %11, %12 : tensor<16x1xf32>, tensor<16x1xf32> -> tensor<16x1xf32>
    %14 = tess.neg %13 : tensor<16x1xf32>
    %15 = tess.fill 5.000000e-01 : tensor<1x1xf32>
    %16 = tess.mul %14, %15 : tensor<16x1xf32>, tensor<1x1xf32> -> tensor<16x1xf32>
    %17 = tess.div %16, %6 : tensor<16x1xf32>, tensor<16x1xf32> -> tensor<16x1xf32>
    %18 = tess.fill 1.562500e-02 : tensor<1x1xf32>
    %19 = tess.mul %17, %18 : tensor<16x1xf32>, tensor<1x1xf32> -> tensor<16x1xf32>
    %20 = tess.mul %19, %1 : tensor<16x1xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %21 = tess.add %9, %20 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %22 = tess.add %21, %20 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %23 = tess.neg %22 : tensor<16x64xf32>
    %24 = tess.sum %23 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %25 = tess.mul %24, %18 : tensor<16x1xf32>, tensor<1x1xf32> -> tensor<16x1xf32>
    %26 = tess.add %22, %25 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    func.return %26 : tensor<16x64xf32>
  }

  func.func @rms_norm(%x: tensor<16x64xf32>, %w: tensor<64xf32>) -> tensor<16x64xf32> {
    %0 = tess.mul %x, %x : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %1 = tess.mean %0 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %2 = tess.fill 1.1920928955078125e-07 : tensor<f32>
    %3 = tess.add %1, %2 : tensor<16x1xf32>, tensor<f32> -> tensor<16x1xf32>
    %4 = tess.sqrt %3 : tensor<16x1xf32>
    %5 = tess.div %x, %4 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %6 = tess.mul %5, %w : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf32>
    func.return %6 : tensor<16x64xf32>
  }

  func.func @rms_norm_dx(%x: tensor<16x64xf32>, %w: tensor<64xf32>, %c: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %0 = tess.mul %x, %x : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %1 = tess.mean %0 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %2 = tess.fill 1.1920928955078125e-07 : tensor<f32>
    %3 = tess.add %1, %2 : tensor<16x1xf32>, tensor<f32> -> tensor<16x1xf32>
    %4 = tess.sqrt %3 : tensor<16x1xf32>
    %5 = tess.div %x, %4 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %6 = tess.mul %c, %w : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf32>
    %7 = tess.div %6, %4 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %8 = tess.mul %6, %5 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %9 = tess.div %8, %4 : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
    %10 = tess.neg %9 : tensor<16x64xf32>
    %11 = tess.sum %10 dims = [1] keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    %12 = tess.fill 5.000000e-01 : tensor<1x1xf32>
    %13 = tess.mul %11, %12 : tensor<16x1xf32>, tensor<1x1xf32> -> tensor<16x1xf32>
    %14 = tess.div %13, %4 : tensor<16x1xf32>, tensor<16x1xf32> -> tensor<16x1xf32>
    %15 = tess.fill 1.562500e-02 : tensor<1x1xf32>
    %16 = tess.mul %14, %15 : tensor<16x1xf32>, tensor<1x1xf32> -> tensor<16x1xf32>
    %17 = tess.mul %16, %x : tensor<16x1xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %18 = tess.add %7, %17 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    %19 = tess.add %18, %17 : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
    func.return %19 : tensor<16x64xf32>
  }
}
