// RUN: tessc-opt %s -p tess-to-linalg,tess-fuse | tessc-opt | filecheck %s

// A value used directly and by a consumer becomes a second result of the fused generic;
// its printed form `-> (t1, t2)` must read back (tessc.xdsl_patches.fixes).

func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = tess.exp %a : tensor<4xf32>
  %1 = tess.mul %0, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// CHECK:      %[[R:.*]], %[[E:.*]] = linalg.generic
// CHECK:        math.exp
// CHECK:        arith.mulf
// CHECK:      } -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: func.return %[[E]], %[[R]]
// CHECK-NOT:  linalg.generic
