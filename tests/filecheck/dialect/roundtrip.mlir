// Every tess op parses, verifies and prints in its custom form, and the generic form
// round-trips to the same custom form.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s --print-op-generic | tessc-opt | filecheck %s
// RUN: tessc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @unary(%x: tensor<3x4xf32>)
func.func @unary(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // CHECK-NEXT: %0 = tess.neg %x : tensor<3x4xf32>
  // CHECK-NEXT: %1 = tess.exp %0 : tensor<3x4xf32>
  // CHECK-NEXT: %2 = tess.log %1 : tensor<3x4xf32>
  // CHECK-NEXT: %3 = tess.relu %2 : tensor<3x4xf32>
  // CHECK-NEXT: %4 = tess.sigmoid %3 : tensor<3x4xf32>
  // CHECK-NEXT: %5 = tess.tanh %4 : tensor<3x4xf32>
  // CHECK-NEXT: %6 = tess.sqrt %5 : tensor<3x4xf32>
  // CHECK-NEXT: %7 = tess.reciprocal %6 : tensor<3x4xf32>
  // CHECK-NEXT: %8 = tess.abs %7 : tensor<3x4xf32>
  // CHECK-NEXT: func.return %8 : tensor<3x4xf32>
  // GENERIC-LABEL: "func.func"() <{sym_name = "unary"
  // GENERIC: %0 = "tess.neg"(%x) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %0 = tess.neg %x : tensor<3x4xf32>
  %1 = tess.exp %0 : tensor<3x4xf32>
  %2 = tess.log %1 : tensor<3x4xf32>
  %3 = tess.relu %2 : tensor<3x4xf32>
  %4 = tess.sigmoid %3 : tensor<3x4xf32>
  %5 = tess.tanh %4 : tensor<3x4xf32>
  %6 = tess.sqrt %5 : tensor<3x4xf32>
  %7 = tess.reciprocal %6 : tensor<3x4xf32>
  %8 = tess.abs %7 : tensor<3x4xf32>
  func.return %8 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @binary(%a: tensor<3x1xf32>, %b: tensor<4xf32>)
func.func @binary(%a: tensor<3x1xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  // CHECK-NEXT: %0 = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %1 = tess.sub %0, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %2 = tess.mul %a, %1 : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %3 = tess.div %2, %2 : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %4 = tess.max %3, %a : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %5 = tess.min %4, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %6 = tess.pow %5, %a : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %7 = tess.lt %6, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %8 = tess.gt %a, %7 : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %9 = tess.eq %8, %7 : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: func.return %9 : tensor<3x4xf32>
  // GENERIC-LABEL: "func.func"() <{sym_name = "binary"
  // GENERIC: %0 = "tess.add"(%a, %b) : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %0 = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %1 = tess.sub %0, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %2 = tess.mul %a, %1 : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %3 = tess.div %2, %2 : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %4 = tess.max %3, %a : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
  %5 = tess.min %4, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %6 = tess.pow %5, %a : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
  %7 = tess.lt %6, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %8 = tess.gt %a, %7 : tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %9 = tess.eq %8, %7 : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  func.return %9 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @reduce(%x: tensor<2x3x4xf32>)
func.func @reduce(%x: tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x4xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<2x3x1xf32>, tensor<f32>) {
  // CHECK-NEXT: %0 = tess.sum %x dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  // CHECK-NEXT: %1 = tess.sum %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  // CHECK-NEXT: %2 = tess.reduce_max %x dims = [0, 2] keepdim : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  // CHECK-NEXT: %3 = tess.reduce_max %x dims = [2, 0] : tensor<2x3x4xf32> -> tensor<3xf32>
  // CHECK-NEXT: %4 = tess.mean %x dims = [2] keepdim : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  // CHECK-NEXT: %5 = tess.mean %x dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  // GENERIC-LABEL: "func.func"() <{sym_name = "reduce"
  // GENERIC: %0 = "tess.sum"(%x) <{dims = array<i64: 1>, keepdim}> : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // GENERIC: %1 = "tess.sum"(%x) <{dims = array<i64: 1>}> : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %0 = tess.sum %x dims = [1] keepdim : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %1 = tess.sum %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %2 = tess.reduce_max %x dims = [0, 2] keepdim : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %3 = tess.reduce_max %x dims = [2, 0] : tensor<2x3x4xf32> -> tensor<3xf32>
  %4 = tess.mean %x dims = [2] keepdim : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %5 = tess.mean %x dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  func.return %0, %1, %2, %3, %4, %5 : tensor<2x1x4xf32>, tensor<2x4xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<2x3x1xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @shape(%x: tensor<3x4xf64>, %y: tensor<4x1xf64>, %r: tensor<4xf64>)
func.func @shape(%x: tensor<3x4xf64>, %y: tensor<4x1xf64>, %r: tensor<4xf64>) -> (tensor<2x6xf64>, tensor<4x3xf64>, tensor<2x4x5xf64>, tensor<3x4xf64>, tensor<3x4xf64>) {
  // CHECK-NEXT: %0 = tess.reshape %x : tensor<3x4xf64> -> tensor<2x6xf64>
  // CHECK-NEXT: %1 = tess.permute %x dims = [1, 0] : tensor<3x4xf64> -> tensor<4x3xf64>
  // CHECK-NEXT: %2 = tess.broadcast_to %y : tensor<4x1xf64> -> tensor<2x4x5xf64>
  // CHECK-NEXT: %3 = tess.fill 5.000000e-01 : tensor<3x4xf64>
  // CHECK-NEXT: %4 = tess.select %3, %x, %r : tensor<3x4xf64>, tensor<3x4xf64>, tensor<4xf64> -> tensor<3x4xf64>
  // GENERIC-LABEL: "func.func"() <{sym_name = "shape"
  // GENERIC: %1 = "tess.permute"(%x) <{dims = array<i64: 1, 0>}> : (tensor<3x4xf64>) -> tensor<4x3xf64>
  // GENERIC: %3 = "tess.fill"() <{value = 5.000000e-01 : f64}> : () -> tensor<3x4xf64>
  %0 = tess.reshape %x : tensor<3x4xf64> -> tensor<2x6xf64>
  %1 = tess.permute %x dims = [1, 0] : tensor<3x4xf64> -> tensor<4x3xf64>
  %2 = tess.broadcast_to %y : tensor<4x1xf64> -> tensor<2x4x5xf64>
  %3 = tess.fill 0.5 : tensor<3x4xf64>
  %4 = tess.select %3, %x, %r : tensor<3x4xf64>, tensor<3x4xf64>, tensor<4xf64> -> tensor<3x4xf64>
  func.return %0, %1, %2, %3, %4 : tensor<2x6xf64>, tensor<4x3xf64>, tensor<2x4x5xf64>, tensor<3x4xf64>, tensor<3x4xf64>
}

// CHECK-LABEL: func.func @matmul(%a: tensor<3x5xf32>, %b: tensor<5x4xf32>, %c: tensor<2x1x3x5xf32>, %d: tensor<6x5x4xf32>)
func.func @matmul(%a: tensor<3x5xf32>, %b: tensor<5x4xf32>, %c: tensor<2x1x3x5xf32>, %d: tensor<6x5x4xf32>) -> (tensor<3x4xf32>, tensor<2x6x3x4xf32>, tensor<2x1x3x4xf32>) {
  // CHECK-NEXT: %0 = tess.matmul %a, %b : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %1 = tess.matmul %c, %d : tensor<2x1x3x5xf32>, tensor<6x5x4xf32> -> tensor<2x6x3x4xf32>
  // CHECK-NEXT: %2 = tess.matmul %c, %b : tensor<2x1x3x5xf32>, tensor<5x4xf32> -> tensor<2x1x3x4xf32>
  %0 = tess.matmul %a, %b : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  %1 = tess.matmul %c, %d : tensor<2x1x3x5xf32>, tensor<6x5x4xf32> -> tensor<2x6x3x4xf32>
  %2 = tess.matmul %c, %b : tensor<2x1x3x5xf32>, tensor<5x4xf32> -> tensor<2x1x3x4xf32>
  func.return %0, %1, %2 : tensor<3x4xf32>, tensor<2x6x3x4xf32>, tensor<2x1x3x4xf32>
}

// Rank-0 tensors: a scalar is a tensor<f32>, and it broadcasts against anything.
// CHECK-LABEL: func.func @rank0(%s: tensor<f64>, %x: tensor<2x3xf64>)
func.func @rank0(%s: tensor<f64>, %x: tensor<2x3xf64>) -> (tensor<f64>, tensor<2x3xf64>, tensor<f64>, tensor<1x1xf64>, tensor<f64>, tensor<3x2xf64>) {
  // CHECK-NEXT: %0 = tess.exp %s : tensor<f64>
  // CHECK-NEXT: %1 = tess.mul %0, %x : tensor<f64>, tensor<2x3xf64> -> tensor<2x3xf64>
  // CHECK-NEXT: %2 = tess.sum %1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  // CHECK-NEXT: %3 = tess.reshape %2 : tensor<f64> -> tensor<1x1xf64>
  // CHECK-NEXT: %4 = tess.fill -2.000000e+00 : tensor<f64>
  // CHECK-NEXT: %5 = tess.broadcast_to %s : tensor<f64> -> tensor<3x2xf64>
  // CHECK-NEXT: %6 = tess.add %s, %4 : tensor<f64>, tensor<f64> -> tensor<f64>
  // CHECK-NEXT: %7 = tess.sum %s dims = [] : tensor<f64> -> tensor<f64>
  // CHECK-NEXT: %8 = tess.permute %s dims = [] : tensor<f64> -> tensor<f64>
  %0 = tess.exp %s : tensor<f64>
  %1 = tess.mul %0, %x : tensor<f64>, tensor<2x3xf64> -> tensor<2x3xf64>
  %2 = tess.sum %1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  %3 = tess.reshape %2 : tensor<f64> -> tensor<1x1xf64>
  %4 = tess.fill -2.0 : tensor<f64>
  %5 = tess.broadcast_to %s : tensor<f64> -> tensor<3x2xf64>
  %6 = tess.add %s, %4 : tensor<f64>, tensor<f64> -> tensor<f64>
  %7 = tess.sum %s dims = [] : tensor<f64> -> tensor<f64>
  %8 = tess.permute %s dims = [] : tensor<f64> -> tensor<f64>
  func.return %6, %1, %7, %3, %8, %5 : tensor<f64>, tensor<2x3xf64>, tensor<f64>, tensor<1x1xf64>, tensor<f64>, tensor<3x2xf64>
}

// Ops keep attributes in their attr-dict.
// CHECK-LABEL: func.func @attrs(%x: tensor<2xf32>)
func.func @attrs(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK-NEXT: %0 = tess.neg %x {tag = "n"} : tensor<2xf32>
  // CHECK-NEXT: %1 = tess.add %0, %x {tag = "a"} : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  // CHECK-NEXT: %2 = tess.sum %1 dims = [0] keepdim {tag = "s"} : tensor<2xf32> -> tensor<1xf32>
  %0 = tess.neg %x {tag = "n"} : tensor<2xf32>
  %1 = tess.add %0, %x {tag = "a"} : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %2 = tess.sum %1 dims = [0] keepdim {tag = "s"} : tensor<2xf32> -> tensor<1xf32>
  func.return %1 : tensor<2xf32>
}

// The error function, for the exact GELU.
// CHECK-LABEL: func.func @erf(%x: tensor<2x3xf32>)
// GENERIC-LABEL: "func.func"() <{sym_name = "erf"
func.func @erf(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NEXT: %0 = tess.erf %x : tensor<2x3xf32>
  // GENERIC: "tess.erf"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = tess.erf %x : tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}

// Rounding to integral values: floor, ceil, and round with halves to even.
// CHECK-LABEL: func.func @rounding(%x: tensor<2x3xf64>)
// GENERIC-LABEL: "func.func"() <{sym_name = "rounding"
func.func @rounding(%x: tensor<2x3xf64>) -> tensor<2x3xf64> {
  // CHECK-NEXT: %0 = tess.floor %x : tensor<2x3xf64>
  // CHECK-NEXT: %1 = tess.ceil %0 : tensor<2x3xf64>
  // CHECK-NEXT: %2 = tess.round %1 : tensor<2x3xf64>
  // GENERIC: "tess.floor"(%{{.*}}) : (tensor<2x3xf64>) -> tensor<2x3xf64>
  %0 = tess.floor %x : tensor<2x3xf64>
  %1 = tess.ceil %0 : tensor<2x3xf64>
  %2 = tess.round %1 : tensor<2x3xf64>
  func.return %2 : tensor<2x3xf64>
}
