// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-pack-matmul{vector-bits=512 threads=2},tess-interchange-rows,tess-row-dots{vector-bits=512}' | filecheck %s

// The digits MLP train step (the module of mlp-step-kernels.mlir), through the cpu
// pipeline's loop passes to tess-row-dots. Its forward kernel runs x @ w1 packed, then per
// block of 32 rows, 16 rows at a time: relu and the logits' zero fill, `h @ w2` for them
// as one 16 x 16 micro.mma reading h's rows in place and w2.T packed back to [k, j] (once,
// before the packed nest), the tile added to the logits; then log-softmax's nests over the
// block's rows (tess-interchange-rows). No dot nest is left (32-row blocks: no rows left
// over).

builtin.module {
  func.func @step(%p_b1: tensor<128xf32> {tess.donated}, %p_b2: tensor<10xf32> {tess.donated}, %p_w1: tensor<64x128xf32> {tess.donated}, %p_w2: tensor<128x10xf32> {tess.donated}, %x: tensor<128x64xf32>, %y: tensor<128x10xf32>) -> (tensor<128xf32>, tensor<10xf32>, tensor<64x128xf32>, tensor<128x10xf32>, tensor<f32>) {
    %0 = tess.matmul %x, %p_w1 : tensor<128x64xf32>, tensor<64x128xf32> -> tensor<128x128xf32>
    %1 = tess.add %0, %p_b1 : tensor<128x128xf32>, tensor<128xf32> -> tensor<128x128xf32>
    %2 = tess.relu %1 : tensor<128x128xf32>
    %3 = tess.matmul %2, %p_w2 : tensor<128x128xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %4 = tess.add %3, %p_b2 : tensor<128x10xf32>, tensor<10xf32> -> tensor<128x10xf32>
    %5 = tess.reduce_max %4 dims = [1] keepdim : tensor<128x10xf32> -> tensor<128x1xf32>
    %6 = tess.sub %4, %5 : tensor<128x10xf32>, tensor<128x1xf32> -> tensor<128x10xf32>
    %7 = tess.exp %6 : tensor<128x10xf32>
    %8 = tess.sum %7 dims = [1] keepdim : tensor<128x10xf32> -> tensor<128x1xf32>
    %9 = tess.log %8 : tensor<128x1xf32>
    %10 = tess.sub %6, %9 : tensor<128x10xf32>, tensor<128x1xf32> -> tensor<128x10xf32>
    %11 = tess.mul %10, %y : tensor<128x10xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %12 = tess.sum %11 dims = [0, 1] : tensor<128x10xf32> -> tensor<f32>
    %13 = tess.neg %12 : tensor<f32>
    %14 = tess.fill 1.280000e+02 : tensor<f32>
    %15 = tess.div %13, %14 : tensor<f32>, tensor<f32> -> tensor<f32>
    %16 = tess.fill -7.812500e-03 : tensor<128x10xf32>
    %17 = tess.mul %16, %y : tensor<128x10xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %18 = tess.neg %17 : tensor<128x10xf32>
    %19 = tess.sum %18 dims = [1] keepdim : tensor<128x10xf32> -> tensor<128x1xf32>
    %20 = tess.div %19, %8 : tensor<128x1xf32>, tensor<128x1xf32> -> tensor<128x1xf32>
    %21 = tess.mul %20, %7 : tensor<128x1xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %22 = tess.add %17, %21 : tensor<128x10xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %23 = tess.neg %22 : tensor<128x10xf32>
    %24 = tess.sum %23 dims = [1] keepdim : tensor<128x10xf32> -> tensor<128x1xf32>
    %25 = tess.eq %4, %5 : tensor<128x10xf32>, tensor<128x1xf32> -> tensor<128x10xf32>
    %26 = tess.sum %25 dims = [1] keepdim : tensor<128x10xf32> -> tensor<128x1xf32>
    %27 = tess.div %24, %26 : tensor<128x1xf32>, tensor<128x1xf32> -> tensor<128x1xf32>
    %28 = tess.mul %25, %27 : tensor<128x10xf32>, tensor<128x1xf32> -> tensor<128x10xf32>
    %29 = tess.add %22, %28 : tensor<128x10xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %30 = tess.sum %29 dims = [0] : tensor<128x10xf32> -> tensor<10xf32>
    %31 = tess.permute %p_w2 dims = [1, 0] : tensor<128x10xf32> -> tensor<10x128xf32>
    %32 = tess.matmul %29, %31 : tensor<128x10xf32>, tensor<10x128xf32> -> tensor<128x128xf32>
    %33 = tess.permute %2 dims = [1, 0] : tensor<128x128xf32> -> tensor<128x128xf32>
    %34 = tess.matmul %33, %29 : tensor<128x128xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %35 = tess.fill 0.000000e+00 : tensor<1x1xf32>
    %36 = tess.gt %1, %35 : tensor<128x128xf32>, tensor<1x1xf32> -> tensor<128x128xf32>
    %37 = tess.mul %32, %36 : tensor<128x128xf32>, tensor<128x128xf32> -> tensor<128x128xf32>
    %38 = tess.sum %37 dims = [0] : tensor<128x128xf32> -> tensor<128xf32>
    %39 = tess.permute %x dims = [1, 0] : tensor<128x64xf32> -> tensor<64x128xf32>
    %40 = tess.matmul %39, %37 : tensor<64x128xf32>, tensor<128x128xf32> -> tensor<64x128xf32>
    %41 = tess.fill 1.000000e-01 : tensor<f32>
    %42 = tess.mul %41, %38 : tensor<f32>, tensor<128xf32> -> tensor<128xf32>
    %43 = tess.sub %p_b1, %42 : tensor<128xf32>, tensor<128xf32> -> tensor<128xf32>
    %44 = tess.fill 1.000000e-01 : tensor<f32>
    %45 = tess.mul %44, %30 : tensor<f32>, tensor<10xf32> -> tensor<10xf32>
    %46 = tess.sub %p_b2, %45 : tensor<10xf32>, tensor<10xf32> -> tensor<10xf32>
    %47 = tess.fill 1.000000e-01 : tensor<f32>
    %48 = tess.mul %47, %40 : tensor<f32>, tensor<64x128xf32> -> tensor<64x128xf32>
    %49 = tess.sub %p_w1, %48 : tensor<64x128xf32>, tensor<64x128xf32> -> tensor<64x128xf32>
    %50 = tess.fill 1.000000e-01 : tensor<f32>
    %51 = tess.mul %50, %34 : tensor<f32>, tensor<128x10xf32> -> tensor<128x10xf32>
    %52 = tess.sub %p_w2, %51 : tensor<128x10xf32>, tensor<128x10xf32> -> tensor<128x10xf32>
    func.return %43, %46, %49, %52, %15 : tensor<128xf32>, tensor<10xf32>, tensor<64x128xf32>, tensor<128x10xf32>, tensor<f32>
  }
}

// CHECK-LABEL: func.func private @step_kernel_1(
// CHECK-SAME:      %[[H:[0-9]+]]: memref<128x128xf32>, %{{[0-9]+}}: memref<128x10xf32>, %[[W2T:[0-9]+]]: memref<10x128xf32>
// CHECK:         %bq = memref.alloc() {alignment = 64 : i64} : memref<1286xf32>
// CHECK-NEXT:    %dt = memref.alloc() {alignment = 64 : i64} : memref<32x16xf32>
// CHECK:         memref.load %[[W2T]][%j, %kk] : memref<10x128xf32>
// CHECK:         "scf.parallel"
// CHECK:           micro.mma %x
// CHECK:           scf.for %rt =
// CHECK:             arith.maximumf
// CHECK:             memref.store %{{[0-9]+}}, %[[H]][%i, %i1] : memref<128x128xf32>
// CHECK:             micro.mma %[[H]][%{{[0-9]+}}], %bq[%{{[0-9]+}}], %{{[0-9]+}}, %dt[%dslot, %{{[0-9]+}}], %{{[0-9]+}} {rows = 16 : i64, cols = 16 : i64, lanes = 16 : i64, strides = array<i64: 128, 1, 10>}
// CHECK:             memref.load %dt[
// CHECK:           } {tess.register_tile = array<i64: 16, 16>}
// CHECK-NOT:       %[[W2T]]
// CHECK:           math.exp
// CHECK:           math.log
// CHECK-NOT:       %[[W2T]]
// CHECK:         func.return
