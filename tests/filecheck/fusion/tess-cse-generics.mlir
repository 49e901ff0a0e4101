// RUN: tessc-opt %s -p 'tess-to-linalg,tess-cse-generics' | filecheck %s

// The same transpose twice (as an MLP step asks for `w2.T` in the forward and the
// backward pass): one copy, read by both products.
func.func @twice(%w: tensor<8x3xf32>, %a: tensor<8x3xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>) {
  %t1 = tess.permute %w dims = [1, 0] : tensor<8x3xf32> -> tensor<3x8xf32>
  %t2 = tess.permute %w dims = [1, 0] : tensor<8x3xf32> -> tensor<3x8xf32>
  %u = tess.permute %a dims = [1, 0] : tensor<8x3xf32> -> tensor<3x8xf32>
  %s = tess.add %t2, %u : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  func.return %t1, %s : tensor<3x8xf32>, tensor<3x8xf32>
}

// CHECK-LABEL: func.func @twice(
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%w : tensor<8x3xf32>)
// CHECK-NOT:     ins(%w
// CHECK:         %[[U:.*]] = linalg.generic {{.*}} ins(%a : tensor<8x3xf32>)
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[T]], %[[U]] :
// CHECK:         func.return %[[T]], %[[S]]

// Different bodies (exp, log) or inputs are different computations: both kept.
func.func @different(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tess.exp %x : tensor<4xf32>
  %l = tess.log %x : tensor<4xf32>
  func.return %e, %l : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @different(
// CHECK:         math.exp
// CHECK:         math.log
// CHECK:         func.return %{{.*}}, %{{.*}} :

// Two zero fills initialise two contractions, which write them in place: not merged
// (sharing one would cost a copy once bufferized); the contractions, whose inits are
// then different values, are not merged either.
func.func @fills(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %m = tess.matmul %a, %b : tensor<4x5xf32>, tensor<5x6xf32> -> tensor<4x6xf32>
  %n = tess.matmul %a, %b : tensor<4x5xf32>, tensor<5x6xf32> -> tensor<4x6xf32>
  func.return %m, %n : tensor<4x6xf32>, tensor<4x6xf32>
}

// CHECK-LABEL: func.func @fills(
// CHECK:         arith.constant 0.000000e+00
// CHECK:         %m = linalg.generic {{.*}} ins(%a, %b
// CHECK:         arith.constant 0.000000e+00
// CHECK:         %n = linalg.generic {{.*}} ins(%a, %b
// CHECK:         func.return %m, %n
