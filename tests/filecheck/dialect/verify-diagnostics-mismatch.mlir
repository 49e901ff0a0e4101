// --verify-diagnostics fails (exit 1) on every mismatch, reported at its location like
// mlir-opt: wrong text, a wrong line, a wrong severity, a diagnostic nothing expects, an
// expectation nothing meets; a matching chunk still compiles and prints its module.
// RUN: not tessc-opt %s --split-input-file --verify-diagnostics 2>%t.err | filecheck %s --check-prefix=OUT
// RUN: filecheck %s < %t.err

func.func @wrong_text(%a: tensor<3x4x1xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{shapes (3,4,1) and (3,6) are not broadcastable}}
  %0 = tess.add %a, %b : tensor<3x4x1xf32>, tensor<3x5xf32> -> tensor<3x4x5xf32>
  func.return
}
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 3]]:3: error: unexpected error: 'tess.add': shapes (3,4,1) and (3,5) are not broadcastable
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 5]]:6: error: expected error "shapes (3,4,1) and (3,6) are not broadcastable" was not produced

// -----

func.func @wrong_line(%a: tensor<3xi32>) {
  // expected-error @+2 {{'tess.exp' expects f32, f64, bf16 or f16 elements}}
  %0 = tess.exp %a : tensor<3xi32>
  func.return
}
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 3]]:3: error: unexpected error: 'tess.exp' expects f32, f64, bf16 or f16 elements
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 5]]:6: error: expected error "'tess.exp' expects f32, f64, bf16 or f16 elements" was not produced

// -----

func.func @wrong_severity(%a: tensor<3xi32>) {
  // expected-warning @+1 {{'tess.exp' expects f32, f64, bf16 or f16 elements}}
  %0 = tess.exp %a : tensor<3xi32>
  func.return
}
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 4]]:6: error: 'error' diagnostic emitted when expecting a 'warning'

// -----

func.func @unexpected(%a: tensor<3xi32>) {
  %0 = tess.exp %a : tensor<3xi32>
  func.return
}
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 3]]:3: error: unexpected error: 'tess.exp' expects f32, f64, bf16 or f16 elements, got tensor<3xi32>

// -----

// expected-error @below {{this is never reported}}
func.func @not_produced(%a: tensor<3xf32>) -> tensor<3xf32> {
  func.return %a : tensor<3xf32>
}
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE - 4]]:4: error: expected error "this is never reported" was not produced
// OUT: func.func @not_produced

// -----

// A chunk whose expectations hold adds nothing to stderr.
func.func @ok(%a: tensor<3xi32>) {
  // expected-error-re @+1 {{'tess.{{[a-z]+}}' expects f{{[0-9]+}}, f64, bf16 or f16}}
  %0 = tess.exp %a : tensor<3xi32>
  func.return
}
// CHECK-NOT: error:
