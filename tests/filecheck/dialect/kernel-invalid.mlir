// Every kernel.group verifier error, one per chunk, as a located diagnostic.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics

func.func @yield_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kernel.group' yields (tensor<4xf64>) but its results are (tensor<4xf32>)}}
  %r = kernel.group -> (tensor<4xf32>) {
    %e = tensor.empty() : tensor<4xf64>
    kernel.yield %e : tensor<4xf64>
  }
  func.return %r : tensor<4xf32>
}

// -----

func.func @no_yield_on_tensors(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kernel.group' yields () but its results are (tensor<4xf32>)}}
  %r = kernel.group -> (tensor<4xf32>) {
  }
  func.return %r : tensor<4xf32>
}

// -----

func.func @not_a_member(%x: f32) {
  // expected-error @+1 {{'kernel.group' may hold only linalg ops, tensor.empty and arith.constant, not 'arith.addf'}}
  kernel.group {
    %y = arith.addf %x, %x : f32
  }
  func.return
}

// -----

func.func @nested_group() {
  // expected-error @+1 {{'kernel.group' may hold only linalg ops, tensor.empty and arith.constant, not 'kernel.group'}}
  kernel.group {
    kernel.group {
    }
  }
  func.return
}

// -----

func.func @block_arguments() {
  // expected-error @+1 {{'kernel.group' body takes no block arguments}}
  "kernel.group"() ({
  ^bb0(%a: index):
    "kernel.yield"() : () -> ()
  }) : () -> ()
  func.return
}

// -----

func.func @memref_results(%x: memref<4xf32>) {
  // expected-error @+1 {{result 'res' at position 0 does not verify: memref<4xf32> should be of base attribute tensor}}
  %r = "kernel.group"() ({
    "kernel.yield"(%x) : (memref<4xf32>) -> ()
  }) : () -> memref<4xf32>
  func.return
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'kernel.yield' expects parent op 'kernel.group'}}
  kernel.yield %x : tensor<4xf32>
}
