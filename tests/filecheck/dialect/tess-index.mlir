// The integer/bool element types, `tess.cast` and the indexing ops of tess_index parse,
// verify and print in their custom form, and their generic form round-trips.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s --print-op-generic | tessc-opt | filecheck %s

// CHECK-LABEL: func.func @types_and_cast
func.func @types_and_cast(%x: tensor<3x4xf32>, %i: tensor<4xi64>, %j: tensor<3x1xi32>) -> (tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xf32>, tensor<3x4xf64>) {
  // CHECK-NEXT: %0 = tess.lt %x, %x : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xi1>
  %0 = tess.lt %x, %x : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xi1>
  // CHECK-NEXT: %1 = tess.cast %j : tensor<3x1xi32> -> tensor<3x1xi64>
  %1 = tess.cast %j : tensor<3x1xi32> -> tensor<3x1xi64>
  // CHECK-NEXT: %2 = tess.add %1, %i : tensor<3x1xi64>, tensor<4xi64> -> tensor<3x4xi64>
  %2 = tess.add %1, %i : tensor<3x1xi64>, tensor<4xi64> -> tensor<3x4xi64>
  // CHECK-NEXT: %3 = tess.eq %2, %2 : tensor<3x4xi64>, tensor<3x4xi64> -> tensor<3x4xi1>
  %3 = tess.eq %2, %2 : tensor<3x4xi64>, tensor<3x4xi64> -> tensor<3x4xi1>
  // CHECK-NEXT: %4 = tess.mul %0, %3 : tensor<3x4xi1>, tensor<3x4xi1> -> tensor<3x4xi1>
  %4 = tess.mul %0, %3 : tensor<3x4xi1>, tensor<3x4xi1> -> tensor<3x4xi1>
  // CHECK-NEXT: %5 = tess.gt %x, %x : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %5 = tess.gt %x, %x : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %6 = tess.select %4, %x, %5 : tensor<3x4xi1>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %6 = tess.select %4, %x, %5 : tensor<3x4xi1>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK-NEXT: %7 = tess.cast %4 : tensor<3x4xi1> -> tensor<3x4xf64>
  %7 = tess.cast %4 : tensor<3x4xi1> -> tensor<3x4xf64>
  // CHECK-NEXT: %8 = tess.fill 7.000000e+00 : tensor<3x4xi64>
  %8 = tess.fill 7.0 : tensor<3x4xi64>
  // CHECK-NEXT: %9 = tess.sum %8 dims = [0] : tensor<3x4xi64> -> tensor<4xi64>
  %9 = tess.sum %8 dims = [0] : tensor<3x4xi64> -> tensor<4xi64>
  // CHECK-NEXT: %10 = tess.sin %x : tensor<3x4xf32>
  %10 = tess.sin %x : tensor<3x4xf32>
  // CHECK-NEXT: %11 = tess.cos %10 : tensor<3x4xf32>
  %11 = tess.cos %10 : tensor<3x4xf32>
  // CHECK-NEXT: %12 = tess.prod %11 dims = [1] keepdim : tensor<3x4xf32> -> tensor<3x1xf32>
  %12 = tess.prod %11 dims = [1] keepdim : tensor<3x4xf32> -> tensor<3x1xf32>
  func.return %4, %2, %6, %7 : tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xf32>, tensor<3x4xf64>
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<5x3xf32>, %i: tensor<2x4xi64>, %l: tensor<4xi32>) -> (tensor<2x4x3xf32>, tensor<5x3xf32>, tensor<4x10xf32>, tensor<5xi64>, tensor<1x3xi64>) {
  // CHECK-NEXT: %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<2x4xi64> -> tensor<2x4x3xf32>
  %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<2x4xi64> -> tensor<2x4x3xf32>
  // CHECK-NEXT: %1 = tess.scatter_add %0, %i dim = [0] : tensor<2x4x3xf32>, tensor<2x4xi64> -> tensor<5x3xf32>
  %1 = tess.scatter_add %0, %i dim = [0] : tensor<2x4x3xf32>, tensor<2x4xi64> -> tensor<5x3xf32>
  // CHECK-NEXT: %2 = tess.one_hot %l : tensor<4xi32> -> tensor<4x10xf32>
  %2 = tess.one_hot %l : tensor<4xi32> -> tensor<4x10xf32>
  // CHECK-NEXT: %3 = tess.argmax %x dim = [1] : tensor<5x3xf32> -> tensor<5xi64>
  %3 = tess.argmax %x dim = [1] : tensor<5x3xf32> -> tensor<5xi64>
  // CHECK-NEXT: %4 = tess.argmin %x dim = [0] keepdim : tensor<5x3xf32> -> tensor<1x3xi64>
  %4 = tess.argmin %x dim = [0] keepdim : tensor<5x3xf32> -> tensor<1x3xi64>
  func.return %0, %1, %2, %3, %4 : tensor<2x4x3xf32>, tensor<5x3xf32>, tensor<4x10xf32>, tensor<5xi64>, tensor<1x3xi64>
}

// CHECK-LABEL: func.func @slices
func.func @slices(%x: tensor<6x5xf32>, %y: tensor<2x5xf32>) -> (tensor<6x5xf32>, tensor<8x5xf32>) {
  // CHECK-NEXT: %0 = tess.slice %x offsets = [1, 4] strides = [2, -1] : tensor<6x5xf32> -> tensor<3x5xf32>
  %0 = tess.slice %x offsets = [1, 4] strides = [2, -1] : tensor<6x5xf32> -> tensor<3x5xf32>
  // CHECK-NEXT: %1 = tess.unslice %0 offsets = [1, 4] strides = [2, -1] : tensor<3x5xf32> -> tensor<6x5xf32>
  %1 = tess.unslice %0 offsets = [1, 4] strides = [2, -1] : tensor<3x5xf32> -> tensor<6x5xf32>
  // CHECK-NEXT: %2 = tess.stop_gradient %y : tensor<2x5xf32>
  %2 = tess.stop_gradient %y : tensor<2x5xf32>
  // CHECK-NEXT: %3 = tess.concat %2, %x dim = [0] : tensor<2x5xf32>, tensor<6x5xf32> -> tensor<8x5xf32>
  %3 = tess.concat %2, %x dim = [0] : tensor<2x5xf32>, tensor<6x5xf32> -> tensor<8x5xf32>
  func.return %1, %3 : tensor<6x5xf32>, tensor<8x5xf32>
}
