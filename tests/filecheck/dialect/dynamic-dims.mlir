// A dynamic dim `?` (issue 26 §2): every `?` of a function is its one dynamic size N (jit
// checks them equal at entry), so a `?` matches any dim at verify time; a matmul over a
// `?` batch, a reduction over it and a mean by N verify.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s -p "tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops" | filecheck %s --check-prefix=LOOPS

// CHECK-LABEL: func.func @batch
func.func @batch(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>, %count: tensor<f32>) -> (tensor<?x3xf32>, tensor<3xf32>) {
  // CHECK: tess.matmul %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
  %0 = tess.matmul %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
  // CHECK: tess.add %{{.*}}, %b : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  %1 = tess.add %0, %b : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  // CHECK: tess.sum %{{.*}} dims = [0] : tensor<?x3xf32> -> tensor<3xf32>
  %2 = tess.sum %1 dims = [0] : tensor<?x3xf32> -> tensor<3xf32>
  %3 = tess.div %2, %count : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  func.return %1, %3 : tensor<?x3xf32>, tensor<3xf32>
}

// N is read once at the host's entry and sizes each allocation; each kernel reads it from
// its own `?` argument for its loop bounds.
// LOOPS-LABEL: func.func @batch(
// LOOPS: %n = memref.dim %x, %{{.*}} : memref<?x4xf32>
// LOOPS: memref.alloc(%n) : memref<?x3xf32>
// LOOPS-LABEL: func.func private @batch_kernel_
// LOOPS: %n = memref.dim
// LOOPS: "scf.parallel"(%{{.*}}, %{{.*}}, %n,
