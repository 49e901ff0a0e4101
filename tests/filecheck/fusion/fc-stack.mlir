// tess-fuse's horizontal step (horizontal-fc): products sharing their right operand and
// contraction size become ONE product over the stacked left operands (seed 002's
// [Y1; Y2] = [X1; X2] W). REPORT pins the decision, KERNELS the kernel count.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse{report=true}' | filecheck %s --check-prefix=REPORT
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-outline-kernels' | filecheck %s --check-prefix=KERNELS
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse{horizontal-fc=false},tess-fuse-epilogue,tess-bufferize,tess-outline-kernels' | filecheck %s --check-prefix=APART

builtin.module {
  // Adjacent slices of one tensor: the product reads %x itself, no copy; the results
  // are row slices (views) of the stacked product.
  func.func @adjacent(%x: tensor<7x4xf32>, %w: tensor<4x5xf32>) -> (tensor<3x5xf32>, tensor<4x5xf32>) {
    %0 = tess.slice %x offsets = [0, 0] strides = [1, 1] : tensor<7x4xf32> -> tensor<3x4xf32>
    %1 = tess.matmul %0, %w : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
    %2 = tess.slice %x offsets = [3, 0] strides = [1, 1] : tensor<7x4xf32> -> tensor<4x4xf32>
    %3 = tess.matmul %2, %w : tensor<4x4xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
    func.return %1, %3 : tensor<3x5xf32>, tensor<4x5xf32>
  }
  // Separate left operands: a copy stacks them (each element read where it lies), in
  // the product's kernel (a kernel.group sharing the row loop): row i is copied, then
  // multiplied. One kernel (KERNELS), against two apart (APART).
  func.func @apart(%a: tensor<3x4xf32>, %b: tensor<2x4xf32>, %w: tensor<4x5xf32>) -> (tensor<3x5xf32>, tensor<2x5xf32>) {
    %0 = tess.matmul %a, %w : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
    %1 = tess.matmul %b, %w : tensor<2x4xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
    func.return %0, %1 : tensor<3x5xf32>, tensor<2x5xf32>
  }
  // The weight gradients of y = xa @ wa + xb @ wb: xb.T @ dy and xa.T @ dy share dy
  // (%2); the transposes are fused into the products, which stack xb's and xa's columns.
  func.func @grad_shared(%xa: tensor<6x3xf32>, %xb: tensor<6x2xf32>, %wa: tensor<3x5xf32>, %wb: tensor<2x5xf32>) -> (tensor<3x5xf32>, tensor<2x5xf32>) {
    %0 = tess.matmul %xa, %wa : tensor<6x3xf32>, tensor<3x5xf32> -> tensor<6x5xf32>
    %1 = tess.matmul %xb, %wb : tensor<6x2xf32>, tensor<2x5xf32> -> tensor<6x5xf32>
    %2 = tess.add %0, %1 : tensor<6x5xf32>, tensor<6x5xf32> -> tensor<6x5xf32>
    %3 = tess.permute %xb dims = [1, 0] : tensor<6x2xf32> -> tensor<2x6xf32>
    %4 = tess.matmul %3, %2 : tensor<2x6xf32>, tensor<6x5xf32> -> tensor<2x5xf32>
    %5 = tess.permute %xa dims = [1, 0] : tensor<6x3xf32> -> tensor<3x6xf32>
    %6 = tess.matmul %5, %2 : tensor<3x6xf32>, tensor<6x5xf32> -> tensor<3x5xf32>
    func.return %6, %4 : tensor<3x5xf32>, tensor<2x5xf32>
  }
  // A chain reads the first product in the second: not stacked, and said why.
  func.func @chain(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = tess.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %1 = tess.matmul %0, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    func.return %1 : tensor<4x4xf32>
  }
}

// CHECK-LABEL: func.func @adjacent(
// CHECK-NOT:     tensor.extract_slice %x
// CHECK:         linalg.generic {{.*}} ins(%x, %w : tensor<7x4xf32>, tensor<4x5xf32>) outs(%{{.*}} : tensor<7x5xf32>)
// CHECK:         %[[Y1:.+]] = tensor.extract_slice %[[P:.+]][0, 0] [3, 5] [1, 1] : tensor<7x5xf32> to tensor<3x5xf32>
// CHECK-NEXT:    %[[Y2:.+]] = tensor.extract_slice %[[P]][3, 0] [4, 5] [1, 1] : tensor<7x5xf32> to tensor<4x5xf32>
// CHECK-NEXT:    func.return %[[Y1]], %[[Y2]]

// CHECK-LABEL: func.func @apart(
// CHECK:         kernel.group
// CHECK:         %[[S:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<5x4xf32>) attrs =  {tess.op = "tess.concat"}
// CHECK-DAG:       tensor.extract %a
// CHECK-DAG:       tensor.extract %b
// CHECK:         linalg.generic {{.*}} ins(%[[S]], %w : tensor<5x4xf32>, tensor<4x5xf32>) outs(%{{.*}} : tensor<5x5xf32>)
// CHECK:         kernel.yield
// CHECK-NOT:     linalg.generic

// CHECK-LABEL: func.func @grad_shared(
// CHECK:         %[[DY:.+]] = linalg.generic {{.*}} attrs =  {tess.op = "tess.add"}
// CHECK:         %[[S:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<6x5xf32>) attrs =  {tess.op = "tess.concat"}
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], {{.*}} ins(%[[S]], %[[DY]] : tensor<6x5xf32>, tensor<6x5xf32>) outs(%{{.*}} : tensor<5x5xf32>)
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [2, 5] [1, 1] : tensor<5x5xf32> to tensor<2x5xf32>
// CHECK-NEXT:    tensor.extract_slice %{{.*}}[2, 0] [3, 5] [1, 1] : tensor<5x5xf32> to tensor<3x5xf32>

// REPORT-LABEL: func.func @adjacent(
// REPORT:         tess.fc_stacked = "2 products, rows a view of one tensor (no copy)"
// REPORT-LABEL: func.func @apart(
// REPORT:         tess.fc_stacked = "2 products, rows copied once (the left operands are not adjacent)"
// REPORT-LABEL: func.func @grad_shared(
// REPORT:         tess.fc_stacked = "2 products, rows copied once (the left operands are not adjacent)"
// REPORT-LABEL: func.func @chain(
// REPORT:         tess.fc_refused = "its result is read before the stacked product could be computed"
// REPORT-NOT:     tess.fc_stacked

// KERNELS-LABEL: func.func @adjacent(
// KERNELS-COUNT-1: func.call @adjacent_kernel_
// KERNELS-NOT:     func.call @adjacent_kernel_
// KERNELS-LABEL: func.func @apart(
// KERNELS-COUNT-1: func.call @apart_kernel_
// KERNELS-NOT:     func.call @apart_kernel_

// APART-LABEL: func.func @adjacent(
// APART-COUNT-2: func.call @adjacent_kernel_
// APART-NOT:     func.call @adjacent_kernel_
// APART-LABEL: func.func @apart(
// APART-COUNT-2: func.call @apart_kernel_
// APART-NOT:     func.call @apart_kernel_
