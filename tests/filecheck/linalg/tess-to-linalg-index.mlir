// The indexing ops lower to linalg.generic: a gather reads its captured source with
// tensor.extract at the normalised, clamped index; one_hot compares the label with
// linalg.index; argmax is a two-output reduction; a slice is a view.
// tess-bufferize turns the captured reads into memref.loads, and tess-fuse keeps the
// gather opaque while one_hot fuses into its consumer.
// RUN: tessc-opt %s -p tess-to-linalg | filecheck %s
// RUN: tessc-opt %s -p tess-to-linalg,tess-bufferize | filecheck %s --check-prefix=BUF
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse{report=true}' | filecheck %s --check-prefix=FUSE

// CHECK-LABEL: func.func @take
// CHECK:       linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:    ins(%i : tensor<4xi64>)
// CHECK:       arith.index_cast %{{.*}} : i64 to index
// CHECK:       arith.cmpi slt
// CHECK:       arith.maxsi
// CHECK:       arith.minsi
// CHECK:       %[[J:.*]] = linalg.index 1 : index
// CHECK:       tensor.extract %x[%{{.*}}, %[[J]]] : tensor<5x3xf32>
// BUF-LABEL:   func.func @take
// BUF:         memref.load %x[%{{.*}}, %{{.*}}] : memref<5x3xf32>
// BUF-NOT:     tensor.extract
// FUSE-LABEL:  func.func @take
// FUSE:        tess.kind = "opaque"
func.func @take(%x: tensor<5x3xf32>, %i: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  %1 = tess.exp %0 : tensor<4x3xf32>
  func.return %1 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @one_hot_argmax
// CHECK:       linalg.generic
// CHECK-SAME:    tess.op = "tess.one_hot"
// CHECK:       %[[C:.*]] = linalg.index 1 : index
// CHECK:       arith.cmpi eq, %{{.*}}, %[[C]] : index
// CHECK:       linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME:    outs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xi64>)
// CHECK:       arith.cmpf ugt
// CHECK:       arith.cmpf ord
// CHECK:       linalg.yield %{{.*}}, %{{.*}} : f32, i64
// The one-hot fuses into the subtraction (same loops): one generic, no one-hot tensor.
// FUSE-LABEL:  func.func @one_hot_argmax
// FUSE:        tess.fused = ["tess.one_hot", "tess.sub"]
func.func @one_hot_argmax(%x: tensor<4x10xf32>, %l: tensor<4xi32>) -> (tensor<4x10xf32>, tensor<4xi64>) {
  %0 = tess.one_hot %l : tensor<4xi32> -> tensor<4x10xf32>
  %1 = tess.sub %x, %0 : tensor<4x10xf32>, tensor<4x10xf32> -> tensor<4x10xf32>
  %2 = tess.argmax %x dim = [1] : tensor<4x10xf32> -> tensor<4xi64>
  func.return %1, %2 : tensor<4x10xf32>, tensor<4xi64>
}

// A slice is a view (tensor.extract_slice, a memref.subview once bufferized); a dim with
// a negative step is reversed by a copy generic over the view (which also reads the view
// through the identity map, unused: the reversed loop's extent wherever tess-fuse fuses
// the copy; tests/filecheck/fusion/slice-views.mlir).
// CHECK-LABEL: func.func @slice
// CHECK:       %[[V:.*]] = tensor.extract_slice %x[1, 0] [3, 5] [2, 1] : tensor<6x5xf32> to tensor<3x5xf32>
// CHECK:       linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, ((d1 * -1) + 4))>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:    ins(%[[V]], %[[V]] : tensor<3x5xf32>, tensor<3x5xf32>)
// BUF-LABEL:   func.func @slice
// BUF:         memref.subview %x[1, 0] [3, 5] [2, 1]
func.func @slice(%x: tensor<6x5xf32>) -> tensor<3x5xf32> {
  %0 = tess.slice %x offsets = [1, 4] strides = [2, -1] : tensor<6x5xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}
