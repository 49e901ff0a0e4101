// tess-autodiff's errors are located diagnostics.
// RUN: tessc-opt %s --split-input-file --verify-diagnostics -p tess-autodiff | filecheck %s
// RUN: tessc-opt %s --split-input-file --verify-diagnostics -p 'tess-autodiff{func=f wrt=1}' | filecheck %s --check-prefix=WRT
// RUN: tessc-opt %s --split-input-file --verify-diagnostics -p 'tess-autodiff{func=nope}' | filecheck %s --check-prefix=NAME

// Only tess ops (and calls, constants, return) have gradient rules.
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = tensor.empty() : tensor<3xf32>
  %1 = tess.add %x, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %1 : tensor<3xf32>
}
// CHECK: tess-autodiff-errors.mlir:[[# @LINE - 4]]:3: error: tess-autodiff: no gradient rule for 'tensor.empty' (in @f)
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 6]]:1: error: tess-autodiff: wrt index 1 is out of range: @f has 1 argument
// NAME: error: tess-autodiff: no function @nope in the module

// -----

// Without func=, the module must have exactly one function.
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
func.func @g(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// CHECK: error: tess-autodiff: the module has 2 functions: name one with `func=<name>`
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 7]]:1: error: tess-autodiff: wrt index 1 is out of range: @f has 1 argument

// -----

// Recursion cannot be inlined.
func.func @f(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @f(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: tess-autodiff-errors.mlir:[[# @LINE - 3]]:3: error: tess-autodiff: cannot differentiate the recursive call of @f
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 4]]:3: error: tess-autodiff: cannot differentiate the recursive call of @f

// -----

// Only f32/f64 tensors have gradients.
func.func @f(%x: tensor<3xf32>, %n: tensor<3xi32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
// CHECK: tess-autodiff-errors.mlir:[[# @LINE - 3]]:1: error: tess-autodiff: argument 1 of @f has type tensor<3xi32>, not an f32/f64 tensor
// WRT: tess-autodiff-errors.mlir:[[# @LINE - 4]]:1: error: tess-autodiff: argument 1 of @f has type tensor<3xi32>, not an f32/f64 tensor

// -----

// The gradient function's name must be free.
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  func.return %x : tensor<3xf32>
}
func.func private @f_grad(%x: tensor<3xf32>) -> tensor<3xf32>
// CHECK: error: tess-autodiff: the module has 2 functions: name one with `func=<name>`
// WRT: error: tess-autodiff: the module already has a symbol @f_grad
