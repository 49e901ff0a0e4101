// A value computed and never used costs nothing: every compiling pipeline starts with
// `dce` (tess ops are Pure), so fusion does not carry it as an extra kernel output.
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse' | filecheck %s --check-prefix=KEPT

func.func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %three = tess.fill 3.000000e+00 : tensor<f32>
  %unused = tess.mul %x, %three : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  %also_unused = tess.exp %x : tensor<4x4xf32>
  %one = tess.fill 1.000000e+00 : tensor<f32>
  %y = tess.add %x, %one : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}

// CHECK:         linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<4x4xf32>)
// CHECK-NOT:       math.exp
// CHECK-NOT:       arith.mulf
// CHECK:           arith.addf
// CHECK-NOT:     linalg.generic

// Without dce the dead values are still computed.
// KEPT:          arith.mulf
// KEPT:          math.exp
