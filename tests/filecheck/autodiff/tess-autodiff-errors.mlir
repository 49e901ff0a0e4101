// tess-autodiff's errors are located diagnostics: the default options' against the
// `expected-error` comments, the others' on stderr.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics -p tess-autodiff
// RUN: not tessc-opt %s --split-input-file -p 'tess-autodiff{func=f wrt=1}' 2>&1 | filecheck %s --check-prefix=WRT
// RUN: not tessc-opt %s --split-input-file -p 'tess-autodiff{func=nope}' 2>&1 | filecheck %s --check-prefix=NAME

// Only tess ops (and calls, constants, return) have gradient rules.
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{tess-autodiff: no gradient rule for 'tensor.empty' (in @f)}}
  %0 = tensor.empty() : tensor<3xf32>
  %1 = tess.add %x, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %1 : tensor<3xf32>
}
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 6]]:1: error: tess-autodiff: wrt index 1 is out of range: @f has 1 argument
// NAME: error: tess-autodiff: no function @nope in the module

// -----

// Without func=, the module must have exactly one function (the error is at the second).
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// expected-error @below {{tess-autodiff: the module has 2 functions: name one with `func=<name>`}}
func.func @g(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 7]]:1: error: tess-autodiff: wrt index 1 is out of range: @f has 1 argument

// -----

// Recursion cannot be inlined.
func.func @f(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{tess-autodiff: cannot differentiate the recursive call of @f}}
  %0 = func.call @f(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 3]]:3: error: tess-autodiff: cannot differentiate the recursive call of @f

// -----

// Only f32/f64 tensors have gradients.
// expected-error @below {{tess-autodiff: argument 1 of @f has type tensor<3xi32>, not a float tensor}}
func.func @f(%x: tensor<3xf32>, %n: tensor<3xi32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 3]]:1: error: tess-autodiff: argument 1 of @f has type tensor<3xi32>, not a float tensor

// -----

// The gradient function's name must be free.
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// expected-error @below {{tess-autodiff: the module has 2 functions: name one with `func=<name>`}}
func.func private @f_grad(%x: tensor<3xf32>) -> tensor<3xf32>
// WRT: error: tess-autodiff: the module already has a symbol @f_grad
