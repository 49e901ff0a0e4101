// The verifiers of the attention ops, one error per chunk, as located diagnostics that
// name the shapes.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics
// RUN: not tessc-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=STDERR

func.func @depth_mismatch(%q: tensor<3x4xf32>, %k: tensor<5x3xf32>, %v: tensor<5x2xf32>) {
  // STDERR: tess-attention-invalid.mlir:[[# @LINE + 2]]:3: error: 'tess.attention' q and k must have the same last dim (E): (3,4), (5,3), (5,2)
  // expected-error @+1 {{'tess.attention' q and k must have the same last dim (E): (3,4), (5,3), (5,2)}}
  %0 = tess.attention %q, %k, %v scale = 0.5 : tensor<3x4xf32>, tensor<5x3xf32>, tensor<5x2xf32> -> tensor<3x2xf32>
  func.return
}

// -----

func.func @batch_mismatch(%q: tensor<2x3x4xf32>, %k: tensor<3x5x4xf32>, %v: tensor<3x5x2xf32>) {
  // expected-error @+1 {{'tess.attention' batch dims differ: (2,3,4), (3,5,4), (3,5,2)}}
  %0 = tess.attention %q, %k, %v scale = 0.5 : tensor<2x3x4xf32>, tensor<3x5x4xf32>, tensor<3x5x2xf32> -> tensor<2x3x2xf32>
  func.return
}

// -----

func.func @mask_does_not_broadcast(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x2xf32>, %m: tensor<2x5xi1>) {
  // expected-error @+1 {{'tess.attention' mask of shape (2,5) does not broadcast to the scores (3,5)}}
  %0 = tess.attention %q, %k, %v mask %m scale = 0.5 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>, tensor<2x5xi1> -> tensor<3x2xf32>
  func.return
}

// -----

func.func @wrong_result(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>) {
  // expected-error @+1 {{'tess.attention_lse'}}
  %0 = tess.attention_lse %q, %k scale = 0.5 : tensor<3x4xf32>, tensor<5x4xf32> -> tensor<3x1xf32>
  func.return
}

// -----

func.func @bad_wrt(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x2xf32>, %l: tensor<3xf32>, %g: tensor<3x2xf32>) {
  // expected-error @+1 {{'tess.attention_grad' wrt must be one of q, k, v, got 'x'}}
  %0 = tess.attention_grad %q, %k, %v, %l, %l, %g wrt = "x" scale = 0.5 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3x2xf32> -> tensor<3x4xf32>
  func.return
}
