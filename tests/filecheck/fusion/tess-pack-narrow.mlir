// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-pack-narrow' | filecheck %s

// A narrow right-hand side (10 columns, dots of 64) gets a transposed copy, and the
// contraction reads it at (j, k): k walks the last dim of both operands.
func.func @last_layer(%h: tensor<16x64xf32>, %w: tensor<64x10xf32>, %b: tensor<10xf32>) -> tensor<16x10xf32> {
  %m = tess.matmul %h, %w : tensor<16x64xf32>, tensor<64x10xf32> -> tensor<16x10xf32>
  %z = tess.add %m, %b : tensor<16x10xf32>, tensor<10xf32> -> tensor<16x10xf32>
  func.return %z : tensor<16x10xf32>
}

// CHECK-LABEL: func.func @last_layer(
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<10x64xf32>
// CHECK-NEXT:    %[[P:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<64x10xf32>) outs(%[[E]] : tensor<10x64xf32>) attrs =  {tess.op = "tess.permute"}
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%h, %[[P]] : tensor<16x64xf32>, tensor<10x64xf32>)
// CHECK-SAME:      {tess.op = "tess.matmul"}

// 16 columns: i-k-j vectorises; left alone.
func.func @wide(%h: tensor<16x64xf32>, %w: tensor<64x16xf32>) -> tensor<16x16xf32> {
  %m = tess.matmul %h, %w : tensor<16x64xf32>, tensor<64x16xf32> -> tensor<16x16xf32>
  func.return %m : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @wide(
// CHECK-NOT:     tess.permute
// CHECK:         affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-SAME:      ins(%h, %w

// Dots of 31 are too short to pay for the copy; left alone.
func.func @shallow(%h: tensor<16x31xf32>, %w: tensor<31x10xf32>) -> tensor<16x10xf32> {
  %m = tess.matmul %h, %w : tensor<16x31xf32>, tensor<31x10xf32> -> tensor<16x10xf32>
  func.return %m : tensor<16x10xf32>
}

// CHECK-LABEL: func.func @shallow(
// CHECK-NOT:     tess.permute
// CHECK:         ins(%h, %w

// `relu(p).T @ d` (an MLP last layer's weight gradient): the left operand is a
// transposing copy, so the product runs transposed, `(d.T @ relu(p)).T`: relu(p) read
// in its own layout (k, i), the 10 x 16 result initialised transposed, and only that
// result copied back; no 64 x 16 transposed copy, no copy of `d`.
func.func @weight_grad(%p: tensor<64x16xf32>, %d: tensor<64x10xf32>) -> tensor<16x10xf32> {
  %h = tess.relu %p : tensor<64x16xf32>
  %t = tess.permute %h dims = [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %m = tess.matmul %t, %d : tensor<16x64xf32>, tensor<64x10xf32> -> tensor<16x10xf32>
  func.return %m : tensor<16x10xf32>
}

// CHECK-LABEL: func.func @weight_grad(
// CHECK:         %[[Q:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<64x16xf32>) outs(%{{.*}} : tensor<64x16xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[I:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<10x16xf32>)
// CHECK:         %[[C:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d1, d0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[Q]], %d : tensor<64x16xf32>, tensor<64x10xf32>) outs(%[[I]] : tensor<10x16xf32>)
// CHECK:         %[[B:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[C]] : tensor<10x16xf32>) outs(%{{.*}} : tensor<16x10xf32>) attrs =  {tess.op = "tess.permute"}
// CHECK:         func.return %[[B]]
