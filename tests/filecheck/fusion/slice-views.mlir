// Static indexing costs no kernel of its own where the consuming loop can index the source
// directly. tess-to-linalg lowers a reversed slice (x[::-1], x[4:0:-2]) to a copy reading
// `n - 1 - i`, and a dropped dim (x[0], x[..., -1]) to a copy reading the slice at 0;
// tess-fuse fuses both into their consumers, which then read the source (or its strided
// subview) through the composed map. A reversed copy also carries its source through the
// identity map, unused, so that a reduction over the reversed dim keeps its extent. A
// slice of a reversed slice is one slice of the source. Only a result returned as is
// stays a copy.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse{report=true}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-tile,tess-tile-dot,tess-parallel-columns,tess-expand-math,canonicalize,cse' | filecheck %s --check-prefix=LOOPS

// x[::-1] + 1: one generic reading x backwards, one kernel, no intermediate buffer.
// CHECK-LABEL: func.func @reversed_add
// CHECK-NOT:     tensor.extract_slice
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (((d0 * -1) + 5), d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%x, %x : tensor<6x5xf32>, tensor<6x5xf32>)
// CHECK-SAME:      tess.fused = ["tess.slice", "tess.fill", "tess.add"]
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// LOOPS-LABEL: func.func @reversed_add(
// LOOPS-NOT:     memref.alloc
// LOOPS:         func.call @reversed_add_kernel_0(%x, %out0)
// LOOPS-NEXT:    func.return
// LOOPS:       func.func private @reversed_add_kernel_0(%x: memref<6x5xf32>, %out0: memref<6x5xf32>)
// LOOPS:         %[[R:.*]] = arith.muli %i0, %{{.*}} : index
// LOOPS:         %[[I:.*]] = arith.addi %[[R]], %{{.*}} : index
// LOOPS:         memref.load %x[%[[I]], %i1] : memref<6x5xf32>
// LOOPS-NOT:     func.func private @reversed_add_kernel_1
func.func @reversed_add(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %0 = tess.slice %x offsets = [5, 0] strides = [-1, 1] : tensor<6x5xf32> -> tensor<6x5xf32>
  %1 = tess.fill 1.0 : tensor<f32>
  %2 = tess.add %0, %1 : tensor<6x5xf32>, tensor<f32> -> tensor<6x5xf32>
  func.return %2 : tensor<6x5xf32>
}

// x[0] * 2: the multiply reads row 0 of x through its subview, at (0, d0).
// CHECK-LABEL: func.func @row_mul
// CHECK:         %[[V:.*]] = tensor.extract_slice %x[0, 0] [1, 5] [1, 1]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (0, d0)>, affine_map<(d0) -> (d0)>]
// CHECK-SAME:      ins(%[[V]] : tensor<1x5xf32>)
// CHECK-SAME:      tess.fused = ["tess.reshape", "tess.fill", "tess.mul"]
// CHECK-NOT:     tess.fusion_refused
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// LOOPS-LABEL: func.func @row_mul(
// LOOPS-NEXT:    %[[V:.*]] = memref.subview %x[0, 0] [1, 5] [1, 1]
// LOOPS-NEXT:    func.call @row_mul_kernel_0(%[[V]], %out0)
// LOOPS-NEXT:    func.return
// LOOPS-NOT:   func.func private @row_mul_kernel_1
func.func @row_mul(%x: tensor<6x5xf32>) -> tensor<5xf32> {
  %0 = tess.slice %x offsets = [0, 0] strides = [1, 1] : tensor<6x5xf32> -> tensor<1x5xf32>
  %1 = tess.reshape %0 : tensor<1x5xf32> -> tensor<5xf32>
  %2 = tess.fill 2.0 : tensor<f32>
  %3 = tess.mul %1, %2 : tensor<5xf32>, tensor<f32> -> tensor<5xf32>
  func.return %3 : tensor<5xf32>
}

// x[4:0:-2, 1] * 3: rows 2 and 4 as a strided subview, read backwards, column fixed at 0.
// CHECK-LABEL: func.func @stepped_column
// CHECK:         %[[V:.*]] = tensor.extract_slice %x[2, 1] [2, 1] [2, 1]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (((d0 * -1) + 1), 0)>, affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (d0)>]
// CHECK-SAME:      tess.fused = ["tess.slice", "tess.reshape", "tess.fill", "tess.mul"]
// CHECK-NOT:     linalg.generic
// LOOPS-LABEL: func.func @stepped_column(
// LOOPS-NEXT:    memref.subview %x[2, 1] [2, 1] [2, 1]
// LOOPS-NEXT:    func.call @stepped_column_kernel_0
// LOOPS-NEXT:    func.return
// LOOPS-NOT:   func.func private @stepped_column_kernel_1
func.func @stepped_column(%x: tensor<6x5xf32>) -> tensor<2xf32> {
  %0 = tess.slice %x offsets = [4, 1] strides = [-2, 1] : tensor<6x5xf32> -> tensor<2x1xf32>
  %1 = tess.reshape %0 : tensor<2x1xf32> -> tensor<2xf32>
  %2 = tess.fill 3.0 : tensor<f32>
  %3 = tess.mul %1, %2 : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  func.return %3 : tensor<2xf32>
}

// x[:, ::-1].sum(1): the reduction reads x backwards; the unused identity read gives d1 its
// extent. One kernel (the init and the reduction share the row loop).
// CHECK-LABEL: func.func @reversed_row_sum
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, ((d1 * -1) + 4))>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      ins(%x, %x : tensor<6x5xf32>, tensor<6x5xf32>)
// CHECK-SAME:      tess.fused = ["tess.slice", "tess.sum"]
// LOOPS-LABEL: func.func @reversed_row_sum(
// LOOPS-NEXT:    func.call @reversed_row_sum_kernel_0(%out0, %x)
// LOOPS-NEXT:    func.return
// LOOPS:         scf.for %i1 =
// LOOPS:           memref.load %x[%i0, %{{.*}}] : memref<6x5xf32>
// LOOPS-NOT:   func.func private @reversed_row_sum_kernel_1
func.func @reversed_row_sum(%x: tensor<6x5xf32>) -> tensor<6xf32> {
  %0 = tess.slice %x offsets = [0, 4] strides = [1, -1] : tensor<6x5xf32> -> tensor<6x5xf32>
  %1 = tess.sum %0 dims = [1] : tensor<6x5xf32> -> tensor<6xf32>
  func.return %1 : tensor<6xf32>
}

// x[..., -1][:, None] * x: the dropped dim comes back as a broadcast read of the column.
// CHECK-LABEL: func.func @last_column_times
// CHECK:         %[[V:.*]] = tensor.extract_slice %x[0, 4] [6, 1] [1, 1]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[V]], %x : tensor<6x1xf32>, tensor<6x5xf32>)
// CHECK-NOT:     linalg.generic
// LOOPS-LABEL: func.func @last_column_times(
// LOOPS-NEXT:    memref.subview
// LOOPS-NEXT:    func.call @last_column_times_kernel_0
// LOOPS-NEXT:    func.return
// LOOPS-NOT:   func.func private @last_column_times_kernel_1
func.func @last_column_times(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %0 = tess.slice %x offsets = [0, 4] strides = [1, 1] : tensor<6x5xf32> -> tensor<6x1xf32>
  %1 = tess.reshape %0 : tensor<6x1xf32> -> tensor<6xf32>
  %2 = tess.reshape %1 : tensor<6xf32> -> tensor<6x1xf32>
  %3 = tess.mul %2, %x : tensor<6x1xf32>, tensor<6x5xf32> -> tensor<6x5xf32>
  func.return %3 : tensor<6x5xf32>
}

// x[::-1][2, 1:4] is x[3, 1:4]: one subview, no reversed copy left behind.
// CHECK-LABEL: func.func @slice_of_reversed
// CHECK-NEXT:    %[[V:.*]] = tensor.extract_slice %x[3, 1] [1, 3] [1, 1]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (0, d0)>, affine_map<(d0) -> (d0)>]
// CHECK-SAME:      ins(%[[V]] : tensor<1x3xf32>)
// CHECK-NOT:     linalg.generic
// LOOPS-LABEL: func.func @slice_of_reversed(
// LOOPS-NEXT:    memref.subview %x[3, 1] [1, 3] [1, 1]
// LOOPS-NEXT:    func.call @slice_of_reversed_kernel_0
// LOOPS-NEXT:    func.return
// LOOPS-NOT:   func.func private @slice_of_reversed_kernel_1
func.func @slice_of_reversed(%x: tensor<6x5xf32>) -> tensor<3xf32> {
  %0 = tess.slice %x offsets = [5, 0] strides = [-1, 1] : tensor<6x5xf32> -> tensor<6x5xf32>
  %1 = tess.slice %0 offsets = [2, 1] strides = [1, 1] : tensor<6x5xf32> -> tensor<1x3xf32>
  %2 = tess.reshape %1 : tensor<1x3xf32> -> tensor<3xf32>
  %3 = tess.exp %2 : tensor<3xf32>
  func.return %3 : tensor<3xf32>
}

// Returned as is, a reversed slice is the one copy its result needs.
// CHECK-LABEL: func.func @returned
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (((d0 * -1) + 5), ((d1 * -1) + 4))>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      tess.op = "tess.slice"
func.func @returned(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %0 = tess.slice %x offsets = [5, 4] strides = [-1, -1] : tensor<6x5xf32> -> tensor<6x5xf32>
  func.return %0 : tensor<6x5xf32>
}
