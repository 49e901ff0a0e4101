// tess-conv-tiles: a conv row kernel (with its zero fill and bias + relu epilogue) becomes
// a parallel loop over (n, filter block, output row) running, per column tile and tap, one
// micro.mma of depth C that reads the weight (filter stride 144 = 16*3*3, channel stride
// 9) and the padded input (channel plane 10*22) where they lie; 20 output columns are a
// 16-column tile and a 4-wide partial vector. Fewer than min-depth channels, or a strided
// column axis, keep the plain nest.
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles{vector-bits=512}' | filecheck %s

// CHECK-LABEL: func.func private @tiled_kernel_1(
// CHECK:         %rows = memref.collapse_shape %out0 {{.*}} into memref<2x6x160xf32>
// CHECK:         "scf.parallel"
// CHECK:           %f0 = arith.muli
// CHECK:           scf.for %r =
// CHECK:             memref.store
// CHECK:           scf.for %k0 =
// CHECK:             scf.for %k1 =
// CHECK:               micro.mma %w[{{.*}}], %{{.*}}[{{.*}}], %{{.*}}, %rows[{{.*}}], %{{.*}} {rows = 6 : i64, cols = 16 : i64, lanes = 16 : i64, strides = array<i64: 144, 9, 220>}
// CHECK:           micro.mma {{.*}} {rows = 6 : i64, cols = 4 : i64, lanes = 4 : i64, strides = array<i64: 144, 9, 220>}
// CHECK:           scf.for %r_1 =
// CHECK:             arith.addf
// CHECK:             arith.maximumf
// CHECK:         }) {tess.tile_sizes = array<i64: 6, 32>, tess.register_tile = array<i64: 6, 32>}
func.func @tiled(%x: tensor<2x16x8x20xf32>, %w: tensor<6x16x3x3xf32>, %b: tensor<6x1x1xf32>) -> tensor<2x6x8x20xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 1 : tensor<2x16x8x20xf32>, tensor<6x16x3x3xf32> -> tensor<2x6x8x20xf32>
  %1 = tess.add %0, %b : tensor<2x6x8x20xf32>, tensor<6x1x1xf32> -> tensor<2x6x8x20xf32>
  %2 = tess.relu %1 : tensor<2x6x8x20xf32>
  func.return %2 : tensor<2x6x8x20xf32>
}

// CHECK-LABEL: func.func @shallow(
// CHECK-NOT:   micro.mma
// CHECK-LABEL: func.func private @shallow_kernel_0(
// CHECK-NOT:   micro.mma
func.func @shallow(%x: tensor<2x8x8x20xf32>, %w: tensor<6x8x3x3xf32>) -> tensor<2x6x6x18xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x8x8x20xf32>, tensor<6x8x3x3xf32> -> tensor<2x6x6x18xf32>
  func.return %0 : tensor<2x6x6x18xf32>
}

// CHECK-LABEL: func.func @strided(
// CHECK-LABEL: func.func private @strided_kernel_0(
// CHECK-NOT:   micro.mma
func.func @strided(%x: tensor<2x16x9x21xf32>, %w: tensor<6x16x3x3xf32>) -> tensor<2x6x4x10xf32> {
  %0 = tess.conv %x, %w strides = [2, 2] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x16x9x21xf32>, tensor<6x16x3x3xf32> -> tensor<2x6x4x10xf32>
  func.return %0 : tensor<2x6x4x10xf32>
}

// More taps than max-taps (as a weight gradient has): each call's depth is a row of 20
// taps (weight and input both read forward, unit k steps), the channels a loop.
// CHECK-LABEL: func.func private @many_taps_kernel_0(
// CHECK:         scf.for %k0 = {{.*}} to %{{.*}} step
// CHECK:           scf.for %k1 =
// CHECK:             micro.mma {{.*}} {rows = 6 : i64, cols = 3 : i64, lanes = 3 : i64, strides = array<i64: 800, 1, 1>}
func.func @many_taps(%x: tensor<1x4x12x22xf32>, %w: tensor<6x4x10x20xf32>) -> tensor<1x6x3x3xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<1x4x12x22xf32>, tensor<6x4x10x20xf32> -> tensor<1x6x3x3xf32>
  func.return %0 : tensor<1x6x3x3xf32>
}
