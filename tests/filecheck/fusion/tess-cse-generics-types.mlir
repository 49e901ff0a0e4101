// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-cse-generics' | filecheck %s

// Two fused generics doing the same ops on the same input through different
// intermediate types (x -> f32 -> i64 rounds x, x -> f64 -> i64 does not): structurally
// the same bodies but for their ops' result types, so both are kept.
func.func @types(%x: tensor<6xi64>) -> (tensor<6xi64>, tensor<6xi64>) {
  %a = tess.cast %x : tensor<6xi64> -> tensor<6xf32>
  %b = tess.cast %a : tensor<6xf32> -> tensor<6xi64>
  %c = tess.cast %x : tensor<6xi64> -> tensor<6xf64>
  %d = tess.cast %c : tensor<6xf64> -> tensor<6xi64>
  func.return %b, %d : tensor<6xi64>, tensor<6xi64>
}

// CHECK-LABEL: func.func @types(
// CHECK:         %b = linalg.generic {{.*}} ins(%x : tensor<6xi64>)
// CHECK:           arith.sitofp %{{.*}} : i64 to f32
// CHECK:           arith.fptosi %{{.*}} : f32 to i64
// CHECK:         %d = linalg.generic {{.*}} ins(%x : tensor<6xi64>)
// CHECK:           arith.sitofp %{{.*}} : i64 to f64
// CHECK:           arith.fptosi %{{.*}} : f64 to i64
// CHECK:         func.return %b, %d
