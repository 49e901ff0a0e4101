// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot{min-macs=0 min-macs-long=0}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot{min-macs=0 min-macs-long=0},canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA
// The default gate (tile_dot.py: where it pays): nests under min-macs (2^12) multiply-adds,
// and nests of a dot of 64 or more (long-depth) under min-macs-long (2^18), stay plain.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot' | filecheck %s --check-prefix=GATE
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot{min-macs=2048 long-depth=33 min-macs-long=327680}' | filecheck %s --check-prefix=EDGE

// a @ b.T as a zip+reduce, (a[:, None, :] * b[None]).sum(-1): the reduction is the
// unit-stride dim of both operands. 4 x 4 outputs share
// one k loop whose 16 accumulators are loop-carried (no load or store of the output
// inside it); 130 columns are 32 tiles in 2 blocks of 16, then 2 leftover columns; 10
// rows are 2 tiles, then 2 leftover rows; the leftovers run the original nest.
func.func @mt(%a: tensor<10x1x16xf32>, %b: tensor<1x130x16xf32>) -> tensor<10x130xf32> {
  %p = tess.mul %a, %b : tensor<10x1x16xf32>, tensor<1x130x16xf32> -> tensor<10x130x16xf32>
  %s = tess.sum %p dims = [2] : tensor<10x130x16xf32> -> tensor<10x130xf32>
  func.return %s : tensor<10x130xf32>
}

// CHECK-LABEL: func.func private @mt_kernel_0(
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%jo: index, %ib: index):
// CHECK:           scf.for %ji =
// CHECK-NEXT:        %jb = arith.addi %{{.*}}, %ji : index
// CHECK-COUNT-16:    memref.store %{{.*}}, %out0[%{{.*}}, %{{.*}}] : memref<10x130xf32>
// CHECK-COUNT-16:    memref.load %out0
// CHECK-NEXT:        %{{.*}} = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%acc = %{{.*}}, %acc_1 = {{.*}}, %acc_15 = %{{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-NOT:           memref.store
// CHECK-NOT:           memref.load %out0
// CHECK-COUNT-8:       memref.load
// CHECK-NOT:           memref.load
// CHECK:               scf.yield
// CHECK-COUNT-16:    memref.store %{{.*}}, %out0
// CHECK:           scf.reduce
// CHECK-NEXT:    }) {tess.register_tile = array<i64: 4, 4>}
// CHECK:         "scf.parallel"
// CHECK:         "scf.parallel"
// CHECK-NOT:     "scf.parallel"
// CHECK:         func.return

// NUMBA-LABEL: def mt(a, b, out0):
// NUMBA:           for jo in range(2):
// NUMBA-NEXT:          for ib in range(2):
// NUMBA:                   for ji in range(16):
// NUMBA:                       for [[K:.*]] in range(16):
// NUMBA:                           acc, acc_0, {{.*}}, acc_14 = {{.*}}
// NUMBA:                       out0[i_2, j_2] = acc_14
// NUMBA:           for [[I:.*]] in range(8, 10):
// NUMBA-NEXT:          for [[J:.*]] in range(130):
// NUMBA-NEXT:              out0[[[I]], [[J]]] = np.float32(0.0)
// NUMBA:           for [[I:.*]] in range(8):
// NUMBA-NEXT:          for [[J:.*]] in range(128, 130):

// x @ W.T + c, then relu (nn.Linear's layout, as a zip+reduce): the epilogue is cloned
// per output after the accumulators are stored.
func.func @linear(%x: tensor<8x1x32xf64>, %w: tensor<1x8x32xf64>, %c: tensor<8xf64>) -> tensor<8x8xf64> {
  %p = tess.mul %x, %w : tensor<8x1x32xf64>, tensor<1x8x32xf64> -> tensor<8x8x32xf64>
  %y = tess.sum %p dims = [2] : tensor<8x8x32xf64> -> tensor<8x8xf64>
  %z = tess.add %y, %c : tensor<8x8xf64>, tensor<8xf64> -> tensor<8x8xf64>
  %r = tess.relu %z : tensor<8x8xf64>
  func.return %r : tensor<8x8xf64>
}

// CHECK-LABEL: func.func private @linear_kernel_0(
// CHECK:         scf.for {{.*}} iter_args({{.*}}) -> (f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64) {
// CHECK:         }
// CHECK-COUNT-16: memref.store %{{.*}}, %{{.*}} : memref<8x8xf64>
// CHECK:         arith.maximumf
// CHECK:         }) {tess.register_tile = array<i64: 4, 4>}
// CHECK-NOT:     "scf.parallel"
// CHECK:         func.return

// The MLP step's h.T @ dz as dot products: 128 x 10 outputs of a dot of 128, 163,840
// multiply-adds; and the same with a dot of 256, 327,680.
func.func @long_dot(%a: tensor<128x1x128xf32>, %b: tensor<1x10x128xf32>) -> tensor<128x10xf32> {
  %p = tess.mul %a, %b : tensor<128x1x128xf32>, tensor<1x10x128xf32> -> tensor<128x10x128xf32>
  %s = tess.sum %p dims = [2] : tensor<128x10x128xf32> -> tensor<128x10xf32>
  func.return %s : tensor<128x10xf32>
}

func.func @longer_dot(%a: tensor<128x1x256xf32>, %b: tensor<1x10x256xf32>) -> tensor<128x10xf32> {
  %p = tess.mul %a, %b : tensor<128x1x256xf32>, tensor<1x10x256xf32> -> tensor<128x10x256xf32>
  %s = tess.sum %p dims = [2] : tensor<128x10x256xf32> -> tensor<128x10xf32>
  func.return %s : tensor<128x10xf32>
}

// @mt: 20,800 multiply-adds of a dot of 16: tiled. @linear: 2,048: plain. @long_dot:
// plain. @longer_dot: tiled.
// GATE-LABEL: func.func private @mt_kernel_0(
// GATE:         tess.register_tile = array<i64: 4, 4>
// GATE-LABEL: func.func private @linear_kernel_0(
// GATE-NOT:     tess.register_tile
// GATE-LABEL: func.func private @long_dot_kernel_0(
// GATE-NOT:     tess.register_tile
// GATE-LABEL: func.func private @longer_dot_kernel_0(
// GATE:         tess.register_tile = array<i64: 4, 4>

// Each threshold is inclusive: @linear (2,048 of a dot of 32 < long-depth 33) and
// @longer_dot (327,680 of a dot of 256) are tiled at exactly the threshold; @long_dot
// (163,840 of a dot of 128) is still under min-macs-long.
// EDGE-LABEL: func.func private @mt_kernel_0(
// EDGE:         tess.register_tile = array<i64: 4, 4>
// EDGE-LABEL: func.func private @linear_kernel_0(
// EDGE:         tess.register_tile = array<i64: 4, 4>
// EDGE-LABEL: func.func private @long_dot_kernel_0(
// EDGE-NOT:     tess.register_tile
// EDGE-LABEL: func.func private @longer_dot_kernel_0(
// EDGE:         tess.register_tile = array<i64: 4, 4>
