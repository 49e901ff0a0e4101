// tess-gpu-fold-transposes: a kernel that only copies an operand transposed is gone; the
// matmul reading the copy reads the operand in place through the composed map.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-fold-transposes' | filecheck %s

// x @ w.T: one kernel call, reading w at (d1, d2) -> w[d1, d2] for x[d0, d2].
func.func @x_wt(%x: tensor<16x10xf32>, %w: tensor<8x10xf32>) -> tensor<16x8xf32> {
  %t = tess.permute %w dims = [1, 0] : tensor<8x10xf32> -> tensor<10x8xf32>
  %0 = tess.matmul %x, %t : tensor<16x10xf32>, tensor<10x8xf32> -> tensor<16x8xf32>
  func.return %0 : tensor<16x8xf32>
}
// CHECK-LABEL: func.func @x_wt(
// CHECK:         func.call @x_wt_kernel_{{[0-9]+}}(%{{.*}}%w) :
// CHECK-NOT:     func.call
// CHECK:       func.func private @x_wt_kernel_{{[0-9]+}}(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-NOT:     tess.permute

// A transposed copy that is a result of the function stays.
func.func @kept(%x: tensor<16x10xf32>, %w: tensor<8x10xf32>) -> (tensor<16x8xf32>, tensor<10x8xf32>) {
  %t = tess.permute %w dims = [1, 0] : tensor<8x10xf32> -> tensor<10x8xf32>
  %0 = tess.matmul %x, %t : tensor<16x10xf32>, tensor<10x8xf32> -> tensor<16x8xf32>
  func.return %0, %t : tensor<16x8xf32>, tensor<10x8xf32>
}
// CHECK-LABEL: func.func @kept(
// CHECK:         func.call @kept_kernel_{{[0-9]+}}(%w, %out1)
// CHECK:         func.call @kept_kernel_{{[0-9]+}}(
