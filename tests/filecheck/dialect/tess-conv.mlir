// The convolution ops of tess_conv parse, verify and print in their custom form, and their
// generic form round-trips.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s --print-op-generic | tessc-opt | filecheck %s

// CHECK-LABEL: func.func @conv_ops
func.func @conv_ops(%x: tensor<2x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %dy: tensor<2x4x3x3xf32>, %i: tensor<2x4x3x3xi64>) {
  // CHECK-NEXT: %0 = tess.pad %x low = [0, 0, 1, 1] high = [0, 0, 1, 2] value = -1.500000e+00 : tensor<2x4x7x7xf32> -> tensor<2x4x9x10xf32>
  %0 = tess.pad %x low = [0, 0, 1, 1] high = [0, 0, 1, 2] value = -1.5 : tensor<2x4x7x7xf32> -> tensor<2x4x9x10xf32>
  // CHECK-NEXT: %1 = tess.conv %x, %w strides = [2, 2] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 2 : tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x4xf32>
  %1 = tess.conv %x, %w strides = [2, 2] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 2 : tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x4xf32>
  // CHECK-NEXT: %2 = tess.pool %x kind = "max" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xf32>
  %2 = tess.pool %x kind = "max" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xf32>
  // CHECK-NEXT: %3 = tess.pool %x kind = "argmax" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xi64>
  %3 = tess.pool %x kind = "argmax" kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x7x7xf32> -> tensor<2x4x3x3xi64>
  // CHECK-NEXT: %4 = tess.unpool %dy, %i kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x3x3xf32>, tensor<2x4x3x3xi64> -> tensor<2x4x7x7xf32>
  %4 = tess.unpool %dy, %i kernel = [2, 2] strides = [2, 2] padding_low = [0, 0] padding_high = [0, 0] : tensor<2x4x3x3xf32>, tensor<2x4x3x3xi64> -> tensor<2x4x7x7xf32>
  // CHECK-NEXT: %5 = tess.unpool %dy kernel = [3, 3] strides = [2, 2] padding_low = [1, 1] padding_high = [1, 1] : tensor<2x4x3x3xf32> -> tensor<2x4x5x5xf32>
  %5 = tess.unpool %dy kernel = [3, 3] strides = [2, 2] padding_low = [1, 1] padding_high = [1, 1] : tensor<2x4x3x3xf32> -> tensor<2x4x5x5xf32>
  func.return
}
