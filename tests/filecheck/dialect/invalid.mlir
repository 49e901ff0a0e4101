// Every tess verifier error, one per chunk, as a located diagnostic, checked against the
// chunk's `expected-error` comments. Without --verify-diagnostics the errors go to stderr,
// with exit status 1, and the next chunk is compiled.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics
// RUN: not tessc-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=STDERR

// The seed's invalid broadcasts; the message names both shapes.
func.func @seed_3x4x1_3x5(%a: tensor<3x4x1xf32>, %b: tensor<3x5xf32>) {
  // STDERR: invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.add': shapes (3,4,1) and (3,5) are not broadcastable
  // expected-error @+1 {{'tess.add': shapes (3,4,1) and (3,5) are not broadcastable}}
  %0 = tess.add %a, %b : tensor<3x4x1xf32>, tensor<3x5xf32> -> tensor<3x4x5xf32>
  func.return
}

// -----

func.func @seed_1x4x4_3x1x5(%a: tensor<1x4x4xf32>, %b: tensor<3x1x5xf32>) {
  // expected-error @+1 {{'tess.mul': shapes (1,4,4) and (3,1,5) are not broadcastable}}
  %0 = tess.mul %a, %b : tensor<1x4x4xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  func.return
}

// -----

func.func @comparison_broadcast(%a: tensor<2x3xf64>, %b: tensor<2xf64>) {
  // expected-error @+1 {{'tess.lt': shapes (2,3) and (2) are not broadcastable}}
  %0 = tess.lt %a, %b : tensor<2x3xf64>, tensor<2xf64> -> tensor<2x3xf64>
  func.return
}

// -----

func.func @wrong_result_shape(%a: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'tess.add' result shape (4,3) does not match the inferred shape (3,4)}}
  %0 = tess.add %a, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<4x3xf32>
  func.return
}

// -----

func.func @mixed_dtypes(%a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{'tess.add' mixes element types f32, f64}}
  %0 = tess.add %a, %b : tensor<3xf32>, tensor<3xf64> -> tensor<3xf32>
  func.return
}

// -----

func.func @integer_tensor(%a: tensor<3xi32>) {
  // expected-error @+1 {{'tess.exp' expects f32, f64, bf16 or f16 elements, got tensor<3xi32>}}
  %0 = tess.exp %a : tensor<3xi32>
  func.return
}

// -----

func.func @f80_tensor(%a: tensor<3xf80>, %b: tensor<3xf80>) {
  // expected-error @+1 {{'tess.add' expects f32, f64, bf16, f16, i16, i32 or i64 elements, got tensor<3xf80>}}
  %0 = tess.add %a, %b : tensor<3xf80>, tensor<3xf80> -> tensor<3xf80>
  func.return
}

// -----

// A `?` dim (the function's dynamic size) matches any dim; its static dims still must.
func.func @dynamic_shape(%a: tensor<?x3xf32>, %b: tensor<?x4xf32>) {
  // expected-error @+1 {{'tess.add': shapes (?,3) and (?,4) are not broadcastable}}
  %0 = tess.add %a, %b : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<?x3xf32>
  func.return
}

// -----

func.func @encoded_tensor(%a: tensor<3xf32, "sparse">) {
  // expected-error @+1 {{'tess.sqrt' expects tensors without an encoding, got tensor<3xf32, "sparse">}}
  %0 = tess.sqrt %a : tensor<3xf32, "sparse">
  func.return
}

// -----

func.func @memref_operand(%a: memref<3xf32>) {
  // expected-error @+1 {{operand 'input' at position 0 does not verify: memref<3xf32> should be of base attribute tensor}}
  %0 = "tess.exp"(%a) : (memref<3xf32>) -> memref<3xf32>
  func.return
}

// -----

func.func @unary_changes_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{result 'result' at position 0 does not verify: attribute tensor<3xf32> expected from variable 'T', but got tensor<4xf32>}}
  %0 = "tess.tanh"(%a) : (tensor<3xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @reduce_dim_out_of_range(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.sum': reduction dim 2 is out of range for shape (3,4)}}
  %0 = tess.sum %a dims = [2] : tensor<3x4xf32> -> tensor<3x4xf32>
  func.return
}

// -----

func.func @reduce_negative_dim(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.reduce_max': reduction dim -1 is out of range for shape (3,4)}}
  %0 = tess.reduce_max %a dims = [-1] : tensor<3x4xf32> -> tensor<3xf32>
  func.return
}

// -----

func.func @reduce_duplicate_dims(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.mean': reduction dims [1, 1] contain duplicates}}
  %0 = tess.mean %a dims = [1, 1] : tensor<3x4xf32> -> tensor<3xf32>
  func.return
}

// -----

func.func @reduce_keepdim_missing(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.reduce_max' result shape (3,1) does not match the inferred shape (3)}}
  %0 = tess.reduce_max %a dims = [1] : tensor<3x4xf32> -> tensor<3x1xf32>
  func.return
}

// -----

func.func @reduce_keepdim_dropped(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.sum' result shape (3) does not match the inferred shape (3,1)}}
  %0 = tess.sum %a dims = [1] keepdim : tensor<3x4xf32> -> tensor<3xf32>
  func.return
}

// -----

func.func @reduce_dims_not_i64(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{Expected attribute i64 but got i32}}
  %0 = "tess.sum"(%a) <{dims = array<i32: 1>}> : (tensor<3x4xf32>) -> tensor<3xf32>
  func.return
}

// -----

func.func @reshape_numel(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.reshape' cannot reshape (3,4) (12 elements) to (5,2) (10 elements)}}
  %0 = tess.reshape %a : tensor<3x4xf32> -> tensor<5x2xf32>
  func.return
}

// -----

func.func @reshape_dtype(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.reshape' mixes element types f32, f64}}
  %0 = tess.reshape %a : tensor<3x4xf32> -> tensor<12xf64>
  func.return
}

// -----

func.func @permute_duplicate(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tess.permute' dims [0, 0, 1] are not a permutation of the 3 dims of (2,3,4)}}
  %0 = tess.permute %a dims = [0, 0, 1] : tensor<2x3x4xf32> -> tensor<2x2x3xf32>
  func.return
}

// -----

func.func @permute_too_short(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tess.permute' dims [1, 0] are not a permutation of the 3 dims of (2,3,4)}}
  %0 = tess.permute %a dims = [1, 0] : tensor<2x3x4xf32> -> tensor<3x2xf32>
  func.return
}

// -----

func.func @permute_out_of_range(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'tess.permute' dims [2, 0] are not a permutation of the 2 dims of (2,3)}}
  %0 = tess.permute %a dims = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  func.return
}

// -----

func.func @permute_result_shape(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tess.permute' result shape (4,3,2) does not match the inferred shape (4,2,3)}}
  %0 = tess.permute %a dims = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
  func.return
}

// -----

func.func @broadcast_to_mismatch(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.broadcast_to' cannot broadcast (3,4) to (4,3)}}
  %0 = tess.broadcast_to %a : tensor<3x4xf32> -> tensor<4x3xf32>
  func.return
}

// -----

func.func @broadcast_to_lower_rank(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'tess.broadcast_to' cannot broadcast (3,4) to (4)}}
  %0 = tess.broadcast_to %a : tensor<3x4xf32> -> tensor<4xf32>
  func.return
}

// -----

// Broadcasting may only grow size-1 dims of the input, never shrink the target's.
func.func @broadcast_to_size1_target(%a: tensor<1x4xf32>) {
  // expected-error @+1 {{'tess.broadcast_to' cannot broadcast (1,4) to (3,1)}}
  %0 = tess.broadcast_to %a : tensor<1x4xf32> -> tensor<3x1xf32>
  func.return
}

// -----

func.func @fill_f80() {
  // expected-error @+1 {{'tess.fill' expects f32, f64, bf16, f16, i16, i32, i64 or i1 elements, got tensor<3xf80>}}
  %0 = tess.fill 1.0 : tensor<3xf80>
  func.return
}

// -----

func.func @fill_value_not_f64() {
  // expected-error @+1 {{f32 should be of base attribute f64}}
  %0 = "tess.fill"() <{value = 1.0 : f32}> : () -> tensor<3xf32>
  func.return
}

// -----

func.func @select_broadcast(%c: tensor<3xf32>, %x: tensor<4xf32>, %y: tensor<1xf32>) {
  // expected-error @+1 {{'tess.select': shapes (3) and (4) and (1) are not broadcastable}}
  %0 = tess.select %c, %x, %y : tensor<3xf32>, tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @select_mixed_dtypes(%c: tensor<4xf64>, %x: tensor<4xf32>, %y: tensor<1xf64>) {
  // expected-error @+1 {{'tess.select' mixes element types f32, f64}}
  %0 = tess.select %c, %x, %y : tensor<4xf64>, tensor<4xf32>, tensor<1xf64> -> tensor<4xf32>
  func.return
}

// -----

func.func @matmul_contraction(%a: tensor<3x5xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{'tess.matmul': matmul contraction mismatch: (3,5) and (4,2) (5 != 4)}}
  %0 = tess.matmul %a, %b : tensor<3x5xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  func.return
}

// -----

func.func @matmul_rank1(%a: tensor<5xf32>, %b: tensor<5x2xf32>) {
  // expected-error @+1 {{'tess.matmul': matmul needs operands of rank >= 2, got (5) and (5,2)}}
  %0 = tess.matmul %a, %b : tensor<5xf32>, tensor<5x2xf32> -> tensor<2xf32>
  func.return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x5xf32>, %b: tensor<4x5x2xf32>) {
  // expected-error @+1 {{'tess.matmul': matmul batch dims of (2,3,5) and (4,5,2) are not broadcastable}}
  %0 = tess.matmul %a, %b : tensor<2x3x5xf32>, tensor<4x5x2xf32> -> tensor<4x3x2xf32>
  func.return
}

// -----

func.func @matmul_result_shape(%a: tensor<3x5xf32>, %b: tensor<5x2xf32>) {
  // expected-error @+1 {{'tess.matmul' result shape (2,3) does not match the inferred shape (3,2)}}
  %0 = tess.matmul %a, %b : tensor<3x5xf32>, tensor<5x2xf32> -> tensor<2x3xf32>
  func.return
}

// -----

func.func @matmul_mixed_dtypes(%a: tensor<3x5xf64>, %b: tensor<5x2xf32>) {
  // expected-error @+1 {{'tess.matmul' mixes element types f32, f64}}
  %0 = tess.matmul %a, %b : tensor<3x5xf64>, tensor<5x2xf32> -> tensor<3x2xf64>
  func.return
}

// -----

// An error inside a nested region is located at the nested op.
func.func @nested(%a: tensor<3xf32>, %n: index) {
  %lb = arith.constant 0 : index
  %step = arith.constant 1 : index
  scf.for %i = %lb to %n step %step {
    // expected-error @+1 {{'tess.sum': reduction dim 1 is out of range for shape (3)}}
    %0 = tess.sum %a dims = [1] : tensor<3xf32> -> tensor<3xf32>
  }
  func.return
}

// -----

// A structural error (no terminator) is located at the op that ends the block.
func.func @missing_return(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{Operation tess.neg terminates block in single-block region but is not a terminator}}
  %0 = tess.neg %a : tensor<3xf32>
}

// -----

// A syntax error is a located parse error.
func.func @syntax(%a: tensor<3xf32>) {
  // STDERR: invalid.mlir:[[# @LINE + 2]]:22: error: Expected ':'
  // expected-error @+1 {{Expected ':'}}
  %0 = tess.neg %a   tensor<3xf32>
  func.return
}

// -----

func.func @bitcast_width(%a: tensor<3xf32>) {
  // expected-error @+1 {{'tess.bitcast' reinterprets bits of one width: f32 is 32 bits, i16 16}}
  %0 = tess.bitcast %a : tensor<3xf32> -> tensor<3xi16>
  func.return
}
