// tess-decompose-attention (the cuda pipeline's first pass) rewrites the attention ops as
// the tess ops they compute: scale * q @ k^T, a bool mask selecting -inf, a causal mask
// from iota rows and columns (j <= i), a safe softmax (a row of -inf gives 0), and
// flash attention's gradient as matmuls of p = exp(s - lse).
// RUN: tessc-opt %s -p tess-decompose-attention | filecheck %s

// CHECK-LABEL: func.func @forward
func.func @forward(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %m: tensor<1x3x5xi1>) -> tensor<2x3x6xf32> {
  // CHECK:      %[[KT:.*]] = tess.permute %k dims = [0, 2, 1]
  // CHECK-NEXT: %[[QK:.*]] = tess.matmul %q, %[[KT]]
  // CHECK:      %[[S:.*]] = tess.mul %[[QK]], %{{.*}} : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  // CHECK:      %[[MASKED:.*]] = tess.select %m, %[[S]], %{{.*}} : tensor<1x3x5xi1>, tensor<2x3x5xf32>, tensor<f32>
  // CHECK:      tess.reduce_max %[[MASKED]] dims = [2] keepdim
  // CHECK:      %[[E:.*]] = tess.exp
  // CHECK:      tess.sum %[[E]] dims = [2] keepdim
  // CHECK:      %[[PV:.*]] = tess.matmul %[[E]], %v
  // CHECK-NEXT: tess.mul %[[PV]], %{{.*}} : tensor<2x3x6xf32>, tensor<2x3x1xf32> -> tensor<2x3x6xf32>
  // CHECK-NOT:  tess.attention
  %0 = tess.attention %q, %k, %v mask %m scale = 0.5 : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<1x3x5xi1> -> tensor<2x3x6xf32>
  func.return %0 : tensor<2x3x6xf32>
}

// CHECK-LABEL: func.func @causal_value_gradient
func.func @causal_value_gradient(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>, %v: tensor<5x2xf32>, %l: tensor<3xf32>, %g: tensor<3x2xf32>) -> tensor<5x2xf32> {
  // CHECK:      %[[I:.*]] = tess.iota : tensor<3x1xi64>
  // CHECK-NEXT: %[[J:.*]] = tess.iota : tensor<1x5xi64>
  // CHECK:      tess.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x5xi1>, tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
  // CHECK:      %[[P:.*]] = tess.exp %{{.*}} : tensor<3x5xf32>
  // CHECK-NEXT: %[[PT:.*]] = tess.permute %[[P]] dims = [1, 0]
  // CHECK-NEXT: tess.matmul %[[PT]], %g : tensor<5x3xf32>, tensor<3x2xf32> -> tensor<5x2xf32>
  %0 = tess.attention_grad %q, %k, %v, %l, %l, %g wrt = "v" scale = 0.5 causal : tensor<3x4xf32>, tensor<5x4xf32>, tensor<5x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3x2xf32> -> tensor<5x2xf32>
  func.return %0 : tensor<5x2xf32>
}
