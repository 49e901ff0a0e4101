// tess-autodiff writes @f_grad(args..., [grad_out]) -> (primal results..., gradients...) next
// to @f, in tess ops. The cases pin the shape of the backward code that the issue spells out.
// RUN: tessc-opt %s -p 'tess-autodiff{func=matmul},tess-autodiff{func=batched_matmul},tess-autodiff{func=broadcast_add wrt=1,2},tess-autodiff{func=fan_out},tess-autodiff{func=reduce_max},tess-autodiff{func=shape_ops},tess-autodiff{func=calls},tess-autodiff{func=select},tess-autodiff{func=two_results},tess-autodiff{func=unit_result grad-name=unit_backward}' | filecheck %s

// Matmul's backward is two matmuls with transposes: dM = dOut · Nᵀ, dN = Mᵀ · dOut. The
// result is not scalar, so the gradient function takes its seed %grad_out.
func.func @matmul(%m: tensor<3x4xf32>, %n: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %0 = tess.matmul %m, %n : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  func.return %0 : tensor<3x5xf32>
}
// CHECK-LABEL: func.func @matmul_grad(%m: tensor<3x4xf32>, %n: tensor<4x5xf32>, %grad_out: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x4xf32>, tensor<4x5xf32>) {
// CHECK-NEXT:    %[[Y:.*]] = tess.matmul %m, %n : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT:    %[[NT:.*]] = tess.permute %n dims = [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
// CHECK-NEXT:    %[[DM:.*]] = tess.matmul %grad_out, %[[NT]] : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[MT:.*]] = tess.permute %m dims = [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[DN:.*]] = tess.matmul %[[MT]], %grad_out : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    func.return %[[Y]], %[[DM]], %[[DN]] : tensor<3x5xf32>, tensor<3x4xf32>, tensor<4x5xf32>
// CHECK-NEXT:  }

// Batched with a broadcast batch dim: the transpose swaps the last two dims only. The
// gradient of the unbatched (shared 2-D) operand is ONE product over the batch's stacked
// rows, (B*M, K)^T @ (B*M, N), not a product per batch element summed afterwards.
func.func @batched_matmul(%m: tensor<2x3x4xf32>, %n: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = tess.matmul %m, %n : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  func.return %0 : tensor<2x3x5xf32>
}
// CHECK-LABEL: func.func @batched_matmul_grad(
// CHECK:         %[[NT:.*]] = tess.permute %n dims = [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
// CHECK-NEXT:    %[[DM:.*]] = tess.matmul %grad_out, %[[NT]] : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[MS:.*]] = tess.reshape %m : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    %[[GS:.*]] = tess.reshape %grad_out : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT:    %[[MT:.*]] = tess.permute %[[MS]] dims = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[DN:.*]] = tess.matmul %[[MT]], %[[GS]] : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    func.return %{{.*}}, %[[DM]], %[[DN]] :

// A broadcast add's backward sums the gradient over the broadcast dims: the stretched 1s are
// kept by the sum, the leading dims are dropped by a reshape. The scalar loss needs no seed
// argument (its seed is 1, and exp's gradient is then just exp). %a is not in wrt: no code
// for it.
func.func @broadcast_add(%a: tensor<3x4x5xf32>, %b: tensor<3x1x5xf32>, %c: tensor<4x1xf32>) -> tensor<f32> {
  %0 = tess.add %a, %b : tensor<3x4x5xf32>, tensor<3x1x5xf32> -> tensor<3x4x5xf32>
  %1 = tess.add %0, %c : tensor<3x4x5xf32>, tensor<4x1xf32> -> tensor<3x4x5xf32>
  %2 = tess.exp %1 : tensor<3x4x5xf32>
  %3 = tess.sum %2 dims = [0, 1, 2] : tensor<3x4x5xf32> -> tensor<f32>
  func.return %3 : tensor<f32>
}
// CHECK-LABEL: func.func @broadcast_add_grad(%a: tensor<3x4x5xf32>, %b: tensor<3x1x5xf32>, %c: tensor<4x1xf32>) -> (tensor<f32>, tensor<3x1x5xf32>, tensor<4x1xf32>) {
// CHECK:         %[[E:.*]] = tess.exp
// CHECK-NEXT:    %[[L:.*]] = tess.sum %[[E]] dims = [0, 1, 2] : tensor<3x4x5xf32> -> tensor<f32>
// CHECK-NEXT:    %[[SC:.*]] = tess.sum %[[E]] dims = [0, 2] keepdim : tensor<3x4x5xf32> -> tensor<1x4x1xf32>
// CHECK-NEXT:    %[[DC:.*]] = tess.reshape %[[SC]] : tensor<1x4x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[DB:.*]] = tess.sum %[[E]] dims = [1] keepdim : tensor<3x4x5xf32> -> tensor<3x1x5xf32>
// CHECK-NEXT:    func.return %[[L]], %[[DB]], %[[DC]] : tensor<f32>, tensor<3x1x5xf32>, tensor<4x1xf32>

// Fan-out accumulates: x * x gives x its two contributions (equal, so CSE shares them); an
// unused argument gets a zero gradient.
func.func @fan_out(%x: tensor<4xf64>, %unused: tensor<2xf64>) -> tensor<4xf64> {
  %0 = tess.mul %x, %x : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  %1 = tess.tanh %0 : tensor<4xf64>
  func.return %1 : tensor<4xf64>
}
// CHECK-LABEL: func.func @fan_out_grad(%x: tensor<4xf64>, %unused: tensor<2xf64>, %grad_out: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<2xf64>) {
// CHECK-NEXT:    %[[SQ:.*]] = tess.mul %x, %x
// CHECK-NEXT:    %[[T:.*]] = tess.tanh %[[SQ]] : tensor<4xf64>
// CHECK-NEXT:    %[[ONE:.*]] = tess.fill 1.000000e+00 : tensor<1xf64>
// CHECK-NEXT:    %[[TT:.*]] = tess.mul %[[T]], %[[T]]
// CHECK-NEXT:    %[[D:.*]] = tess.sub %[[ONE]], %[[TT]] : tensor<1xf64>, tensor<4xf64> -> tensor<4xf64>
// CHECK-NEXT:    %[[GSQ:.*]] = tess.mul %grad_out, %[[D]]
// CHECK-NEXT:    %[[PART:.*]] = tess.mul %[[GSQ]], %x
// CHECK-NEXT:    %[[DX:.*]] = tess.add %[[PART]], %[[PART]] : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
// CHECK-NEXT:    %[[ZERO:.*]] = tess.fill 0.000000e+00 : tensor<2xf64>
// CHECK-NEXT:    func.return %[[T]], %[[DX]], %[[ZERO]] : tensor<4xf64>, tensor<4xf64>, tensor<2xf64>

// reduce_max: the gradient goes to the arg-max positions, split evenly among ties.
func.func @reduce_max(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  %0 = tess.reduce_max %x dims = [1] : tensor<3x4xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK-LABEL: func.func @reduce_max_grad(
// CHECK-NEXT:    %[[M:.*]] = tess.reduce_max %x dims = [1] : tensor<3x4xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[G:.*]] = tess.reshape %grad_out : tensor<3xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    %[[MK:.*]] = tess.reshape %[[M]] : tensor<3xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    %[[IS:.*]] = tess.eq %x, %[[MK]] : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[TIES:.*]] = tess.sum %[[IS]] dims = [1] keepdim : tensor<3x4xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    %[[SHARE:.*]] = tess.div %[[G]], %[[TIES]]
// CHECK-NEXT:    %[[DX:.*]] = tess.mul %[[IS]], %[[SHARE]] : tensor<3x4xf32>, tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    func.return %[[M]], %[[DX]]

// view/permute/broadcast_to: the inverse shape op (broadcast_to's is a sum). mean scales by
// 1/72, folded with the seed into one constant. The gradient's zip broadcasts %y itself
// rather than use the broadcast_to copy.
func.func @shape_ops(%x: tensor<2x3xf32>, %y: tensor<3x1xf32>) -> tensor<f32> {
  %0 = tess.permute %x dims = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = tess.reshape %0 : tensor<3x2xf32> -> tensor<6xf32>
  %2 = tess.broadcast_to %y : tensor<3x1xf32> -> tensor<4x3x6xf32>
  %3 = tess.mul %1, %2 : tensor<6xf32>, tensor<4x3x6xf32> -> tensor<4x3x6xf32>
  %4 = tess.mean %3 dims = [0, 1, 2] : tensor<4x3x6xf32> -> tensor<f32>
  func.return %4 : tensor<f32>
}
// CHECK-LABEL: func.func @shape_ops_grad(
// CHECK:         %[[SCALE:.*]] = tess.fill 0.013888888888888888 : tensor<4x3x6xf32>
// CHECK-NEXT:    %[[G1:.*]] = tess.mul %[[SCALE]], %y : tensor<4x3x6xf32>, tensor<3x1xf32> -> tensor<4x3x6xf32>
// CHECK-NEXT:    %[[G2:.*]] = tess.mul %[[SCALE]], %{{.*}} : tensor<4x3x6xf32>, tensor<6xf32> -> tensor<4x3x6xf32>
// CHECK-NEXT:    %[[D1:.*]] = tess.sum %[[G1]] dims = [0, 1] : tensor<4x3x6xf32> -> tensor<6xf32>
// CHECK-NEXT:    %[[DB:.*]] = tess.sum %[[G2]] dims = [0, 2] keepdim : tensor<4x3x6xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    %[[DY:.*]] = tess.reshape %[[DB]] : tensor<1x3x1xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    %[[D0:.*]] = tess.reshape %[[D1]] : tensor<6xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    %[[DX:.*]] = tess.permute %[[D0]] dims = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %{{.*}}, %[[DX]], %[[DY]] : tensor<f32>, tensor<2x3xf32>, tensor<3x1xf32>

// Calls to functions of the module are inlined into the gradient function; the callee stays.
func.func private @square(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tess.mul %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @calls(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = func.call @square(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @square(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tess.sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  func.return %2 : tensor<f32>
}
// CHECK-LABEL: func.func @calls_grad(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
// CHECK-NOT:     func.call
// CHECK:         %[[X2:.*]] = tess.mul %x, %x
// CHECK-NEXT:    %[[X4:.*]] = tess.mul %[[X2]], %[[X2]]
// CHECK-NEXT:    %[[L:.*]] = tess.sum %[[X4]]
// CHECK-NEXT:    %[[D2:.*]] = tess.add %[[X2]], %[[X2]]
// CHECK-NEXT:    %[[P:.*]] = tess.mul %[[D2]], %x
// CHECK-NEXT:    %[[DX:.*]] = tess.add %[[P]], %[[P]]
// CHECK-NEXT:    func.return %[[L]], %[[DX]] : tensor<f32>, tensor<4xf32>

// select routes the gradient to the taken side; the condition (a comparison) gets none.
func.func @select(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = tess.gt %x, %y : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = tess.select %0, %x, %y : tensor<3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %1 : tensor<3xf32>
}
// CHECK-LABEL: func.func @select_grad(
// CHECK:         %[[C:.*]] = tess.gt %x, %y
// CHECK-NEXT:    %[[S:.*]] = tess.select %[[C]], %x, %y
// CHECK-NEXT:    %[[Z:.*]] = tess.fill 0.000000e+00 : tensor<1xf32>
// CHECK-NEXT:    %[[DX:.*]] = tess.select %[[C]], %grad_out, %[[Z]]
// CHECK-NEXT:    %[[DY:.*]] = tess.select %[[C]], %[[Z]], %grad_out
// CHECK-NEXT:    func.return %[[S]], %[[DX]], %[[DY]]

// Several results: a seed for the non-scalar one, 1 for the scalar one, contributions summed.
func.func @two_results(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %0 = tess.exp %x : tensor<3xf32>
  %1 = tess.sum %0 dims = [0] : tensor<3xf32> -> tensor<f32>
  func.return %1, %0 : tensor<f32>, tensor<3xf32>
}
// CHECK-LABEL: func.func @two_results_grad(%x: tensor<3xf32>, %grad_out: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) {
// CHECK:         %[[ONES:.*]] = tess.fill 1.000000e+00 : tensor<3xf32>
// CHECK-NEXT:    %[[G:.*]] = tess.add %grad_out, %[[ONES]]
// CHECK-NEXT:    %[[DX:.*]] = tess.mul %[[G]], %{{.*}}
// CHECK-NEXT:    func.return %{{.*}}, %{{.*}}, %[[DX]]

// A one-element result counts as scalar (no seed); grad-name renames the new function.
func.func @unit_result(%x: tensor<1x1xf32>) -> tensor<1x1xf32> {
  %0 = tess.neg %x : tensor<1x1xf32>
  func.return %0 : tensor<1x1xf32>
}
// CHECK-LABEL: func.func @unit_backward(%x: tensor<1x1xf32>) -> (tensor<1x1xf32>, tensor<1x1xf32>) {
// CHECK-NEXT:    %[[Y:.*]] = tess.neg %x
// CHECK-NEXT:    %[[D:.*]] = tess.fill -1.000000e+00 : tensor<1x1xf32>
// CHECK-NEXT:    func.return %[[Y]], %[[D]]
