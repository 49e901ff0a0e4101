// tess-to-linalg: every tess op becomes a linalg.generic on tensors whose destination is a
// tensor.empty; broadcasting lives in the indexing maps (dropped leading dims, constant-0
// results for size-1 dims), reductions are an init generic plus `reduction` iterators.
// RUN: tessc-opt %s -p tess-to-linalg | filecheck %s

// A broadcasting zip: (3,1,5) + (4,1) -> (3,4,5).
func.func @add(%a: tensor<3x1x5xf32>, %b: tensor<4x1xf32>) -> tensor<3x4x5xf32> {
  %0 = tess.add %a, %b : tensor<3x1x5xf32>, tensor<4x1xf32> -> tensor<3x4x5xf32>
  func.return %0 : tensor<3x4x5xf32>
}
// CHECK-LABEL: func.func @add(%a: tensor<3x1x5xf32>, %b: tensor<4x1xf32>) -> tensor<3x4x5xf32> {
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<3x4x5xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, 0, d2)>, affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %b : tensor<3x1x5xf32>, tensor<4x1xf32>) outs(%[[E]] : tensor<3x4x5xf32>) attrs = {tess.op = "tess.add"} {
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<3x4x5xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<3x4x5xf32>

// Map bodies: sigmoid is 1 / (1 + exp(-x)), relu is maximumf(x, 0), comparisons select 1/0.
func.func @maps(%a: tensor<4xf64>, %b: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %0 = tess.sigmoid %a : tensor<4xf64>
  %1 = tess.relu %a : tensor<4xf64>
  %2 = tess.lt %a, %b : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  func.return %0, %1, %2 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}
// CHECK-LABEL: func.func @maps(
// CHECK:         ^{{.*}}(%[[X:.*]]: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:      %[[NEG:.*]] = arith.negf %[[X]] : f64
// CHECK-NEXT:      %[[EXP:.*]] = math.exp %[[NEG]] : f64
// CHECK-NEXT:      %[[DEN:.*]] = arith.addf %[[ONE]], %[[EXP]] : f64
// CHECK-NEXT:      %[[SIG:.*]] = arith.divf %[[ONE]], %[[DEN]] : f64
// CHECK-NEXT:      linalg.yield %[[SIG]] : f64
// CHECK:         ^{{.*}}(%[[X:.*]]: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:      %[[RELU:.*]] = arith.maximumf %[[X]], %[[ZERO]] : f64
// CHECK-NEXT:      linalg.yield %[[RELU]] : f64
// CHECK:         ^{{.*}}(%[[X:.*]]: f64, %[[Y:.*]]: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpf olt, %[[X]], %[[Y]] : f64
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[LT]], %[[ONE]], %[[ZERO]] : f64
// CHECK-NEXT:      linalg.yield %[[SEL]] : f64

// Reductions: keepdim maps the reduced dims to a constant 0; max starts at -inf; mean
// divides the sum by the count in a scale generic.
func.func @reduce(%a: tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<3xf32>, tensor<2xf32>) {
  %0 = tess.sum %a dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %1 = tess.reduce_max %a dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %2 = tess.mean %a dims = [1, 2] : tensor<2x3x4xf32> -> tensor<2xf32>
  func.return %0, %1, %2 : tensor<2x1x4xf32>, tensor<3xf32>, tensor<2xf32>
}
// CHECK-LABEL: func.func @reduce(
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x1x4xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%[[E]] : tensor<2x1x4xf32>) {
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: f32):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      linalg.yield %[[ZERO]] : f32
// CHECK-NEXT:    } -> tensor<2x1x4xf32>
// CHECK-NEXT:    %[[SUM:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, 0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<2x1x4xf32>) attrs = {tess.op = "tess.sum"} {
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[ADD:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<2x1x4xf32>
// CHECK:           %[[NEGINF:.*]] = arith.constant 0xff800000 : f32
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction"]} {{.*}} attrs = {tess.op = "tess.reduce_max"} {
// CHECK:           arith.maximumf
// CHECK:         %[[MSUM:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0)>], iterator_types = ["parallel", "reduction", "reduction"]} {{.*}} attrs = {tess.op = "tess.mean"} {
// CHECK:         linalg.generic {{.*}} ins(%[[MSUM]] : tensor<2xf32>) {{.*}} attrs = {tess.op = "tess.mean"} {
// CHECK-NEXT:    ^{{.*}}(%[[S:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[COUNT:.*]] = arith.constant 1.200000e+01 : f32
// CHECK-NEXT:      %[[MEAN:.*]] = arith.divf %[[S]], %[[COUNT]] : f32
// CHECK-NEXT:      linalg.yield %[[MEAN]] : f32

// Batched matmul with a broadcast batch dim: loops (b, i, j, k), k a reduction; the rank-2
// operand drops the batch loop.
func.func @matmul(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = tess.matmul %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  func.return %0 : tensor<2x3x5xf32>
}
// CHECK-LABEL: func.func @matmul(
// CHECK:         %[[INIT:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x5xf32>) {
// CHECK:         %[[MM:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<2x3x4xf32>, tensor<4x5xf32>) outs(%[[INIT]] : tensor<2x3x5xf32>) attrs = {tess.op = "tess.matmul"} {
// CHECK-NEXT:    ^{{.*}}(%[[L:.*]]: f32, %[[R:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[L]], %[[R]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<2x3x5xf32>

// Reshape is a view: one collapse or expand when a reassociation fits, else via 1-D.
func.func @reshape(%a: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<2x3x2x2xf32>, tensor<4x6xf32>) {
  %0 = tess.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = tess.reshape %a : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %2 = tess.reshape %a : tensor<2x3x4xf32> -> tensor<4x6xf32>
  func.return %0, %1, %2 : tensor<6x4xf32>, tensor<2x3x2x2xf32>, tensor<4x6xf32>
}
// CHECK-LABEL: func.func @reshape(
// CHECK-NEXT:    %[[C:.*]] = tensor.collapse_shape %a {{\[}}[0 : i64, 1 : i64], [2 : i64]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK-NEXT:    %[[X:.*]] = tensor.expand_shape %a {{\[}}[0 : i64], [1 : i64], [2 : i64, 3 : i64]] output_shape [2, 3, 2, 2] : tensor<2x3x4xf32> into tensor<2x3x2x2xf32>
// CHECK-NEXT:    %[[FLAT:.*]] = tensor.collapse_shape %a {{\[}}[0 : i64, 1 : i64, 2 : i64]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK-NEXT:    %[[T:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0 : i64, 1 : i64]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
// CHECK-NEXT:    func.return %[[C]], %[[X]], %[[T]]

// Permute reads the input through the inverse permutation; broadcast_to is a copy.
func.func @shape_ops(%a: tensor<2x3x4xf32>, %c: tensor<3x1xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = tess.permute %a dims = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = tess.broadcast_to %c : tensor<3x1xf32> -> tensor<2x3x4xf32>
  func.return %0, %1 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @shape_ops(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2, d0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a : tensor<2x3x4xf32>) {{.*}} attrs = {tess.op = "tess.permute"} {
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[X]] : f32
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%c : tensor<3x1xf32>) {{.*}} attrs = {tess.op = "tess.broadcast_to"} {

// Rank 0: no loops, maps () -> (); fill and select.
func.func @rank0(%s: tensor<f32>, %a: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %0 = tess.fill 2.5 : tensor<f32>
  %1 = tess.mul %s, %0 : tensor<f32>, tensor<f32> -> tensor<f32>
  %2 = tess.select %a, %a, %1 : tensor<3xf32>, tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  func.return %1, %2 : tensor<f32>, tensor<3xf32>
}
// CHECK-LABEL: func.func @rank0(
// CHECK:         %[[FILL:.*]] = linalg.generic {indexing_maps = [affine_map<() -> ()>], iterator_types = []} outs(%{{.*}} : tensor<f32>) attrs = {tess.op = "tess.fill"} {
// CHECK:           arith.constant 2.500000e+00 : f32
// CHECK:         %[[MUL:.*]] = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%s, %[[FILL]] : tensor<f32>, tensor<f32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %a, %[[MUL]] : tensor<3xf32>, tensor<3xf32>, tensor<f32>)
// CHECK-NEXT:    ^{{.*}}(%[[C:.*]]: f32, %[[L:.*]]: f32, %[[R:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[NZ:.*]] = arith.cmpf une, %[[C]], %[[Z]] : f32
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[NZ]], %[[L]], %[[R]] : f32
// CHECK-NEXT:      linalg.yield %[[SEL]] : f32
// CHECK-NOT:     tess.

// tess.erf is math.erf in the generic's body (Numba's math.erf on CPU and CUDA).
// CHECK-LABEL: func.func @erf
// CHECK:         linalg.generic
// CHECK:           math.erf %{{.*}} : f32
func.func @erf(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tess.erf %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// tess.floor, tess.ceil and tess.round are math.floor, math.ceil and math.roundeven
// (halves to even, NumPy's round).
// CHECK-LABEL: func.func @rounding
// CHECK:         linalg.generic
// CHECK:           math.floor %{{.*}} : f64
// CHECK:         linalg.generic
// CHECK:           math.ceil %{{.*}} : f64
// CHECK:         linalg.generic
// CHECK:           math.roundeven %{{.*}} : f64
func.func @rounding(%x: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) {
  %0 = tess.floor %x : tensor<4xf64>
  %1 = tess.ceil %x : tensor<4xf64>
  %2 = tess.round %x : tensor<4xf64>
  func.return %0, %1, %2 : tensor<4xf64>, tensor<4xf64>, tensor<4xf64>
}
