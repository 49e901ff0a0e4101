// The attention ops of tess_attention parse, verify and print in their custom form (an
// optional mask, causal as a flag), and their generic form round-trips.
// RUN: tessc-opt %s | filecheck %s
// RUN: tessc-opt %s --print-op-generic | tessc-opt | filecheck %s

// CHECK-LABEL: func.func @attention_ops
func.func @attention_ops(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>, %m: tensor<1x3x5xi1>, %a: tensor<2x1x5xf32>, %d: tensor<2x3xf32>, %g: tensor<2x3x6xf32>) {
  // CHECK-NEXT: %0 = tess.attention %q, %k, %v scale = 5.000000e-01 causal : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32> -> tensor<2x3x6xf32>
  %0 = tess.attention %q, %k, %v scale = 0.5 causal : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32> -> tensor<2x3x6xf32>
  // CHECK-NEXT: %1 = tess.attention %q, %k, %v mask %m scale = 2.500000e-01 : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<1x3x5xi1> -> tensor<2x3x6xf32>
  %1 = tess.attention %q, %k, %v mask %m scale = 0.25 : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<1x3x5xi1> -> tensor<2x3x6xf32>
  // CHECK-NEXT: %2 = tess.attention_lse %q, %k mask %a scale = 5.000000e-01 : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x1x5xf32> -> tensor<2x3xf32>
  %2 = tess.attention_lse %q, %k mask %a scale = 0.5 : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x1x5xf32> -> tensor<2x3xf32>
  // CHECK-NEXT: %3 = tess.attention_grad %q, %k, %v, %2, %d, %g wrt = "k" scale = 5.000000e-01 causal : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x6xf32> -> tensor<2x5x4xf32>
  %3 = tess.attention_grad %q, %k, %v, %2, %d, %g wrt = "k" scale = 0.5 causal : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3x6xf32> -> tensor<2x5x4xf32>
  func.return
}
