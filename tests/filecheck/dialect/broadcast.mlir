// The seed's broadcasting rules on tess zips: a size-1 dim broadcasts with anything, and a
// shorter shape gets leading 1s. The verifier infers each result type; these are all valid.
// (The invalid seed cases are in invalid.mlir.)
// RUN: tessc-opt %s | filecheck %s

// CHECK-LABEL: func.func @seed_cases
func.func @seed_cases(%a: tensor<3x4x5xf32>, %b: tensor<3x1x5xf32>, %c: tensor<3x4x1xf32>,
                      %d: tensor<1x5xf32>, %e: tensor<1x3x4xf32>, %f: tensor<1x3x1xf32>,
                      %g: tensor<1xf32>) {
  // (3,4,5)|(3,1,5) => (3,4,5)
  // CHECK-NEXT: tess.add %a, %b : tensor<3x4x5xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  %0 = tess.add %a, %b : tensor<3x4x5xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  // (3,4,1)|(3,1,5) => (3,4,5)
  // CHECK-NEXT: tess.mul %c, %b : tensor<3x4x1xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  %1 = tess.mul %c, %b : tensor<3x4x1xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  // (3,4,1)|(1,5) => (3,4,5)
  // CHECK-NEXT: tess.sub %c, %d : tensor<3x4x1xf32>, tensor<1x5xf32> -> tensor<3x4x5xf32>
  %2 = tess.sub %c, %d : tensor<3x4x1xf32>, tensor<1x5xf32> -> tensor<3x4x5xf32>
  // (1,3,4)|(1,3,1) => (1,3,4)
  // CHECK-NEXT: tess.div %e, %f : tensor<1x3x4xf32>, tensor<1x3x1xf32> -> tensor<1x3x4xf32>
  %3 = tess.div %e, %f : tensor<1x3x4xf32>, tensor<1x3x1xf32> -> tensor<1x3x4xf32>
  // (3,4,1)|(1) => (3,4,1)
  // CHECK-NEXT: tess.max %c, %g : tensor<3x4x1xf32>, tensor<1xf32> -> tensor<3x4x1xf32>
  %4 = tess.max %c, %g : tensor<3x4x1xf32>, tensor<1xf32> -> tensor<3x4x1xf32>
  // The same cases with the operands swapped: broadcasting is symmetric.
  // CHECK-NEXT: tess.add %b, %a : tensor<3x1x5xf32>, tensor<3x4x5xf32> -> tensor<3x4x5xf32>
  // CHECK-NEXT: tess.mul %b, %c : tensor<3x1x5xf32>, tensor<3x4x1xf32> -> tensor<3x4x5xf32>
  // CHECK-NEXT: tess.sub %d, %c : tensor<1x5xf32>, tensor<3x4x1xf32> -> tensor<3x4x5xf32>
  // CHECK-NEXT: tess.div %f, %e : tensor<1x3x1xf32>, tensor<1x3x4xf32> -> tensor<1x3x4xf32>
  // CHECK-NEXT: tess.max %g, %c : tensor<1xf32>, tensor<3x4x1xf32> -> tensor<3x4x1xf32>
  %5 = tess.add %b, %a : tensor<3x1x5xf32>, tensor<3x4x5xf32> -> tensor<3x4x5xf32>
  %6 = tess.mul %b, %c : tensor<3x1x5xf32>, tensor<3x4x1xf32> -> tensor<3x4x5xf32>
  %7 = tess.sub %d, %c : tensor<1x5xf32>, tensor<3x4x1xf32> -> tensor<3x4x5xf32>
  %8 = tess.div %f, %e : tensor<1x3x1xf32>, tensor<1x3x4xf32> -> tensor<1x3x4xf32>
  %9 = tess.max %g, %c : tensor<1xf32>, tensor<3x4x1xf32> -> tensor<3x4x1xf32>
  // CHECK-NEXT: func.return
  func.return
}

// A zip and a reduce: the fusion seed's (3,5,1) * (1,5,4), then a sum over dim 1.
// CHECK-LABEL: func.func @zip_then_reduce
// CHECK-NEXT: tess.mul %x, %y : tensor<3x5x1xf64>, tensor<1x5x4xf64> -> tensor<3x5x4xf64>
// CHECK-NEXT: tess.sum %0 dims = [1] : tensor<3x5x4xf64> -> tensor<3x4xf64>
func.func @zip_then_reduce(%x: tensor<3x5x1xf64>, %y: tensor<1x5x4xf64>) -> tensor<3x4xf64> {
  %0 = tess.mul %x, %y : tensor<3x5x1xf64>, tensor<1x5x4xf64> -> tensor<3x5x4xf64>
  %1 = tess.sum %0 dims = [1] : tensor<3x5x4xf64> -> tensor<3x4xf64>
  func.return %1 : tensor<3x4xf64>
}

// select broadcasts all three operands; broadcast_to and matmul batch dims use the same rules.
// CHECK-LABEL: func.func @other_broadcasts
// CHECK-NEXT: tess.select %c, %x, %y : tensor<2x1x1xf32>, tensor<3x1xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: tess.broadcast_to %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: tess.broadcast_to %y : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: tess.matmul %m, %n : tensor<5x1x3x2xf32>, tensor<4x2x6xf32> -> tensor<5x4x3x6xf32>
func.func @other_broadcasts(%c: tensor<2x1x1xf32>, %x: tensor<3x1xf32>, %y: tensor<4xf32>,
                            %m: tensor<5x1x3x2xf32>, %n: tensor<4x2x6xf32>) {
  %0 = tess.select %c, %x, %y : tensor<2x1x1xf32>, tensor<3x1xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %1 = tess.broadcast_to %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %2 = tess.broadcast_to %y : tensor<4xf32> -> tensor<4xf32>
  %3 = tess.matmul %m, %n : tensor<5x1x3x2xf32>, tensor<4x2x6xf32> -> tensor<5x4x3x6xf32>
  func.return
}
