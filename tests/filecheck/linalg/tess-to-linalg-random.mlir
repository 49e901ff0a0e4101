// The counter-based RNG's ops (tessc/random.py): tess.iota lowers to a generic without
// inputs whose body folds linalg.index into the row-major linear index; the integer bit ops
// lower to arith.shli/shrui/ori/xori. tess-fuse puts all of it into the consumer's body:
// one generic, no counter or bits tensor (so dropout keeps no mask buffer).
// RUN: tessc-opt %s -p tess-to-linalg | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse{report=true}' | filecheck %s --check-prefix=FUSE

// CHECK-LABEL: func.func @bits
// CHECK:       linalg.generic
// CHECK-SAME:    outs(%{{.*}} : tensor<4x8xi32>) attrs = {tess.op = "tess.iota"}
// CHECK-NEXT:  ^bb0(%{{.*}}: i32):
// CHECK-NEXT:    %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT:    %[[N:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[R:.*]] = arith.muli %[[I]], %[[N]] : index
// CHECK-NEXT:    %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:    %[[L:.*]] = arith.addi %[[R]], %[[J]] : index
// CHECK-NEXT:    %[[C:.*]] = arith.index_cast %[[L]] : index to i32
// CHECK-NEXT:    linalg.yield %[[C]] : i32
// CHECK:       tess.op = "tess.shl"
// CHECK:       arith.shli %{{.*}}, %{{.*}} : i32
// CHECK:       tess.op = "tess.shru"
// CHECK:       arith.shrui %{{.*}}, %{{.*}} : i32
// CHECK:       tess.op = "tess.or"
// CHECK:       arith.ori %{{.*}}, %{{.*}} : i32
// CHECK:       tess.op = "tess.xor"
// CHECK:       arith.xori %{{.*}}, %{{.*}} : i32

// FUSE-LABEL:  func.func @bits
// FUSE:        linalg.generic
// FUSE-SAME:     tess.fused = ["tess.iota", "tess.fill", "tess.fill", "tess.shl", "tess.shru", "tess.or", "tess.xor", "tess.cast", "tess.mul"]
// FUSE:          linalg.index 0
// FUSE:          arith.xori
// FUSE:          arith.mulf
// FUSE-NOT:    linalg.generic
func.func @bits(%x: tensor<4x8xf32>, %k: tensor<i32>) -> tensor<4x8xf32> {
  %i = tess.iota : tensor<4x8xi32>
  %c13 = tess.fill 13.0 : tensor<i32>
  %c19 = tess.fill 19.0 : tensor<i32>
  %l = tess.shl %i, %c13 : tensor<4x8xi32>, tensor<i32> -> tensor<4x8xi32>
  %r = tess.shru %i, %c19 : tensor<4x8xi32>, tensor<i32> -> tensor<4x8xi32>
  %rot = tess.or %l, %r : tensor<4x8xi32>, tensor<4x8xi32> -> tensor<4x8xi32>
  %w = tess.xor %rot, %k : tensor<4x8xi32>, tensor<i32> -> tensor<4x8xi32>
  %f = tess.cast %w : tensor<4x8xi32> -> tensor<4x8xf32>
  %y = tess.mul %f, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
