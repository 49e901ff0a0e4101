// tess-gpu-partition: an outlined kernel is split where its members need each other's
// finished results across GPU blocks; each part is marked with its shape.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition' | filecheck %s
// Neighbouring kernels join first: a fill with the reduction after it, a reduction with
// the elementwise kernel that only rewrites its output.

// Softmax over rows is one CPU kernel (a row-wise group): max, exp(x - max), sum, divide,
// each needing the one before it finished, but only in the same row: it stays ONE kernel,
// marked `rows` (tess-gpu-rows runs it a block per row).
func.func @softmax(%x: tensor<6x33xf32>) -> tensor<6x33xf32> {
  %0 = tess.reduce_max %x dims = [1] keepdim : tensor<6x33xf32> -> tensor<6x1xf32>
  %1 = tess.sub %x, %0 : tensor<6x33xf32>, tensor<6x1xf32> -> tensor<6x33xf32>
  %2 = tess.exp %1 : tensor<6x33xf32>
  %3 = tess.sum %2 dims = [1] keepdim : tensor<6x33xf32> -> tensor<6x1xf32>
  %4 = tess.div %2, %3 : tensor<6x33xf32>, tensor<6x1xf32> -> tensor<6x33xf32>
  func.return %4 : tensor<6x33xf32>
}
// CHECK-LABEL: func.func @softmax(
// CHECK:         func.call @softmax_kernel_0(
// CHECK-NEXT:    func.return
// CHECK:       func.func private @softmax_kernel_0({{.*}}) attributes {tess.kernel, tess.gpu_shape = "rows"}

// A log-sum-exp over a matmul's rows: the matmul's rows are 5 wide (not one element per
// row), so the kernel splits: the matmul (its fill folded in), then the row max and the
// sum of exp(z - max) with log and + max, which one block per row runs together (split
// by its reductions they were two launches): ONE `rows` launch, as on the CPU.
func.func @lse_dense(%x: tensor<6x8xf32>, %w: tensor<8x5xf32>) -> tensor<6x1xf32> {
  %z = tess.matmul %x, %w : tensor<6x8xf32>, tensor<8x5xf32> -> tensor<6x5xf32>
  %m = tess.reduce_max %z dims = [1] keepdim : tensor<6x5xf32> -> tensor<6x1xf32>
  %d = tess.sub %z, %m : tensor<6x5xf32>, tensor<6x1xf32> -> tensor<6x5xf32>
  %e = tess.exp %d : tensor<6x5xf32>
  %s = tess.sum %e dims = [1] keepdim : tensor<6x5xf32> -> tensor<6x1xf32>
  %l = tess.log %s : tensor<6x1xf32>
  %r = tess.add %l, %m : tensor<6x1xf32>, tensor<6x1xf32> -> tensor<6x1xf32>
  func.return %r : tensor<6x1xf32>
}
// CHECK-LABEL: func.func @lse_dense(
// CHECK:         func.call @lse_dense_kernel_0_0(
// CHECK-NEXT:    func.call @lse_dense_kernel_0_1(
// CHECK-NEXT:    func.return
// CHECK:       func.func private @lse_dense_kernel_0_0({{.*}}) attributes {tess.kernel, tess.gpu_shape = "reduce"}
// CHECK-NEXT:    linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} outs(
// CHECK-NEXT:    ^bb
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-NOT:     linalg.generic
// CHECK:       func.func private @lse_dense_kernel_0_1({{.*}}) attributes {tess.kernel, tess.gpu_shape = "rows"}
// CHECK:         arith.maximumf
// CHECK:         math.exp
// CHECK:         math.log

// A matmul with its bias and relu: fill, contraction, and the epilogue (one (8,5) element
// per output element, same positions) stay ONE launch.
func.func @dense(%x: tensor<8x6xf32>, %w: tensor<6x5xf32>, %b: tensor<5xf32>) -> tensor<8x5xf32> {
  %0 = tess.matmul %x, %w : tensor<8x6xf32>, tensor<6x5xf32> -> tensor<8x5xf32>
  %1 = tess.add %0, %b : tensor<8x5xf32>, tensor<5xf32> -> tensor<8x5xf32>
  %2 = tess.relu %1 : tensor<8x5xf32>
  func.return %2 : tensor<8x5xf32>
}
// CHECK-LABEL: func.func @dense(
// CHECK-NEXT:    func.call @dense_kernel_0(
// CHECK-NEXT:    func.return
// CHECK:       func.func private @dense_kernel_0({{.*}}) attributes {tess.kernel, tess.gpu_shape = "reduce"}
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT:     linalg.generic
// CHECK:         func.return

// A column mean is three CPU kernels (fill, column sum, divide): one GPU kernel.
func.func @colmean(%x: tensor<7x6xf32>) -> tensor<6xf32> {
  %0 = tess.exp %x : tensor<7x6xf32>
  %1 = tess.mean %0 dims = [0] : tensor<7x6xf32> -> tensor<6xf32>
  func.return %1 : tensor<6xf32>
}
// CHECK-LABEL: func.func @colmean(
// CHECK-NEXT:    func.call @colmean_kernel_0(%out0, %x)
// CHECK-NEXT:    func.return
// CHECK:       func.func private @colmean_kernel_0(%out0: memref<6xf32>, %x: memref<7x6xf32>) attributes {tess.kernel, tess.gpu_shape = "reduce"}
// CHECK-NEXT:    linalg.generic {{.*}} outs(%out0 : memref<6xf32>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%x : memref<7x6xf32>) outs(%out0 : memref<6xf32>)
// CHECK:           math.exp
// CHECK:         linalg.generic {{.*}} ins(%out0 : memref<6xf32>) outs(%out0 : memref<6xf32>)
// CHECK:           arith.divf
// CHECK-NOT:   @colmean_kernel_1
