// The convolution ops lower to linalg.generic with convolution indexing maps, MLIR's
// linalg.conv_2d_nchw_fchw as the model: loops (n, f, oh, ow, c, kh, kw), output dims
// parallel, (c, kh, kw) reductions, the input read at (n, c, oh*s + kh*d, ow*s + kw*d).
// Padding is a separate generic writing the padded input (a select on in-bounds indices);
// groups split channels with expand_shape views (linalg.conv_1d_ngcw_gfcw); a pool reads
// a shape-only window operand as MLIR's pooling ops do.
// RUN: tessc-opt %s -p tess-to-linalg | filecheck %s

// CHECK-LABEL: func.func @conv2d
// CHECK:       %[[PADDED:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME:    outs(%{{.*}} : tensor<2x3x9x11xf32>) attrs =  {tess.op = "tess.pad"}
// CHECK:         tensor.extract %x[
// CHECK:         arith.andi
// CHECK:         arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:       linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, ((d2 * 2) + d5), ((d3 * 2) + (d6 * 2)))>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>],
// CHECK-SAME:    iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME:    ins(%[[PADDED]], %w : tensor<2x3x9x11xf32>, tensor<4x3x3x3xf32>)
// CHECK-SAME:    attrs =  {tess.op = "tess.conv"}
// CHECK:         arith.mulf
// CHECK-NEXT:    arith.addf
func.func @conv2d(%x: tensor<2x3x7x7xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32> {
  %0 = tess.conv %x, %w strides = [2, 2] dilations = [1, 2] padding_low = [1, 2] padding_high = [1, 2] groups = 1 : tensor<2x3x7x7xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x4x4xf32>
  func.return %0 : tensor<2x4x4x4xf32>
}

// CHECK-LABEL: func.func @grouped
// CHECK:       %[[X:.*]] = tensor.expand_shape %x {{\[}}[0 : i64], [1 : i64, 2 : i64], [3 : i64]] output_shape [1, 2, 2, 5]
// CHECK:       %[[W:.*]] = tensor.expand_shape %w {{\[}}[0 : i64, 1 : i64], [2 : i64], [3 : i64]] output_shape [2, 3, 2, 3]
// CHECK:       %[[Y:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, (d3 + d5))>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d2, d4, d5)>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>],
// CHECK-SAME:    ins(%[[X]], %[[W]] : tensor<1x2x2x5xf32>, tensor<2x3x2x3xf32>)
// CHECK:       tensor.collapse_shape %[[Y]] {{\[}}[0 : i64], [1 : i64, 2 : i64], [3 : i64]] : tensor<1x2x3x3xf32> into tensor<1x6x3xf32>
func.func @grouped(%x: tensor<1x4x5xf32>, %w: tensor<6x2x3xf32>) -> tensor<1x6x3xf32> {
  %0 = tess.conv %x, %w strides = [1] dilations = [1] padding_low = [0] padding_high = [0] groups = 2 : tensor<1x4x5xf32>, tensor<6x2x3xf32> -> tensor<1x6x3xf32>
  func.return %0 : tensor<1x6x3xf32>
}

// CHECK-LABEL: func.func @max_pool
// CHECK:       %[[WINDOW:.*]] = tensor.empty() : tensor<2x2xf32>
// CHECK:       linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d2 * 2) + d4), ((d3 * 2) + d5))>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>,
// CHECK-SAME:    affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>],
// CHECK-SAME:    ins(%x, %[[WINDOW]] : tensor<1x2x5x5xf32>, tensor<2x2xf32>)
// CHECK-SAME:    attrs =  {tess.op = "tess.pool"}
// CHECK:         arith.maximumf
func.func @max_pool(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x2x2xf32> {
  %0 = tess.pool %x kind = "max" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<1x2x5x5xf32> -> tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
