// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-tile-dot,canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA

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
