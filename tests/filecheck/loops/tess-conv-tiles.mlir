// tess-conv-tiles: a conv row kernel (with its zero fill and bias + relu epilogue) becomes
// a parallel loop over (n, filter block, output row) running, per column tile and tap, one
// micro.mma of depth C that reads the weight (filter stride 144 = 16*3*3, channel stride
// 9) and the padded input (channel plane 10*22) where they lie; 20 output columns are a
// 16-column tile and a 4-wide partial vector. Both forms make the output's (N, F, O) view
// inside the parallel loop (one made outside broke Numba's parfor aliasing). Fewer than
// min-depth channels, or a strided column axis, take the im2col form (`algorithm=auto`, the rule in conv_tiles.py); a
// one-channel conv (9 deep) keeps the plain nest. `algorithm=direct` leaves the strided
// conv plain; `algorithm=im2col` gathers the deep one too (prefix IM2COL).
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles{vector-bits=512 threads=2}' | filecheck %s
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles{vector-bits=512 algorithm=direct}' | filecheck %s --check-prefix=DIRECT
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-conv-tiles{vector-bits=512 threads=2 algorithm=im2col}' | filecheck %s --check-prefix=IM2COL

// CHECK-LABEL: func.func private @tiled_kernel_1(
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      %rows = memref.collapse_shape %out0 {{.*}} into memref<2x6x160xf32>
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
// Forced im2col: per item (an image's 8 output rows = 160 pixels, as 180 KB of patch
// fits 256 KiB), gather the 144 x 160 patch into this thread's slot, then one micro.mma
// of depth C*K = 144 per 32-column tile (weight k stride 1: OIHW flattens) that stores
// (accumulate false: the zero fill is gone), then the bias + relu epilogue. Two threads'
// slots: 2 x 144 x 160 floats.
// IM2COL-LABEL: func.func private @tiled_kernel_1(
// IM2COL:         %patch = memref.alloc() {alignment = 64 : i64} : memref<46080xf32>
// IM2COL:         %threads = micro.num_threads
// IM2COL:         %[[STORES:.*]] = arith.constant false
// IM2COL:         "scf.parallel"(%{{.*}}, %groups, %{{.*}})
// IM2COL-NEXT:    ^bb0(%g: index):
// IM2COL-NEXT:      %rows = memref.collapse_shape %out0 {{.*}} into memref<2x6x160xf32>
// IM2COL:           %slot = arith.muli %g
// IM2COL:           scf.for %it =
// IM2COL:             scf.for %rr =
// IM2COL:               scf.for %c =
// IM2COL:                 scf.for %k0 =
// IM2COL:                   scf.for %k1 =
// IM2COL:                     scf.for %col =
// IM2COL:                       memref.load %{{.*}}[%{{.*}}, %c, %{{.*}}, %{{.*}}] : memref<2x16x10x22xf32>
// IM2COL:                       memref.store %{{.*}}, %patch[%{{.*}}] : memref<46080xf32>
// IM2COL-NOT:         scf.for %f =
// IM2COL:             micro.mma %w[%{{.*}}], %patch[%slot], %{{.*}}, %rows[%item, %{{.*}}, %{{.*}}], %[[STORES]] {rows = 6 : i64, cols = 32 : i64, lanes = 16 : i64, strides = array<i64: 144, 1, 160>}
// IM2COL-COUNT-4:     micro.mma %w
// IM2COL:             scf.for %f =
// IM2COL:                 arith.maximumf
func.func @tiled(%x: tensor<2x16x8x20xf32>, %w: tensor<6x16x3x3xf32>, %b: tensor<6x1x1xf32>) -> tensor<2x6x8x20xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 1 : tensor<2x16x8x20xf32>, tensor<6x16x3x3xf32> -> tensor<2x6x8x20xf32>
  %1 = tess.add %0, %b : tensor<2x6x8x20xf32>, tensor<6x1x1xf32> -> tensor<2x6x8x20xf32>
  %2 = tess.relu %1 : tensor<2x6x8x20xf32>
  func.return %2 : tensor<2x6x8x20xf32>
}

// 8 channels (72 deep, under min-depth for the direct form): im2col, 108 pixels a tile
// (the image's 6 rows of 18), 32 + 32 + 32 + 12 columns.
// CHECK-LABEL: func.func private @shallow_kernel_0(
// CHECK:         %patch = memref.alloc() {alignment = 64 : i64} : memref<15552xf32>
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%g: index):
// CHECK-NEXT:      %rows = memref.collapse_shape %out0 {{.*}} into memref<2x6x108xf32>
// CHECK-COUNT-3: micro.mma %w[%{{.*}}], %patch[%{{.*}}], {{.*}} {rows = 6 : i64, cols = 32 : i64, lanes = 16 : i64, strides = array<i64: 72, 1, 108>}
// CHECK:         micro.mma %w[%{{.*}}], %patch[%{{.*}}], {{.*}} {rows = 6 : i64, cols = 12 : i64, lanes = 12 : i64, strides = array<i64: 72, 1, 108>}
func.func @shallow(%x: tensor<2x8x8x20xf32>, %w: tensor<6x8x3x3xf32>) -> tensor<2x6x6x18xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x8x8x20xf32>, tensor<6x8x3x3xf32> -> tensor<2x6x6x18xf32>
  func.return %0 : tensor<2x6x6x18xf32>
}

// Stride 2: the gather reads every other input column (x[n, c, 2*o1 + k0, 2*col + k1]),
// the product reads the patch with unit stride.
// CHECK-LABEL: func.func private @strided_kernel_0(
// CHECK:         %patch = memref.alloc() {alignment = 64 : i64} : memref<11520xf32>
// CHECK:         scf.for %col =
// CHECK:           %[[TWICE:.*]] = arith.muli %col, %{{.*}} : index
// CHECK:           %[[SPOT:.*]] = arith.addi %[[TWICE]], %k1 : index
// CHECK:           memref.load %x[%item, %c, %{{.*}}, %[[SPOT]]] : memref<2x16x9x21xf32>
// CHECK:         micro.mma %w[%{{.*}}], %patch[%slot], {{.*}} {rows = 6 : i64, cols = 32 : i64, lanes = 16 : i64, strides = array<i64: 144, 1, 40>}
// DIRECT-LABEL: func.func private @strided_kernel_0(
// DIRECT-NOT:   micro.mma
// DIRECT-LABEL: func.func @one_channel(
func.func @strided(%x: tensor<2x16x9x21xf32>, %w: tensor<6x16x3x3xf32>) -> tensor<2x6x4x10xf32> {
  %0 = tess.conv %x, %w strides = [2, 2] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x16x9x21xf32>, tensor<6x16x3x3xf32> -> tensor<2x6x4x10xf32>
  func.return %0 : tensor<2x6x4x10xf32>
}

// CHECK-LABEL: func.func private @one_channel_kernel_0(
// CHECK-NOT:   micro.mma
// CHECK-LABEL: func.func @many_taps(
func.func @one_channel(%x: tensor<2x1x8x20xf32>, %w: tensor<6x1x3x3xf32>) -> tensor<2x6x6x18xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x1x8x20xf32>, tensor<6x1x3x3xf32> -> tensor<2x6x6x18xf32>
  func.return %0 : tensor<2x6x6x18xf32>
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
