// The gradient of ts.nn.cross_entropy (stable log-sum-exp, the max under stop_gradient,
// the picked logit through one_hot) fuses to (softmax - one_hot) / N: after tess-fuse, the
// gradient is ONE generic over (N, C) that multiplies the saved exp(x - max) by 1/(N * sum)
// and subtracts the one-hot term, computed in place from the labels (linalg.index): no
// one-hot tensor, no tie-splitting terms of reduce_max.
// RUN: tessc-opt %s -p 'tess-autodiff{func=ce wrt=0}' | filecheck %s --check-prefix=GRAD
// RUN: tessc-opt %s -p 'tess-autodiff{func=ce wrt=0},tess-to-linalg,tess-fuse' | filecheck %s

// The gradient IR never differentiates reduce_max (stop_gradient cuts it).
// GRAD-LABEL: func.func @ce_grad
// GRAD-NOT:   tess.eq
// GRAD:       tess.one_hot %labels
// GRAD:       func.return

// CHECK-LABEL: func.func @ce_grad
// CHECK:       %[[DX:.*]] = linalg.generic {{.*}} ins(%labels, {{.*}} : tensor<8xi64>, {{.*}}tensor<8x10xf64>) outs({{.*}} : tensor<8x10xf64>)
// CHECK:         arith.mulf
// CHECK:         arith.index_cast %{{.*}} : i64 to index
// CHECK:         linalg.index 1 : index
// CHECK:         arith.cmpi eq
// CHECK:         arith.select
// CHECK:         arith.mulf
// CHECK:         arith.addf
// CHECK-NEXT:    linalg.yield
// CHECK-NEXT:  } -> tensor<8x10xf64>
// CHECK-NEXT:  func.return %{{.*}}, %[[DX]] : tensor<f64>, tensor<8x10xf64>
func.func @ce(%logits: tensor<8x10xf64>, %labels: tensor<8xi64>) -> tensor<f64> {
  %0 = tess.reduce_max %logits dims = [1] keepdim : tensor<8x10xf64> -> tensor<8x1xf64>
  %1 = tess.stop_gradient %0 : tensor<8x1xf64>
  %2 = tess.sub %logits, %1 : tensor<8x10xf64>, tensor<8x1xf64> -> tensor<8x10xf64>
  %3 = tess.exp %2 : tensor<8x10xf64>
  %4 = tess.sum %3 dims = [1] keepdim : tensor<8x10xf64> -> tensor<8x1xf64>
  %5 = tess.log %4 : tensor<8x1xf64>
  %6 = tess.add %1, %5 : tensor<8x1xf64>, tensor<8x1xf64> -> tensor<8x1xf64>
  %7 = tess.sum %6 dims = [1] : tensor<8x1xf64> -> tensor<8xf64>
  %8 = tess.one_hot %labels : tensor<8xi64> -> tensor<8x10xf64>
  %9 = tess.mul %8, %logits : tensor<8x10xf64>, tensor<8x10xf64> -> tensor<8x10xf64>
  %10 = tess.sum %9 dims = [1] : tensor<8x10xf64> -> tensor<8xf64>
  %11 = tess.sub %7, %10 : tensor<8xf64>, tensor<8xf64> -> tensor<8xf64>
  %12 = tess.mean %11 dims = [0] : tensor<8xf64> -> tensor<f64>
  func.return %12 : tensor<f64>
}
