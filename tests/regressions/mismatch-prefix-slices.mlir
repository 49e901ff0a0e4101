// A prefix slice in one dim (offset 0, stride 1) next to a strided one: see
// grad-crash-cpu-concat-gradient-prefix-slice.mlir.
// fuzz: entry=f seed=1 grad=no
func.func @f(%x: tensor<4x5xf32>) -> tensor<2x3xf32> {
  %0 = tess.slice %x offsets = [0, 4] strides = [1, -2] : tensor<4x5xf32> -> tensor<2x3xf32>
  %1 = tess.slice %x offsets = [1, 0] strides = [2, 1] : tensor<4x5xf32> -> tensor<2x3xf32>
  %2 = tess.add %0, %1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %2 : tensor<2x3xf32>
}
