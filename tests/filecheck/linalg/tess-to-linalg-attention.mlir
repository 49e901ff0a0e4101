// The attention ops lower to calls of private declarations carrying tess.attention_kernel
// (what the kernel computes, the scale, causal), which tess-attention-kernels defines at
// the loop level: no linalg.generic, so no (L, S) scores tensor. An attention and the
// later attention_lse of the same operands share one call; so do the q, k and v gradients.
// RUN: tessc-opt %s -p tess-to-linalg | filecheck %s

func.func @grad(%q: tensor<2x3x4xf64>, %k: tensor<2x5x4xf64>, %v: tensor<2x5x6xf64>, %m: tensor<1x3x5xi1>, %g: tensor<2x3x6xf64>, %d: tensor<2x3xf64>) -> (tensor<2x3x6xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3x4xf64>) {
  %o = tess.attention %q, %k, %v mask %m scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<1x3x5xi1> -> tensor<2x3x6xf64>
  %l = tess.attention_lse %q, %k mask %m scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<1x3x5xi1> -> tensor<2x3xf64>
  %dk = tess.attention_grad %q, %k, %v, %l, %d, %g mask %m wrt = "k" scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3x6xf64>, tensor<1x3x5xi1> -> tensor<2x5x4xf64>
  %dv = tess.attention_grad %q, %k, %v, %l, %d, %g mask %m wrt = "v" scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3x6xf64>, tensor<1x3x5xi1> -> tensor<2x5x6xf64>
  %dq = tess.attention_grad %q, %k, %v, %l, %d, %g mask %m wrt = "q" scale = 0.5 : tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3x6xf64>, tensor<1x3x5xi1> -> tensor<2x3x4xf64>
  func.return %o, %dk, %dv, %dq : tensor<2x3x6xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3x4xf64>
}

// CHECK-LABEL: func.func @grad
// CHECK-NEXT:    %o, %l = func.call @attention_kernel_0(%q, %k, %v, %m) {tess.op = "tess.attention"} : (tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<1x3x5xi1>) -> (tensor<2x3x6xf64>, tensor<2x3xf64>)
// CHECK-NEXT:    %dk, %dv, %dq = func.call @attention_kernel_1(%q, %k, %v, %l, %d, %g, %m) {tess.op = "tess.attention_grad"}
// CHECK-SAME:      -> (tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3x4xf64>)
// CHECK-NEXT:    func.return %o, %dk, %dv, %dq
// CHECK-NOT:   linalg.generic


// A lone attention_lse (a second derivative's) is a kernel of its own, without v.

// CHECK-LABEL: func.func @lse_alone
func.func @lse_alone(%q: tensor<3x4xf32>, %k: tensor<5x4xf32>) -> tensor<3xf32> {
  // CHECK-NEXT: %0 = func.call @attention_kernel_2(%q, %k) {tess.op = "tess.attention_lse"} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3xf32>
  %0 = tess.attention_lse %q, %k scale = 0.5 causal : tensor<3x4xf32>, tensor<5x4xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// The declarations follow the functions.
// CHECK-NOT:   linalg.generic
// CHECK:       func.func private @attention_kernel_0(tensor<2x3x4xf64>, tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<1x3x5xi1>) -> (tensor<2x3x6xf64>, tensor<2x3xf64>) attributes {tess.attention_kernel = {computes = ["out", "lse"], scale = 5.000000e-01 : f64, causal = false}}
// CHECK-NEXT:  func.func private @attention_kernel_1({{.*}}) -> (tensor<2x5x4xf64>, tensor<2x5x6xf64>, tensor<2x3x4xf64>) attributes {tess.attention_kernel = {computes = ["dk", "dv", "dq"], scale = 5.000000e-01 : f64, causal = false}}
// CHECK-NEXT: func.func private @attention_kernel_2(tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3xf32> attributes {tess.attention_kernel = {computes = ["lse"], scale = 5.000000e-01 : f64, causal = true}}
