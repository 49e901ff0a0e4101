// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels' | filecheck %s
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels' | filecheck %s --check-prefix=DH
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true report=true}' | filecheck %s --check-prefix=UPD

// The digits MLP train step (bench/mlp_step.py: 64-128-10, batch 128, softmax
// cross-entropy, SGD, parameters donated), as `jit` traces it. Its kernels: 12 (each bias
// gradient's zero fill runs in its column sum's kernel: tess-fuse-epilogue), with one
// transposed copy of `w2` (shared by `h @ w2` and `dz @ w2.T`: tess-cse-generics) and no
// 128x128 transposed copy (`h.T @ dz` runs transposed: tess-pack-narrow), only the
// 10x128 product transposed back. The b1 gradient sums dh itself (DH): x.T @ dh
// materializes it, so recomputing it there would read dz @ w2.T, pre and b1 (tess-fuse);
// that sum's kernel fills its zeros first, then sums (one kernel, no separate fill call).
// The updates of b1, b2 and w2 (`p - 0.1 * g`, g computed by the step) are ONE kernel
// (tess-fuse-horizontal's step 4, UPD); w1's runs in its gradient's contraction kernel.

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


// CHECK-LABEL: func.func @step(
// CHECK-COUNT-12: func.call @step_kernel_
// CHECK-NOT:      func.call @step_kernel_
// CHECK:          func.return
// CHECK-COUNT-2:  attrs =  {tess.op = "tess.permute"}
// CHECK-NOT:      attrs =  {tess.op = "tess.permute"}

// DH:      func.call @step_kernel_{{[0-9]+}}(%[[DH:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %p_b1) :
// DH:      func.call @step_kernel_[[SUM:[0-9]+]](%{{[0-9]+}}, %[[DH]]) : (memref<128xf32>, memref<128x128xf32>) -> ()
// DH:      func.call @step_kernel_{{[0-9]+}}(%{{[a-z0-9_]+}}, %x, %[[DH]], %p_w1, %out2)
// DH:      func.func private @step_kernel_[[SUM]](
// DH-NEXT:   linalg.generic {{.*}} outs(%0 : memref<128xf32>)
// DH:        arith.constant 0.000000e+00
// DH:        linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%1 : memref<128x128xf32>) outs(%0 : memref<128xf32>)
// DH:        func.return

// UPD:      kernel.group -> (tensor<128xf32>, tensor<10xf32>, tensor<128x10xf32>) attributes {tess.horizontal_members = 3 : i64} {
// UPD-NEXT:   tensor.empty() : tensor<128xf32>
// UPD-NEXT:   linalg.generic {{.*}} ins(%p_b1, %{{.*}} : tensor<128xf32>, tensor<128xf32>)
// UPD:        tensor.empty() : tensor<10xf32>
// UPD-NEXT:   linalg.generic {{.*}} ins(%p_b2, %{{.*}} : tensor<10xf32>, tensor<10xf32>)
// UPD:        tensor.empty() : tensor<128x10xf32>
// UPD-NEXT:   linalg.generic {{.*}} ins(%p_w2, %{{.*}} : tensor<128x10xf32>, tensor<128x10xf32>)
// UPD:        kernel.yield
