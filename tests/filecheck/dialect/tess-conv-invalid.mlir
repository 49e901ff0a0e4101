// The verifiers of the convolution ops, one error per chunk, as located diagnostics that
// name both shapes.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics
// RUN: not tessc-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=STDERR

func.func @channel_mismatch(%x: tensor<1x4x5x5xf32>, %w: tensor<2x3x3x3xf32>) {
  // STDERR: tess-conv-invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.conv': channel mismatch: input (1,4,5,5) and weight (2,3,3,3)
  // expected-error @+1 {{'tess.conv': channel mismatch: input (1,4,5,5) and weight (2,3,3,3) (4 input channels, 1 groups of 3)}}
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<1x4x5x5xf32>, tensor<2x3x3x3xf32> -> tensor<1x2x3x3xf32>
  func.return
}

// -----

func.func @groups_do_not_divide(%x: tensor<1x4x5x5xf32>, %w: tensor<3x2x3x3xf32>) {
  // STDERR: tess-conv-invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.conv': groups = 2 does not divide
  // expected-error @+1 {{'tess.conv': groups = 2 does not divide the 4 input channels and the 3 output channels of input (1,4,5,5) and weight (3,2,3,3)}}
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 2 : tensor<1x4x5x5xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x3x3xf32>
  func.return
}

// -----

func.func @kernel_larger_than_padded(%x: tensor<1x1x2x5xf32>, %w: tensor<1x1x5x3xf32>) {
  // STDERR: tess-conv-invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.conv': conv: kernel larger than the padded input
  // expected-error @+1 {{'tess.conv': conv: kernel larger than the padded input: input (1,1,2,5) and weight (1,1,5,3) (padded (4,5))}}
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 0] padding_high = [1, 0] groups = 1 : tensor<1x1x2x5xf32>, tensor<1x1x5x3xf32> -> tensor<1x1x1x3xf32>
  func.return
}

// -----

func.func @dilated_kernel_larger(%x: tensor<1x1x5xf32>, %w: tensor<1x1x3xf32>) {
  // expected-error @+1 {{'tess.conv': conv: kernel larger than the padded input: input (1,1,5) and weight (1,1,3) (padded (5))}}
  %0 = tess.conv %x, %w strides = [1] dilations = [3] padding_low = [0] padding_high = [0] groups = 1 : tensor<1x1x5xf32>, tensor<1x1x3xf32> -> tensor<1x1x1xf32>
  func.return
}

// -----

func.func @conv_result(%x: tensor<1x1x5xf32>, %w: tensor<2x1x3xf32>) {
  // expected-error @+1 {{'tess.conv' result shape (1,2,2) does not match the inferred shape (1,2,3)}}
  %0 = tess.conv %x, %w strides = [1] dilations = [1] padding_low = [0] padding_high = [0] groups = 1 : tensor<1x1x5xf32>, tensor<2x1x3xf32> -> tensor<1x2x2xf32>
  func.return
}

// -----

func.func @pool_kernel_larger(%x: tensor<1x1x4xf32>) {
  // STDERR: tess-conv-invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.pool': pooling: kernel larger than the padded input
  // expected-error @+1 {{'tess.pool': pooling: kernel larger than the padded input: input (1,1,4) (padded (4)) and kernel (5)}}
  %0 = tess.pool %x kind = "max" kernel = [5] strides = [1] padding_low = [0] padding_high = [0] : tensor<1x1x4xf32> -> tensor<1x1x1xf32>
  func.return
}

// -----

func.func @pool_kind(%x: tensor<1x1x4xf32>) {
  // expected-error @+1 {{'tess.pool' kind must be one of max, avg, argmax, got 'min'}}
  %0 = tess.pool %x kind = "min" kernel = [2] strides = [2] padding_low = [0] padding_high = [0] : tensor<1x1x4xf32> -> tensor<1x1x2xf32>
  func.return
}

// -----

func.func @pad_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'tess.pad' result shape (3,3) does not match the inferred shape (3,4)}}
  %0 = tess.pad %x low = [1, 0] high = [0, 1] value = 0.0 : tensor<2x3xf32> -> tensor<3x3xf32>
  func.return
}

// -----

func.func @unpool_shape(%dy: tensor<1x1x3xf32>) {
  // expected-error @+1 {{'tess.unpool' operand shape (1,1,3) does not match (1,1,2), the pooled shape of the result (1,1,4)}}
  %0 = tess.unpool %dy kernel = [2] strides = [2] padding_low = [0] padding_high = [0] : tensor<1x1x3xf32> -> tensor<1x1x4xf32>
  func.return
}
