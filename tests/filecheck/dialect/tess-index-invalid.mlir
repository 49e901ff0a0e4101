// The verifiers of the element-type rules and of the indexing ops, one error per chunk.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics

func.func @exp_of_ints(%a: tensor<3xi64>) {
  // expected-error @+1 {{'tess.exp' expects f32, f64, bf16 or f16 elements, got tensor<3xi64>}}
  %0 = tess.exp %a : tensor<3xi64>
  func.return
}

// -----

func.func @compare_result(%a: tensor<3xf32>) {
  // expected-error @+1 {{'tess.lt' result element type i32 is neither i1 nor the operands' f32}}
  %0 = tess.lt %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xi32>
  func.return
}

// -----

func.func @take_float_indices(%x: tensor<5x3xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{'tess.take' expects i32 or i64 indices, got tensor<4xf32>}}
  %0 = tess.take %x, %i dim = [0] : tensor<5x3xf32>, tensor<4xf32> -> tensor<4x3xf32>
  func.return
}

// -----

func.func @take_shape(%x: tensor<5x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'tess.take' result shape (3,4) does not match the inferred shape (5,4)}}
  %0 = tess.take %x, %i dim = [1] : tensor<5x3xf32>, tensor<4xi64> -> tensor<3x4xf32>
  func.return
}

// -----

func.func @scatter_shape(%g: tensor<4x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'tess.scatter_add' operand shape (4,3) does not match (2,3), what take gathers from the result}}
  %0 = tess.scatter_add %g, %i dim = [0] : tensor<4x3xf32>, tensor<2xi64> -> tensor<5x3xf32>
  func.return
}

// -----

func.func @argmax_dim(%x: tensor<5x3xf32>) {
  // expected-error @+1 {{'tess.argmax' dim 2 is out of range for rank 2}}
  %0 = tess.argmax %x dim = [2] : tensor<5x3xf32> -> tensor<5xi64>
  func.return
}

// -----

func.func @slice_out_of_range(%x: tensor<6x5xf32>) {
  // expected-error @+1 {{'tess.slice' dim 0: 4 elements from 1 by 2 leave [0, 6)}}
  %0 = tess.slice %x offsets = [1, 0] strides = [2, 1] : tensor<6x5xf32> -> tensor<4x5xf32>
  func.return
}

// -----

func.func @concat_shapes(%a: tensor<2x5xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'tess.concat': shapes (2,5), (2,4) differ outside dim 0}}
  %0 = tess.concat %a, %b dim = [0] : tensor<2x5xf32>, tensor<2x4xf32> -> tensor<4x5xf32>
  func.return
}
