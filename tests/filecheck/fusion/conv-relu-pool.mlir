// conv + bias + relu + max pool over non-overlapping windows is one kernel on the cpu
// pipeline: tess-fuse (pool-windows) computes each conv output inside its pool window, the
// conv's partial sum in a second output of the pool's size (reset when the conv's
// reduction loops are at 0, combined into the pool when they are at their last value), so
// no buffer holds the 2x4x7x7 conv output and the floor-dropped row and column are never
// computed. A 3x3 pool of stride 2 (@overlapping) reads conv outputs twice, and a conv
// output also returned (@returned) must be written anyway: both refused. A conv of 16
// channels (@deep, examples/train_cnn.py's second layer) is fused too: tess-conv-tiles runs
// the fused nest as im2col tiles (a per-thread patch and conv tile, `micro.mma` into the
// tile) with the bias, relu and pool as their epilogue (lowering/loops/conv_pool.py), still
// one kernel after the padding's and no 4x32x4x4 buffer; a pool skipping conv outputs
// (@deep_skipping, window 2 < stride 3) is refused for a deep conv, left to the conv tiles.
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse{report=true}' | filecheck %s --check-prefix=FUSE
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles,tess-pack-matmul,tess-interchange-rows,tess-row-dots,tess-tile,tess-tile-dot,tess-parallel-columns,tess-register-accumulate,tess-expand-math,tess-hoist-constants,tess-hoist-scratch,canonicalize,cse' | filecheck %s

// FUSE-LABEL: func.func @max_pool
// FUSE-NOT:     tensor<2x4x7x7xf32>
// FUSE:         %{{.*}}, %{{.*}} = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "reduction"]} ins(%x, %w, %b
// FUSE-SAME:    tess.fused = ["tess.conv", "tess.add", "tess.relu", "tess.pool"], tess.pool_fused = "each conv output is computed once, inside its pool window; no buffer holds the conv output"
// FUSE:           arith.mulf
// FUSE:           arith.maximumf
// FUSE:           arith.maximumf
// FUSE:         } -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>)
// FUSE-LABEL: func.func @overlapping
// FUSE:         tensor<2x4x7x7xf32>
// FUSE:         tess.pool_refused = "tess.conv: the pool windows overlap on dim 2 (stride 2 < window 3): each conv output would be computed more than once"
// FUSE-LABEL: func.func @returned
// FUSE:         tess.pool_refused = "tess.conv: the conv output is also read by 1 other use(s) (returned, or saved for the backward pass): it must be written anyway"
// FUSE-LABEL: func.func @deep
// FUSE-NOT:     tensor<4x32x4x4xf32>
// FUSE:         tess.fused = ["tess.conv", "tess.add", "tess.relu", "tess.pool"], tess.pool_fused
// FUSE-LABEL: func.func @deep_skipping
// FUSE:         tess.pool_refused = "tess.conv: the conv reduces over 16 channels (>= 16) and the pool's window on dim 2 is not its stride: tess-conv-tiles register-tiles the conv alone"

// CHECK-LABEL: func.func @max_pool(
// CHECK-SAME:    tess.workspace_bytes = 336
// CHECK-NOT:     7x7
// CHECK:         memref.view %workspace{{.*}} to memref<2x4x3x3xf32>
// CHECK-NEXT:    func.call @max_pool_kernel_0(
// CHECK-NEXT:    func.return
// CHECK:       func.func private @max_pool_kernel_0(
// CHECK-NOT:     7x7
// CHECK:         arith.mulf
// CHECK:         arith.maximumf
// CHECK-NOT:   func.func private @max_pool_kernel_1
// CHECK-LABEL: func.func @overlapping(
// CHECK:         memref.view %workspace{{.*}} to memref<2x4x7x7xf32>
// CHECK-NEXT:    func.call @overlapping_kernel_0(
// CHECK:         func.call @overlapping_kernel_1(
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func @deep(
// CHECK-NOT:     4x32x4x4
// CHECK:         func.call @deep_kernel_0(
// CHECK-NOT:     4x32x4x4
// CHECK:         func.call @deep_kernel_1(%out0, {{.*}}, %w, %b, {{.*}}) : (memref<4x32x2x2xf32>, memref<4x16x6x6xf32>, {{.*}}, memref<{{[0-9]+}}xf32>, memref<{{[0-9]+}}x32x16xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK:       func.func private @deep_kernel_1({{.*}}%patch: memref<{{[0-9]+}}xf32>, %conv_tile: memref<{{[0-9]+}}x32x16xf32>)
// CHECK-NOT:     4x32x4x4
// CHECK:         micro.num_threads
// CHECK:         scf.for %c =
// CHECK:           memref.load {{.*}} : memref<4x16x6x6xf32>
// CHECK:           memref.store {{.*}}, %patch[
// CHECK:         micro.mma %w[{{.*}}], %patch[%slot], {{.*}}, %conv_tile[%g, %f0, {{.*}}], {{%[a-z0-9]+}} {rows = {{.*}}, strides = array<i64: 144, 1, 16>}
// CHECK:         scf.for %f =
// CHECK:           memref.store {{.*}}, %out0[
// CHECK:           memref.load %conv_tile[%g, %f,
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:           arith.maximumf
// CHECK:           memref.store {{.*}}, %out0[
// CHECK-NOT:     func.func private @deep_kernel_2
// CHECK-LABEL: func.func @deep_skipping(
// CHECK:         memref.view %workspace{{.*}} to memref<4x32x6x6xf32>
// CHECK:         func.call @deep_skipping_kernel_1(
// CHECK:         func.call @deep_skipping_kernel_2(
// CHECK:       func.func private @deep_skipping_kernel_1(
// CHECK:         micro.mma

func.func @max_pool(%x: tensor<2x3x9x9xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<2x4x3x3xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x7x7xf32>
  %1 = tess.add %0, %b : tensor<2x4x7x7xf32>, tensor<4x1x1xf32> -> tensor<2x4x7x7xf32>
  %2 = tess.relu %1 : tensor<2x4x7x7xf32>
  %3 = tess.pool %2 kind = "max" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xf32>
  func.return %3 : tensor<2x4x3x3xf32>
}

func.func @overlapping(%x: tensor<2x3x9x9xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<2x4x3x3xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x7x7xf32>
  %1 = tess.add %0, %b : tensor<2x4x7x7xf32>, tensor<4x1x1xf32> -> tensor<2x4x7x7xf32>
  %2 = tess.relu %1 : tensor<2x4x7x7xf32>
  %3 = tess.pool %2 kind = "max" kernel = [3, 3] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xf32>
  func.return %3 : tensor<2x4x3x3xf32>
}

func.func @returned(%x: tensor<2x3x9x9xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x7x7xf32>) {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x7x7xf32>
  %1 = tess.pool %0 kind = "avg" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xf32>
  func.return %1, %0 : tensor<2x4x3x3xf32>, tensor<2x4x7x7xf32>
}

func.func @deep(%x: tensor<4x16x4x4xf32>, %w: tensor<32x16x3x3xf32>, %b: tensor<32x1x1xf32>) -> tensor<4x32x2x2xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 1 : tensor<4x16x4x4xf32>, tensor<32x16x3x3xf32> -> tensor<4x32x4x4xf32>
  %1 = tess.add %0, %b : tensor<4x32x4x4xf32>, tensor<32x1x1xf32> -> tensor<4x32x4x4xf32>
  %2 = tess.relu %1 : tensor<4x32x4x4xf32>
  %3 = tess.pool %2 kind = "max" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<4x32x4x4xf32> -> tensor<4x32x2x2xf32>
  func.return %3 : tensor<4x32x2x2xf32>
}

func.func @deep_skipping(%x: tensor<4x16x6x6xf32>, %w: tensor<32x16x3x3xf32>) -> tensor<4x32x2x2xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 1 : tensor<4x16x6x6xf32>, tensor<32x16x3x3xf32> -> tensor<4x32x6x6xf32>
  %1 = tess.pool %0 kind = "max" kernel = [2, 2] strides = [3, 3] padding_low = [0, 0] padding_high = [0, 0] : tensor<4x32x6x6xf32> -> tensor<4x32x2x2xf32>
  func.return %1 : tensor<4x32x2x2xf32>
}
