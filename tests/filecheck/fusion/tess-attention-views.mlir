// tess-attention-views: the head split (`reshape`, `transpose(1, 2)`) before an attention
// kernel and the merge after it are no copy kernels: the call reads the reshaped matmul
// result with layout (0, 2, 1, 3) and writes its output where the merge's copy would
// have put it (layout: the inverse permutation); another reader of that output (a
// generic) reads it through its map composed with the layout.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-attention-views' | filecheck %s

func.func @heads(%x: tensor<2x8x6xf32>, %w: tensor<6x6xf32>) -> (tensor<2x8x6xf32>, tensor<2x3x8x2xf32>) {
  %h = tess.matmul %x, %w : tensor<2x8x6xf32>, tensor<6x6xf32> -> tensor<2x8x6xf32>
  %r = tess.reshape %h : tensor<2x8x6xf32> -> tensor<2x8x3x2xf32>
  %q = tess.permute %r dims = [0, 2, 1, 3] : tensor<2x8x3x2xf32> -> tensor<2x3x8x2xf32>
  %o = tess.attention %q, %q, %q scale = 0.5 causal : tensor<2x3x8x2xf32>, tensor<2x3x8x2xf32>, tensor<2x3x8x2xf32> -> tensor<2x3x8x2xf32>
  %t = tess.permute %o dims = [0, 2, 1, 3] : tensor<2x3x8x2xf32> -> tensor<2x8x3x2xf32>
  %m = tess.reshape %t : tensor<2x8x3x2xf32> -> tensor<2x8x6xf32>
  %s = tess.mul %o, %o : tensor<2x3x8x2xf32>, tensor<2x3x8x2xf32> -> tensor<2x3x8x2xf32>
  func.return %m, %s : tensor<2x8x6xf32>, tensor<2x3x8x2xf32>
}

// CHECK-LABEL: func.func @heads
// CHECK:         %[[R:.*]] = tensor.expand_shape
// CHECK-SAME:      into tensor<2x8x3x2xf32>
// CHECK-NEXT:    %[[O:.*]] = func.call @attention_kernel_0(%[[R]], %[[R]], %[[R]])
// CHECK-SAME:      -> tensor<2x8x3x2xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.collapse_shape %[[O]]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME:      ins(%[[O]], %[[O]] : tensor<2x8x3x2xf32>, tensor<2x8x3x2xf32>)
// CHECK-SAME:      tess.op = "tess.mul"
// CHECK-NOT:     tess.permute
// CHECK:         func.func private @attention_kernel_0(tensor<2x8x3x2xf32>, tensor<2x8x3x2xf32>, tensor<2x8x3x2xf32>) -> tensor<2x8x3x2xf32>
// CHECK-SAME:      layouts = [array<i64: 0, 2, 1, 3>, array<i64: 0, 2, 1, 3>, array<i64: 0, 2, 1, 3>, array<i64: 0, 2, 1, 3>]
