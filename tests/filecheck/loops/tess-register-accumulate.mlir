// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-pack-narrow,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,tess-register-accumulate' | filecheck %s

// The narrow matmul's dot over k and the row max carry their element as an iter_arg:
// one load before the loop, one store after, none of the output inside.
func.func @f(%h: tensor<16x64xf32>, %w: tensor<64x10xf32>) -> (tensor<16x10xf32>, tensor<16x1xf32>) {
  %m = tess.matmul %h, %w : tensor<16x64xf32>, tensor<64x10xf32> -> tensor<16x10xf32>
  %x = tess.reduce_max %m dims = [1] keepdim : tensor<16x10xf32> -> tensor<16x1xf32>
  func.return %m, %x : tensor<16x10xf32>, tensor<16x1xf32>
}

// CHECK-LABEL: func.func private @f_kernel_1(
// CHECK:         %[[INIT:.*]] = memref.load %out0[%i0, %i1] : memref<16x10xf32>
// CHECK-NEXT:    %[[DOT:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%acc = %[[INIT]]) -> (f32) {
// CHECK-NOT:       memref.store
// CHECK-NOT:       memref.load %out0
// CHECK:           scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.store %[[DOT]], %out0[%i0, %i1] : memref<16x10xf32>
// CHECK:         scf.for %{{.*}} iter_args(%acc{{.*}} = %{{.*}}) -> (f32) {
// CHECK-NOT:       memref.store
// CHECK:           arith.maximumf %acc
// CHECK:           scf.yield
